package imageset

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
)

// Resolver finds the manifest digest an image reference names upstream.
type Resolver interface {
	ResolveDigest(ctx context.Context, ref reference.Named) (digest.Digest, error)
}

// ResolveOptions say how to resolve a configuration into a Set.
type ResolveOptions struct {
	// Resolver pins tags to digests; required when the config names tags.
	Resolver Resolver
	// Parallel is how many references are resolved at once (default 8).
	Parallel int
	// Contributors resolve the sections that need more than a tag lookup
	// (operator catalogs, release payloads); a section with no contributor
	// fails as not implemented.
	Contributors []Contributor
}

// Contributor adds the images of one configuration section to the set.
type Contributor interface {
	// Sections are the configuration paths it handles, e.g. "mirror.operators".
	Sections() []string
	// Contribute adds the section's images to r.Set and its failures to
	// r.Resolution. An error stops the whole resolution: return one only
	// for bad configuration or when nothing of the section can be trusted.
	Contribute(ctx context.Context, cfg *ImageSetConfiguration, r *Resolving) error
}

// Prefetcher is a Contributor whose slowest reads need nothing of the Set
// (an operator catalog's image): Resolve starts them while it pins the
// additional images' tags, and calls Contribute once they have ended. A
// prefetch that fails leaves the work, and its report, to Contribute.
type Prefetcher interface {
	Prefetch(ctx context.Context, cfg *ImageSetConfiguration, r *Resolving)
}

// Resolving is what a Contributor works on.
type Resolving struct {
	Set        *Set
	Resolution *Resolution
	Resolver   Resolver
	Parallel   int
	blocked    blockList
	cfg        *ImageSetConfiguration
}

// Blocked returns the mirror.blockedImages rule that keeps an image out of
// the set, by its origin or its destination repository, or "".
func (r *Resolving) Blocked(origin, destRepo string) string {
	return r.blocked.match(origin, destRepo)
}

// Block returns the mirror.blockedImages rule that keeps an image out of
// the set, by its origin or its destination repository, and records origin
// as blocked; "" when no rule does.
func (r *Resolving) Block(origin, destRepo string) string {
	b := r.blocked.match(origin, destRepo)
	if b != "" {
		r.Resolution.Blocked = append(r.Resolution.Blocked, origin)
	}
	return b
}

// SkipListed reports whether a mirror.blockedImages rule blocks an image
// the configuration lists itself at path (e.g. mirror.additionalImages[0]),
// by its origin or its destination repository. Such an image is skipped,
// as oc-mirror skips it, not refused: it is recorded as blocked and one
// warning names both places, the entry's file and line and the rule's.
func (r *Resolving) SkipListed(path, name, origin, destRepo string) bool {
	rule := r.blocked.find(origin, destRepo)
	if rule == nil {
		return false
	}
	r.Resolution.Blocked = append(r.Resolution.Blocked, origin)
	entry, at := path+".name", ""
	if p := r.cfg.position(entry); p != "" {
		entry = p + ": " + entry
	}
	if p := r.cfg.position(rule.field); p != "" {
		at = " at " + p
	}
	r.Warn("%s: %s is listed and also blocked by %s%s (%q): skipped, as oc-mirror skips it (not mirrored, not in IDMS/ITMS); remove the entry or the rule to silence this",
		entry, name, rule.field, at, rule.re.String())
	return true
}

// position is where path is in the configuration's file: "file:line",
// "line N" or "file"; "" when unknown (a configuration built in code).
func (c *ImageSetConfiguration) position(path string) string {
	if c == nil {
		return ""
	}
	file, line := c.File(), c.Line(path)
	switch {
	case file != "" && line > 0:
		return fmt.Sprintf("%s:%d", file, line)
	case line > 0:
		return fmt.Sprintf("line %d", line)
	}
	return file
}

// Warn records something worth telling the user that stops nothing.
func (r *Resolving) Warn(format string, args ...any) {
	r.Resolution.Warnings = append(r.Resolution.Warnings, fmt.Sprintf(format, args...))
}

// Fail records what a section could not resolve; the rest goes on.
func (r *Resolving) Fail(u Unresolved) {
	r.Resolution.Failed = append(r.Resolution.Failed, u)
}

// Wanted is an image a section names, before it is pinned to a digest.
type Wanted struct {
	// Named is the reference, canonical or tagged as reference.TagNameOnly
	// leaves it.
	Named reference.Named
	Kind  Kind
	// Why are the reasons it is in the set; Failing says why it is wanted
	// on a failure line (default: Why joined).
	Why     []string
	Failing string
	// Platforms makes the copy sparse (see Image.Platforms).
	Platforms []string
	// ByTag, when set, warns that only a tag names the image: "<ByTag>
	// names <ref> by tag only: mirrored as <digest>, the digest it has now".
	ByTag string
	// Repo and Tag, when set, replace the destination repository and tag
	// (targetRepo, targetTag).
	Repo, Tag string
	// Configured marks an image the configuration names itself: another
	// image at its destination is a configuration error that stops the
	// resolution, not a failure of the image.
	Configured bool
}

// AddPinned pins every wanted image (in parallel) and adds it to the Set.
// One that cannot be pinned, or whose destination another image of the set
// holds, fails alone; the error is for a Configured one's conflict.
func (r *Resolving) AddPinned(ctx context.Context, wanted []Wanted) error {
	refs := make([]reference.Named, len(wanted))
	for i, w := range wanted {
		refs[i] = w.Named
	}
	digests, errs := r.pin(ctx, refs)
	for i, w := range wanted {
		origin := w.Named.String()
		failing := w.Failing
		if failing == "" {
			failing = strings.Join(w.Why, "; ")
		}
		if errs[i] != nil {
			r.Fail(Unresolved{Origin: origin, Kind: w.Kind, Why: failing, Err: errs[i]})
			continue
		}
		img, byTag := pinnedImage(w.Named, digests[i], w.Kind)
		if byTag && w.ByTag != "" {
			r.Warn("%s names %s by tag only: mirrored as %s, the digest it has now", w.ByTag, origin, digests[i])
		}
		if w.Repo != "" || w.Tag != "" {
			repo, tag, _ := strings.Cut(img.Destination, ":")
			if w.Repo != "" {
				repo = w.Repo
			}
			if w.Tag != "" {
				tag = w.Tag
			}
			img.Destination = repo + ":" + tag
		}
		img.Why, img.Platforms = w.Why, w.Platforms
		if err := r.Set.Add(img); err != nil {
			if w.Configured {
				return fmt.Errorf("%s: %w: give one of them another targetRepo or targetTag", failing, err)
			}
			r.Fail(Unresolved{Origin: origin, Kind: w.Kind, Why: failing, Err: err})
		}
	}
	return nil
}

// pin returns the digest of each reference: a canonical one's own, else
// the one its tag names upstream now, resolved in parallel. errs[i] says
// why refs[i] has none.
func (r *Resolving) pin(ctx context.Context, refs []reference.Named) (ds []digest.Digest, errs []error) {
	ds, errs = make([]digest.Digest, len(refs)), make([]error, len(refs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(r.Parallel, 1))
	for i, ref := range refs {
		if c, ok := ref.(reference.Canonical); ok {
			ds[i] = c.Digest()
			continue
		}
		if r.Resolver == nil {
			errs[i] = fmt.Errorf("no registry access to resolve the tag of %s", ref)
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			ds[i], errs[i] = r.Resolver.ResolveDigest(ctx, ref)
		}()
	}
	wg.Wait()
	return ds, errs
}

// pinnedImage is the Set entry of the image named (canonical, or tagged as
// reference.TagNameOnly leaves it) pinned to d, at its own repository path:
// by the digest tag when named by digest, else by its tag, and byTag says
// so (d is then what the tag names now).
func pinnedImage(named reference.Named, d digest.Digest, kind Kind) (img Image, byTag bool) {
	tag := DigestTag(d)
	if _, byDigest := named.(reference.Canonical); !byDigest {
		tag, byTag = named.(reference.Tagged).Tag(), true
	}
	return Image{
		Source:      reference.TrimNamed(named).String() + "@" + d.String(),
		Origin:      named.String(),
		Digest:      d.String(),
		Destination: reference.Path(named) + ":" + tag,
		Kind:        kind,
	}, byTag
}

// Unresolved is an image of the configuration that could not be pinned to a
// digest, with the reason. It is reported and the rest of the Set goes on.
type Unresolved struct {
	Origin string
	Kind   Kind
	Why    string
	Err    error
	// NotImage marks a failure of something that is not an image reference
	// (a helm chart that could not be read or rendered, a rendered value
	// that is no reference): Origin names it for the user only.
	NotImage bool
}

// Resolution is the outcome of Resolve besides the Set itself.
type Resolution struct {
	// Blocked lists the references mirror.blockedImages kept out of the set.
	Blocked []string
	// Failed lists the images that could not be resolved.
	Failed []Unresolved
	// Warnings are worth telling the user but stop nothing.
	Warnings []string
}

// Resolve turns the configuration into a Set: every image pinned to a digest,
// with its destination and the reason it is included.
func Resolve(ctx context.Context, cfg *ImageSetConfiguration, opts ResolveOptions) (*Set, *Resolution, error) {
	handled := map[string]bool{}
	for _, c := range opts.Contributors {
		for _, s := range c.Sections() {
			handled[s] = true
		}
	}
	if err := notImplemented(cfg, handled); err != nil {
		return nil, nil, err
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 8
	}
	blocked, err := compileBlocked(cfg.Mirror.BlockedImages)
	if err != nil {
		return nil, nil, err
	}
	res := &Resolution{}
	set := &Set{FormatVersion: SetFormatVersion}
	rs := &Resolving{Set: set, Resolution: res, Resolver: opts.Resolver, Parallel: opts.Parallel, blocked: blocked, cfg: cfg}
	// Over a WAN the catalogs' reads and the tags' pins each wait round
	// trips: side by side, the shorter costs nothing.
	pctx, stop := context.WithCancel(ctx)
	var prefetch sync.WaitGroup
	defer func() { stop(); prefetch.Wait() }()
	for _, c := range opts.Contributors {
		if p, ok := c.(Prefetcher); ok {
			prefetch.Go(func() { p.Prefetch(pctx, cfg, rs) })
		}
	}
	var wanted []Wanted
	for i, ai := range cfg.Mirror.AdditionalImages {
		path := fmt.Sprintf("mirror.additionalImages[%d]", i)
		if _, ok := ai.OCILayoutPath(); ok {
			continue // read from disk by the contributor of SectionLayoutImages
		}
		named, err := reference.ParseNormalizedNamed(ai.Name)
		if err != nil {
			return nil, nil, fmt.Errorf("%s.name: %q is not an image reference: %w", path, ai.Name, err)
		}
		named = reference.TagNameOnly(named)
		w := Wanted{Named: named, Kind: KindAdditional, Why: []string{path}, Platforms: PlatformNames(ai.Platforms), Repo: strings.Trim(ai.TargetRepo, "/"), Tag: ai.TargetTag, Configured: true}
		if t, ok := named.(reference.Tagged); ok && w.Tag == "" {
			w.Tag = t.Tag() // name:tag@digest keeps its tag at the destination
		}
		if rs.SkipListed(path, ai.Name, named.String(), w.destRepo()) {
			continue
		}
		wanted = append(wanted, w)
	}
	if err := rs.AddPinned(ctx, wanted); err != nil {
		return nil, nil, err
	}
	prefetch.Wait()
	for _, c := range opts.Contributors {
		if err := c.Contribute(ctx, cfg, rs); err != nil {
			return nil, nil, err
		}
	}
	set.Sort()
	sort.Slice(res.Failed, func(a, b int) bool { return res.Failed[a].Origin < res.Failed[b].Origin })
	// Sections may block the same image (a component of several releases): once each.
	sort.Strings(res.Blocked)
	res.Blocked = slices.Compact(res.Blocked)
	return set, res, nil
}

// destRepo is the repository the image goes to under the mirror root.
func (w Wanted) destRepo() string {
	if w.Repo != "" {
		return w.Repo
	}
	return reference.Path(w.Named)
}

// DigestTag is the tag an image known only by digest gets at the destination.
func DigestTag(d digest.Digest) string {
	return d.Algorithm().String() + "-" + d.Encoded()
}

type blockRule struct {
	re *regexp.Regexp
	// path names the rule in messages, field is its field path
	// (mirror.blockedImages[0].name), for its line.
	path, field string
}

type blockList []blockRule

func compileBlocked(list []BlockedImage) (blockList, error) {
	var out blockList
	for i, b := range list {
		re, err := regexp.Compile(b.Name)
		if err != nil {
			return nil, fmt.Errorf("mirror.blockedImages[%d].name: %q is not a valid regular expression: %w", i, b.Name, err)
		}
		out = append(out, blockRule{re: re, path: fmt.Sprintf("mirror.blockedImages[%d] (%q)", i, b.Name), field: fmt.Sprintf("mirror.blockedImages[%d].name", i)})
	}
	return out, nil
}

// match returns the rule blocking an image (by origin or destination), or "".
func (l blockList) match(origin, dest string) string {
	if r := l.find(origin, dest); r != nil {
		return r.path
	}
	return ""
}

// find returns the rule blocking an image (by origin or destination), or nil.
func (l blockList) find(origin, dest string) *blockRule {
	for i, r := range l {
		if r.re.MatchString(origin) || r.re.MatchString(dest) {
			return &l[i]
		}
	}
	return nil
}

// notImplemented fails loudly for configuration sections this version
// parses but cannot mirror yet, instead of silently skipping them.
// SectionLayoutImages is the section a contributor claims to mirror the
// additional images that are OCI layouts on disk (oci: names).
const SectionLayoutImages = "mirror.additionalImages (oci:)"

func notImplemented(cfg *ImageSetConfiguration, handled map[string]bool) error {
	var parts []string
	m := cfg.Mirror
	if len(m.Operators) > 0 && !handled["mirror.operators"] {
		parts = append(parts, "mirror.operators")
	}
	if (len(m.Platform.Channels) > 0 || m.Platform.Release != "" || m.Platform.Graph || m.Platform.KubeVirtContainer) && !handled["mirror.platform"] {
		parts = append(parts, "mirror.platform")
	}
	if (len(m.Helm.Repositories) > 0 || len(m.Helm.Local) > 0) && !handled["mirror.helm"] {
		parts = append(parts, "mirror.helm")
	}
	for i, ai := range m.AdditionalImages {
		if _, ok := ai.OCILayoutPath(); ok && !handled[SectionLayoutImages] {
			parts = append(parts, fmt.Sprintf("mirror.additionalImages[%d] (an oci: layout)", i))
		}
	}
	if len(m.Samples) > 0 {
		parts = append(parts, "mirror.samples")
	}
	if len(parts) == 0 {
		return nil
	}
	return fmt.Errorf("%s: not supported by this version of gapmirror yet; remove it from the configuration (nothing was mirrored)", strings.Join(parts, ", "))
}
