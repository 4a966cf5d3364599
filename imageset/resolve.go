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

// Resolving is what a Contributor works on.
type Resolving struct {
	Set        *Set
	Resolution *Resolution
	Resolver   Resolver
	Parallel   int
	blocked    blockList
}

// Blocked returns the mirror.blockedImages rule that keeps an image out of
// the set, by its origin or its destination repository, or "".
func (r *Resolving) Blocked(origin, destRepo string) string {
	return r.blocked.match(origin, destRepo)
}

// Pin returns the digest of each reference: a canonical one's own, else
// the one its tag names upstream now, resolved in parallel. errs[i] says
// why refs[i] has none.
func (r *Resolving) Pin(ctx context.Context, refs []reference.Named) (ds []digest.Digest, errs []error) {
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

// PinnedImage is the Set entry of the image named (canonical, or tagged as
// reference.TagNameOnly leaves it) pinned to d, at its own repository path:
// by the digest tag when named by digest, else by its tag, and byTag says
// so (d is then what the tag names now).
func PinnedImage(named reference.Named, d digest.Digest, kind Kind) (img Image, byTag bool) {
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
	var wanted []wantedImage
	for i, ai := range cfg.Mirror.AdditionalImages {
		path := fmt.Sprintf("mirror.additionalImages[%d]", i)
		if _, ok := ai.OCILayoutPath(); ok {
			continue // read from disk by the contributor of SectionLayoutImages
		}
		w, err := additionalImage(ai.Name, ai.TargetRepo, ai.TargetTag, path)
		if err != nil {
			return nil, nil, err
		}
		w.platforms = PlatformNames(ai.Platforms)
		if b := blocked.match(w.origin.String(), w.destRepo); b != "" {
			return nil, nil, fmt.Errorf("%s.name: %s is blocked by %s: remove the image or the blocking rule", path, ai.Name, b)
		}
		wanted = append(wanted, w)
	}

	set := &Set{FormatVersion: SetFormatVersion}
	rs := &Resolving{Set: set, Resolution: res, Resolver: opts.Resolver, Parallel: opts.Parallel, blocked: blocked}
	refs := make([]reference.Named, len(wanted))
	for i, w := range wanted {
		refs[i] = w.origin
	}
	pinned, errs := rs.Pin(ctx, refs)
	for i, w := range wanted {
		if errs[i] != nil {
			res.Failed = append(res.Failed, Unresolved{Origin: w.origin.String(), Kind: KindAdditional, Why: w.why, Err: errs[i]})
			continue
		}
		img := Image{
			Source:      reference.TrimNamed(w.origin).String() + "@" + pinned[i].String(),
			Origin:      w.origin.String(),
			Digest:      pinned[i].String(),
			Destination: w.destRepo + ":" + w.tag(pinned[i]),
			Kind:        KindAdditional,
			Why:         []string{w.why},
			Platforms:   w.platforms,
		}
		if err := set.Add(img); err != nil {
			return nil, nil, fmt.Errorf("%s: %w: give one of them another targetRepo or targetTag", w.why, err)
		}
	}
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

type wantedImage struct {
	origin    reference.Named
	destRepo  string
	targetTag string
	why       string
	platforms []string
}

// tag is the destination tag: targetTag, else the origin's tag, else one
// derived from the digest ("sha256-<hex>", oc-mirror's scheme), because
// registries may garbage-collect untagged manifests.
func (w wantedImage) tag(d digest.Digest) string {
	if w.targetTag != "" {
		return w.targetTag
	}
	if t, ok := w.origin.(reference.Tagged); ok {
		return t.Tag()
	}
	return DigestTag(d)
}

// DigestTag is the tag an image known only by digest gets at the destination.
func DigestTag(d digest.Digest) string {
	return d.Algorithm().String() + "-" + d.Encoded()
}

func additionalImage(name, targetRepo, targetTag, path string) (wantedImage, error) {
	named, err := reference.ParseNormalizedNamed(name)
	if err != nil {
		return wantedImage{}, fmt.Errorf("%s.name: %q is not an image reference: %w", path, name, err)
	}
	named = reference.TagNameOnly(named)
	repo := reference.Path(named)
	if targetRepo != "" {
		repo = strings.Trim(targetRepo, "/")
	}
	return wantedImage{origin: named, destRepo: repo, targetTag: targetTag, why: path}, nil
}

type blockRule struct {
	re   *regexp.Regexp
	path string
}

type blockList []blockRule

func compileBlocked(list []BlockedImage) (blockList, error) {
	var out blockList
	for i, b := range list {
		re, err := regexp.Compile(b.Name)
		if err != nil {
			return nil, fmt.Errorf("mirror.blockedImages[%d].name: %q is not a valid regular expression: %w", i, b.Name, err)
		}
		out = append(out, blockRule{re: re, path: fmt.Sprintf("mirror.blockedImages[%d] (%q)", i, b.Name)})
	}
	return out, nil
}

// match returns the rule blocking an image (by origin or destination), or "".
func (l blockList) match(origin, dest string) string {
	for _, r := range l {
		if r.re.MatchString(origin) || r.re.MatchString(dest) {
			return r.path
		}
	}
	return ""
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
	for i, r := range m.Helm.Repositories {
		for j, c := range r.Charts {
			if len(c.Platforms) > 0 {
				parts = append(parts, fmt.Sprintf("mirror.helm.repositories[%d].charts[%d].platforms", i, j))
			}
		}
	}
	for i, c := range m.Helm.Local {
		if len(c.Platforms) > 0 {
			parts = append(parts, fmt.Sprintf("mirror.helm.local[%d].platforms", i))
		}
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
