package imageset

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"
	"github.com/distribution/reference"

	"github.com/gapmirror/gapmirror/imageset/helm"
)

// Architectures accepted in mirror.platform.architectures.
var releaseArchitectures = []string{"amd64", "arm64", "ppc64le", "s390x", "multi"}

var (
	// repoPathPattern is a repository path without registry, tag or digest (as in distribution/reference).
	repoPathPattern = regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$`)
	tagPattern      = regexp.MustCompile(`^` + reference.TagRegexp.String() + `$`)
)

// Validate checks the configuration's content against every rule and returns
// all problems as FieldErrors (nil when valid). Loading already validates;
// kind and apiVersion are checked by the loader only.
func (c *ImageSetConfiguration) Validate() error {
	if errs := c.validate(); len(errs) > 0 {
		return errs
	}
	return nil
}

// Validate checks the configuration's content against every rule and returns
// all problems as FieldErrors (nil when valid). Loading already validates;
// kind and apiVersion are checked by the loader only.
func (c *DeleteImageSetConfiguration) Validate() error {
	if errs := c.validate(); len(errs) > 0 {
		return errs
	}
	return nil
}

func (c *ImageSetConfiguration) validate() FieldErrors {
	v := &validator{src: c.src}
	switch {
	case c.ArchiveSize < 0:
		v.add("archiveSize", "%d is negative: set a size in GiB, or 0 for the default (%d GiB)", c.ArchiveSize, defaultArchiveSizeGiB)
	case c.ArchiveSize > maxArchiveSizeGiB:
		v.add("archiveSize", "%d GiB is too large: the size is in GiB, not bytes", c.ArchiveSize)
	}
	v.content("mirror", c.Mirror)
	c.warnings = v.warns
	return v.errs
}

// Warnings are what loading noticed and let pass, each with its file, line
// and field (a name read as Docker Hub's): for the run to say.
func (c *ImageSetConfiguration) Warnings() FieldErrors { return c.warnings }

func (c *DeleteImageSetConfiguration) validate() FieldErrors {
	v := &validator{src: c.src}
	v.content("delete", Mirror(c.Delete))
	return v.errs
}

// validator collects FieldErrors, locating each path through the source.
type validator struct {
	src   *source
	errs  FieldErrors
	warns FieldErrors
}

// warn records something the run does that the admin may not expect;
// loading goes on (ImageSetConfiguration.Warnings).
func (v *validator) warn(path, format string, args ...any) {
	v.warns = append(v.warns, FieldError{File: v.src.fileName(), Line: v.src.line(path), Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (v *validator) add(path, format string, args ...any) {
	v.errs = append(v.errs, FieldError{File: v.src.fileName(), Line: v.src.line(path), Path: path, Msg: fmt.Sprintf(format, args...)})
}

// at describes where path is, for messages that point at a second place.
func (v *validator) at(path string) string {
	if l := v.src.line(path); l > 0 {
		return fmt.Sprintf("%s, line %d", path, l)
	}
	return path
}

func (v *validator) content(prefix string, m Mirror) {
	v.platform(prefix+".platform", m.Platform)
	v.operators(prefix+".operators", m.Operators)
	for i, img := range m.AdditionalImages {
		v.additionalImage(fmt.Sprintf("%s.additionalImages[%d]", prefix, i), img)
	}
	v.helm(prefix+".helm", m.Helm)
	// The rules that compile, as Resolve holds them (compileBlocked), each
	// named by its field path.
	var rules blockList
	for i, b := range m.BlockedImages {
		p := fmt.Sprintf("%s.blockedImages[%d].name", prefix, i)
		if b.Name == "" {
			v.add(p, "missing: set a regular expression matching the images to block")
			continue
		}
		re, err := regexp.Compile(b.Name)
		if err != nil {
			v.add(p, "%q is not a valid regular expression (Go syntax): %v", b.Name, err)
			continue
		}
		rules = append(rules, blockRule{re: re, path: p})
	}
	if prefix != "mirror" || len(rules) == 0 {
		return
	}
	// A catalog its own configuration blocks is a contradiction said now,
	// before the run creates anything (resolving says it too). An
	// additional image listed and blocked is not: it is skipped with a
	// warning, as oc-mirror skips it (Resolving.SkipListed).
	for i, oc := range m.Operators {
		if _, isLayout := oc.OCILayoutPath(); isLayout {
			continue
		}
		named, err := reference.ParseNormalizedNamed(oc.Catalog)
		if err != nil {
			continue // said by operators
		}
		if r := rules.find(reference.TagNameOnly(named).String(), reference.Path(named)); r != nil {
			v.add(fmt.Sprintf("%s.operators[%d].catalog", prefix, i), "%s is blocked by %s (%q): remove the catalog or the blocking rule", oc.Catalog, v.at(r.path), r.re.String())
		}
	}
}

func (v *validator) platform(prefix string, p Platform) {
	seen := map[string]string{}
	for i, ch := range p.Channels {
		cp := fmt.Sprintf("%s.channels[%d]", prefix, i)
		if ch.Name == "" {
			v.add(cp+".name", "missing: set the release channel, e.g. stable-4.18")
		} else {
			key := string(ch.ReleaseType()) + "/" + ch.Name
			if first, dup := seen[key]; dup {
				v.add(cp+".name", "duplicate release channel %q (also %s): merge the two entries", ch.Name, v.at(first))
			} else {
				seen[key] = cp
			}
		}
		if ch.Type != "" && ch.Type != releaseTypeOCP && ch.Type != ReleaseTypeOKD {
			v.add(cp+".type", "%q is not a release type: use ocp (the default) or okd", ch.Type)
		}
		v.bounds(cp, ch.MinVersion, ch.MaxVersion, releaseVersion)
	}
	archs := map[string]bool{}
	for i, a := range p.Architectures {
		ap := fmt.Sprintf("%s.architectures[%d]", prefix, i)
		switch {
		case !slices.Contains(releaseArchitectures, a):
			hint := ""
			if best := suggest(a, releaseArchitectures); best != "" {
				hint = fmt.Sprintf(" (did you mean %s?)", best)
			}
			v.add(ap, "%q is not a release architecture: use one of %s%s", a, strings.Join(releaseArchitectures, ", "), hint)
		case archs[a]:
			v.add(ap, "%q is listed twice", a)
		}
		archs[a] = true
	}
	if len(p.Platforms) > 0 && len(p.Architectures) > 0 {
		v.add(prefix+".platforms", "platforms and architectures are exclusive: keep platforms (architectures is deprecated) and remove architectures")
	}
	v.imagePlatforms(prefix+".platforms", p.Platforms)
	if p.Release != "" {
		if err := checkImageReference(p.Release); err != nil {
			v.add(prefix+".release", "%q is not a valid release image reference: %v", p.Release, err)
		} else if w := ShortNameWarning(p.Release); w != "" {
			v.warn(prefix+".release", "%s", w)
		}
	}
}

func (v *validator) operators(prefix string, catalogs []OperatorCatalog) {
	seen := map[string]string{}
	for i, o := range catalogs {
		op := fmt.Sprintf("%s[%d]", prefix, i)
		catalogOK := true
		switch {
		case o.Catalog == "":
			v.add(op+".catalog", "missing: set the catalog image, e.g. registry.redhat.io/redhat/redhat-operator-index:v4.18")
			catalogOK = false
		default:
			if err := checkCatalogReference(o.Catalog); err != nil {
				v.add(op+".catalog", "%q is not a valid catalog reference (an image reference, oci:///absolute/path or oci:relative/path): %v", o.Catalog, err)
				catalogOK = false
			} else if _, isLayout := o.OCILayoutPath(); !isLayout {
				if w := ShortNameWarning(o.Catalog); w != "" {
					v.warn(op+".catalog", "%s", w)
				}
			}
		}
		targetOK := true
		if o.TargetCatalog != "" {
			if err := checkRepoPath(o.TargetCatalog); err != nil {
				v.add(op+".targetCatalog", "%q is not a repository path: %v", o.TargetCatalog, err)
				targetOK = false
			}
		}
		if o.TargetTag != "" && !tagPattern.MatchString(o.TargetTag) {
			v.add(op+".targetTag", "%q is not a valid tag: up to 128 letters, digits, '_', '.', '-', not starting with '.' or '-'", o.TargetTag)
			targetOK = false
		}
		if catalogOK && targetOK {
			key := catalogKey(o)
			if first, dup := seen[key]; dup {
				v.add(op+".catalog", "duplicate catalog: this entry and %s, both mirror to %s; set a different targetCatalog or targetTag on one of them", v.at(first), key)
			} else {
				seen[key] = op
			}
		}
		v.imagePlatforms(op+".platforms", o.Platforms)
		v.packages(op, o)
	}
}

func (v *validator) packages(op string, o OperatorCatalog) {
	seen := map[string]string{}
	for i, p := range o.Packages {
		pp := fmt.Sprintf("%s.packages[%d]", op, i)
		if p.Name == "" {
			v.add(pp+".name", "missing: set the operator package name")
		} else if first, dup := seen[p.Name]; dup {
			v.add(pp+".name", "duplicate package %q (also %s): merge the two entries", p.Name, v.at(first))
		} else {
			seen[p.Name] = pp
		}
		v.bounds(pp, p.MinVersion, p.MaxVersion, bundleVersion)
		v.versionRange(pp, p.VersionRange)
		pkgMinMax := p.MinVersion != "" || p.MaxVersion != ""
		if pkgMinMax && p.VersionRange != "" {
			v.add(pp+".versionRange", "versionRange and minVersion/maxVersion are exclusive: use one of them")
		}
		channels := map[string]string{}
		var names []string
		for j, ch := range p.Channels {
			cp := fmt.Sprintf("%s.channels[%d]", pp, j)
			if ch.Name == "" {
				v.add(cp+".name", "missing: set the channel name")
			} else if first, dup := channels[ch.Name]; dup {
				v.add(cp+".name", "duplicate channel %q (also %s): merge the two entries", ch.Name, v.at(first))
			} else {
				channels[ch.Name] = cp
				names = append(names, ch.Name)
			}
			v.bounds(cp, ch.MinVersion, ch.MaxVersion, bundleVersion)
			v.versionRange(cp, ch.VersionRange)
			chMinMax := ch.MinVersion != "" || ch.MaxVersion != ""
			if chMinMax && ch.VersionRange != "" {
				v.add(cp+".versionRange", "versionRange and minVersion/maxVersion are exclusive: use one of them")
			}
			if (pkgMinMax || p.VersionRange != "") && (chMinMax || ch.VersionRange != "") {
				v.add(firstSet(cp, ch.MinVersion, ch.MaxVersion, ch.VersionRange),
					"a version range is set both on package %q and on its channel %q: set it in one place (a package-level range applies to every selected channel)", p.Name, ch.Name)
			}
		}
		if p.DefaultChannel != "" && len(p.Channels) > 0 {
			if _, ok := channels[p.DefaultChannel]; !ok {
				v.add(pp+".defaultChannel", "%q is not one of the listed channels (%s): the default channel must be mirrored too", p.DefaultChannel, strings.Join(names, ", "))
			}
		}
		v.bundles(pp, p)
		if o.Full && p.hasVersionFilter() {
			v.add(versionFilterPath(pp, p), "cannot be combined with full: true on the catalog (%s): full takes every bundle of the selected channels; remove one of them", v.at(op+".full"))
		}
	}
}

func (v *validator) bundles(pp string, p Package) {
	if len(p.Bundles) == 0 {
		return
	}
	if p.MinVersion != "" || p.MaxVersion != "" || p.VersionRange != "" {
		v.add(pp+".bundles", "bundles and a version range are exclusive: bundles already names the exact bundles to mirror")
	}
	seen := map[string]string{}
	for i, b := range p.Bundles {
		bp := fmt.Sprintf("%s.bundles[%d].name", pp, i)
		switch first, dup := seen[b.Name]; {
		case b.Name == "":
			v.add(bp, "missing: set the bundle name, e.g. %s.v1.2.3", orDefault(p.Name, "operator"))
		case dup:
			v.add(bp, "duplicate bundle %q (also %s)", b.Name, v.at(first))
		default:
			seen[b.Name] = bp
		}
	}
}

func (v *validator) additionalImage(ip string, img AdditionalImage) {
	layout, isLayout := img.OCILayoutPath()
	switch {
	case img.Name == "":
		v.add(ip+".name", "missing: set the image reference, e.g. registry.redhat.io/ubi9/ubi:latest")
	case isLayout && layout == "":
		v.add(ip+".name", "%q names no directory: write oci:///absolute/path or oci:relative/path of an OCI image layout", img.Name)
	case isLayout && len(img.Platforms) > 0:
		v.add(ip+".platforms", "an OCI layout image (%s) is mirrored whole: remove platforms", img.Name)
	case isLayout:
	case checkImageReference(img.Name) != nil:
		err := checkImageReference(img.Name)
		v.add(ip+".name", "%q is not a valid image reference: %v", img.Name, err)
	default:
		if w := ShortNameWarning(img.Name); w != "" { // checkImageReference refused a docker:// prefix
			v.warn(ip+".name", "%s", w)
		}
	}
	if img.TargetRepo != "" {
		if err := checkRepoPath(img.TargetRepo); err != nil {
			v.add(ip+".targetRepo", "%q is not a repository path: %v", img.TargetRepo, err)
		}
	}
	if img.TargetTag != "" && !tagPattern.MatchString(img.TargetTag) {
		v.add(ip+".targetTag", "%q is not a valid tag: up to 128 letters, digits, '_', '.', '-', not starting with '.' or '-'", img.TargetTag)
	}
	v.imagePlatforms(ip+".platforms", img.Platforms)
}

func (v *validator) helm(prefix string, h Helm) {
	names := map[string]string{}
	for i, r := range h.Repositories {
		rp := fmt.Sprintf("%s.repositories[%d]", prefix, i)
		if r.Name == "" {
			v.add(rp+".name", "missing: set a name for the chart repository")
		} else if first, dup := names[r.Name]; dup {
			v.add(rp+".name", "duplicate repository name %q (also %s)", r.Name, v.at(first))
		} else {
			names[r.Name] = rp
		}
		if r.URL == "" {
			v.add(rp+".url", "missing: set the chart repository URL, e.g. https://charts.example.com")
		} else if u, err := url.Parse(r.URL); err != nil {
			v.add(rp+".url", "%q is not a URL: %v", r.URL, err)
		} else if (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "oci") || u.Host == "" {
			v.add(rp+".url", "%q is not a chart repository URL: expected http://, https:// or oci:// followed by a host", r.URL)
		}
		for j, c := range r.Charts {
			chp := fmt.Sprintf("%s.charts[%d]", rp, j)
			if c.Name == "" {
				v.add(chp+".name", "missing: set the chart name")
			}
			v.imagePaths(chp+".imagePaths", c.ImagePaths)
			v.imagePlatforms(chp+".platforms", c.Platforms)
		}
	}
	for i, c := range h.Local {
		lp := fmt.Sprintf("%s.local[%d]", prefix, i)
		if c.Name == "" {
			v.add(lp+".name", "missing: set the chart name")
		}
		if c.Path == "" {
			v.add(lp+".path", "missing: set the path of the chart directory or .tgz")
		}
		v.imagePaths(lp+".imagePaths", c.ImagePaths)
		v.imagePlatforms(lp+".platforms", c.Platforms)
	}
}

// Image platform values are Go's GOOS and GOARCH names, as the OCI image
// spec prescribes; a typo would otherwise silently select nothing.
var (
	platformOSes  = []string{"aix", "android", "darwin", "dragonfly", "freebsd", "illumos", "ios", "js", "linux", "netbsd", "openbsd", "plan9", "solaris", "wasip1", "windows"}
	platformArchs = []string{"386", "amd64", "arm", "arm64", "loong64", "mips", "mips64", "mips64le", "mipsle", "ppc64", "ppc64le", "riscv64", "s390x", "wasm"}
)

func (v *validator) imagePaths(prefix string, exprs []string) {
	for i, e := range exprs {
		if _, err := helm.CompileImagePath(e); err != nil {
			v.add(fmt.Sprintf("%s[%d]", prefix, i), "%v", err)
		}
	}
}

func (v *validator) imagePlatforms(prefix string, ps []ImagePlatform) {
	seen := map[ImagePlatform]bool{}
	for i, p := range ps {
		pp := fmt.Sprintf("%s[%d]", prefix, i)
		switch {
		case p.OS == "":
			v.add(pp+".os", "missing: set the operating system, e.g. linux")
		case !slices.Contains(platformOSes, p.OS):
			v.add(pp+".os", "%q is not an image operating system: use one of %s (OpenShift images are linux)", p.OS, strings.Join(platformOSes, ", "))
		}
		switch {
		case p.Architecture == "":
			v.add(pp+".architecture", "missing: set the architecture, e.g. amd64")
		case p.Architecture == "x86_64" || p.Architecture == "aarch64":
			v.add(pp+".architecture", "%q is a release name, not an image architecture: use %s", p.Architecture, map[string]string{"x86_64": "amd64", "aarch64": "arm64"}[p.Architecture])
		case !slices.Contains(platformArchs, p.Architecture):
			v.add(pp+".architecture", "%q is not an image architecture: use one of %s (a variant such as arm64/v8 cannot be selected; every variant of the architecture is kept)", p.Architecture, strings.Join(platformArchs, ", "))
		}
		if seen[p] {
			v.add(pp, "%s is listed twice", p)
		}
		seen[p] = true
	}
}

// versionParser parses one kind of version (release or bundle) with a hint for failures.
type versionParser struct {
	parse func(string) (*semver.Version, error)
	hint  string
}

var (
	// releaseVersion is a full x.y.z OpenShift release version; 4.18 alone is ambiguous (4.18.0 or latest 4.18.z).
	releaseVersion = versionParser{semver.StrictNewVersion, "write a full x.y.z release version, e.g. 4.18.0"}
	// bundleVersion is an operator bundle version, parsed as leniently as oc-mirror does.
	bundleVersion = versionParser{semver.NewVersion, "write a semantic version, e.g. 1.2.3"}
)

// bounds checks minVersion/maxVersion under prefix: syntax, and min ≤ max.
func (v *validator) bounds(prefix, minVersion, maxVersion string, vp versionParser) {
	parse := func(field, s string) *semver.Version {
		if s == "" {
			return nil
		}
		ver, err := vp.parse(s)
		if err != nil {
			v.add(prefix+"."+field, "%q is not a valid version: %s", s, vp.hint)
			return nil
		}
		return ver
	}
	lo, hi := parse("minVersion", minVersion), parse("maxVersion", maxVersion)
	if lo != nil && hi != nil && hi.LessThan(lo) {
		v.add(prefix+".maxVersion", "%s is lower than minVersion %s", maxVersion, minVersion)
	}
}

func (v *validator) versionRange(prefix, r string) {
	if r == "" {
		return
	}
	if _, err := semver.NewConstraint(r); err != nil {
		v.add(prefix+".versionRange", "%q is not a valid version range (%v); examples: \">=1.2.0 <1.4.0\", \"~1.2\", \"1.2.x || 1.4.x\"", r, err)
	}
}

// CheckImageReference checks an image reference as the configuration's
// are: a registry image reference, without a transport prefix.
func CheckImageReference(ref string) error { return checkImageReference(ref) }

// checkImageReference checks that ref is a registry image reference (no transport prefix).
func checkImageReference(ref string) error {
	if rest, ok := strings.CutPrefix(ref, "docker://"); ok {
		return fmt.Errorf("write it without the docker:// prefix: %s", rest)
	}
	if strings.Contains(ref, "://") {
		return fmt.Errorf("an image reference has no transport prefix")
	}
	_, err := reference.ParseNormalizedNamed(ref)
	return err
}

// ShortNameWarning is the warning for a reference that names no registry
// (ubi9/ubi:latest), or "" when it names one. Such a name is read as
// oc-mirror and skopeo read it, from Docker Hub, so that their
// configurations run as they are; but podman and CRI-O would search
// registries.conf's unqualified-search-registries, so the admin is told.
func ShortNameWarning(ref string) string {
	if !shortName(ref) {
		return ""
	}
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%q names no registry: read as %s (Docker Hub), as oc-mirror and skopeo read it, though podman would search registries.conf's unqualified-search-registries; write the registry in full to say which, e.g. registry.redhat.io/%s or %s", ref, named, ref, named)
}

// shortName reports whether ref names no registry (ubi9/ubi:latest,
// nginx): its first component is not a host, by the rule of the reference
// grammar (a dot, a port or localhost, and no capitals).
func shortName(ref string) bool {
	first, _, ok := strings.Cut(ref, "/")
	return !ok || !strings.ContainsAny(first, ".:") && first != "localhost" && strings.ToLower(first) == first
}

// checkCatalogReference checks a catalog: an image reference or an oci: layout path.
func checkCatalogReference(ref string) error {
	if path, ok := (OperatorCatalog{Catalog: ref}).OCILayoutPath(); ok {
		if path == "" {
			return fmt.Errorf("the OCI layout path is empty")
		}
		return nil
	}
	return checkImageReference(ref)
}

// checkRepoPath checks a target repository path (no registry, tag or digest).
func checkRepoPath(p string) error {
	switch {
	case strings.Contains(p, "@"):
		return fmt.Errorf("it must not contain a digest")
	case strings.Contains(p, ":"):
		return fmt.Errorf("it must not contain a tag or port; put a tag in targetTag")
	case !repoPathPattern.MatchString(p):
		return fmt.Errorf("expected lowercase path components separated by '/', each made of [a-z0-9] joined by '.', '_', '__' or '-'")
	}
	return nil
}

// catalogKey is where a catalog lands on the mirror, relative to the mirror
// root (repository path and tag): two catalogs with the same key collide.
func catalogKey(o OperatorCatalog) string {
	var repo, tag string
	if path, ok := o.OCILayoutPath(); ok {
		repo = "oci:" + path
	} else if named, err := reference.ParseNormalizedNamed(o.Catalog); err == nil {
		repo = reference.Path(named)
		switch r := named.(type) {
		case reference.Tagged:
			tag = r.Tag()
		case reference.Digested:
			tag = r.Digest().String()
		default:
			tag = "latest"
		}
	}
	if o.TargetCatalog != "" {
		repo = o.TargetCatalog
	}
	if o.TargetTag != "" {
		tag = o.TargetTag
	}
	if tag == "" {
		return repo
	}
	if strings.Contains(tag, ":") {
		return repo + "@" + tag
	}
	return repo + ":" + tag
}

// versionFilterPath is the path of the first version or bundle filter of a package.
func versionFilterPath(pp string, p Package) string {
	if path := firstSet(pp, p.MinVersion, p.MaxVersion, p.VersionRange); path != pp {
		return path
	}
	if len(p.Bundles) > 0 {
		return pp + ".bundles"
	}
	for j, ch := range p.Channels {
		cp := fmt.Sprintf("%s.channels[%d]", pp, j)
		if path := firstSet(cp, ch.MinVersion, ch.MaxVersion, ch.VersionRange); path != cp {
			return path
		}
	}
	return pp
}

// firstSet returns the path of the first non-empty of minVersion, maxVersion, versionRange under prefix.
func firstSet(prefix, minVersion, maxVersion, versionRange string) string {
	switch {
	case minVersion != "":
		return prefix + ".minVersion"
	case maxVersion != "":
		return prefix + ".maxVersion"
	case versionRange != "":
		return prefix + ".versionRange"
	}
	return prefix
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
