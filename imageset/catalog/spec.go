package catalog

import (
	"fmt"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/gapmirror/gapmirror/imageset/fbc"
	"github.com/gapmirror/gapmirror/imageset/spelling"
)

// FilterSpec says what to keep of a catalog (one mirror.operators[] entry of
// an ImageSetConfiguration).
type FilterSpec struct {
	// Full keeps every bundle of every kept channel. With no Packages, the
	// catalog is kept whole and unchanged.
	Full bool
	// Packages lists the packages to keep. Empty means every package, each
	// channel reduced to its head (unless Full).
	Packages []PackageSpec
	// SkipDependencies turns off pulling in the bundles that kept bundles
	// require (olm.package.required, olm.gvk.required).
	SkipDependencies bool
}

// PackageSpec selects one package and, within it, channels and versions.
type PackageSpec struct {
	Name string
	// Channels lists the channels to keep; empty means every channel.
	Channels []ChannelSpec
	// DefaultChannel replaces the package's default channel in the result;
	// it is required when the source default channel is not kept.
	DefaultChannel string
	// MinVersion and MaxVersion bound the versions kept in each kept channel
	// (inclusive; prerelease versions compare by semver precedence).
	MinVersion string
	MaxVersion string
	// VersionRange is an OLM v1 range (">=1.2, <2", "~1.4", "1.x || 2.1.x")
	// applied to each kept channel; it excludes MinVersion and MaxVersion.
	VersionRange string
	// Bundles names bundles to keep. Without a version range, channels that
	// hold listed bundles keep those (and what their upgrade path needs)
	// instead of their head; without Channels, only channels holding a
	// listed bundle are kept.
	Bundles []string
}

// ChannelSpec selects one channel and, optionally, versions within it.
type ChannelSpec struct {
	Name         string
	MinVersion   string
	MaxVersion   string
	VersionRange string
}

// versionSelector is a parsed version selection: min/max bounds or an OLM v1 range.
type versionSelector struct {
	desc  string // for reports and errors, e.g. `minVersion 1.2.0` or `versionRange ">=1.2"`
	min   *semver.Version
	max   *semver.Version
	rng   *fbc.Range
	loose *semver.Constraints // the range with prereleases allowed, to explain exclusions
}

func (s *versionSelector) contains(v *semver.Version) bool {
	if v == nil {
		return false
	}
	if s.rng != nil {
		return s.rng.Contains(v)
	}
	if s.min != nil && v.Compare(s.min) < 0 {
		return false
	}
	if s.max != nil && v.Compare(s.max) > 0 {
		return false
	}
	return true
}

// excludedPrerelease reports whether v is a prerelease the range would hold
// if OLM v1 ranges matched prereleases.
func (s *versionSelector) excludedPrerelease(v *semver.Version) bool {
	return s.loose != nil && v != nil && v.Prerelease() != "" && !s.contains(v) && s.loose.Check(v)
}

// parseSelector parses min/max/range fields; where names them for errors.
// It returns nil when no field is set.
func parseSelector(where, minV, maxV, rng string) (*versionSelector, error) {
	if rng != "" && (minV != "" || maxV != "") {
		return nil, fmt.Errorf("%s: versionRange cannot be combined with minVersion or maxVersion: use one or the other", where)
	}
	if rng != "" {
		r, err := fbc.ParseVersionRange(rng)
		if err != nil {
			return nil, fmt.Errorf("%s: versionRange: %w", where, err)
		}
		loose, _ := semver.NewConstraint(rng)
		if loose != nil {
			loose.IncludePrerelease = true
		}
		return &versionSelector{desc: fmt.Sprintf("versionRange %q", rng), rng: &r, loose: loose}, nil
	}
	if minV == "" && maxV == "" {
		return nil, nil
	}
	s := &versionSelector{}
	var parts []string
	if minV != "" {
		v, err := semver.NewVersion(minV)
		if err != nil {
			return nil, fmt.Errorf("%s: minVersion %q is not a version: %w", where, minV, err)
		}
		s.min = v
		parts = append(parts, "minVersion "+minV)
	}
	if maxV != "" {
		v, err := semver.NewVersion(maxV)
		if err != nil {
			return nil, fmt.Errorf("%s: maxVersion %q is not a version: %w", where, maxV, err)
		}
		s.max = v
		parts = append(parts, "maxVersion "+maxV)
	}
	if s.min != nil && s.max != nil && s.min.Compare(s.max) > 0 {
		return nil, fmt.Errorf("%s: minVersion %s is greater than maxVersion %s: swap them", where, minV, maxV)
	}
	s.desc = strings.Join(parts, ", ")
	return s, nil
}

// checkSpec validates the spec against the catalog before any filtering.
func checkSpec(c *fbc.Catalog, spec FilterSpec) error {
	var errs []string
	add := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	seen := map[string]bool{}
	for i, ps := range spec.Packages {
		if ps.Name == "" {
			add("packages[%d]: name is empty", i)
			continue
		}
		where := fmt.Sprintf("package %q", ps.Name)
		if seen[ps.Name] {
			add("%s is listed twice: merge the two entries", where)
			continue
		}
		seen[ps.Name] = true
		p := c.Package(ps.Name)
		if p == nil {
			add("%s is not in the catalog%s", where, suggest(ps.Name, c.PackageNames()))
			continue
		}
		pkgSel, err := parseSelector(where, ps.MinVersion, ps.MaxVersion, ps.VersionRange)
		if err != nil {
			errs = append(errs, err.Error())
		}
		if spec.Full && (pkgSel != nil || ps.MinVersion != "" || ps.MaxVersion != "" || ps.VersionRange != "") {
			add("%s: full: true keeps every version, so it cannot be combined with minVersion, maxVersion or versionRange: remove one", where)
		}
		chSeen := map[string]bool{}
		for j, cs := range ps.Channels {
			if cs.Name == "" {
				add("%s: channels[%d]: name is empty", where, j)
				continue
			}
			cwhere := fmt.Sprintf("package %q channel %q", ps.Name, cs.Name)
			if chSeen[cs.Name] {
				add("%s is listed twice: merge the two entries", cwhere)
				continue
			}
			chSeen[cs.Name] = true
			if p.Channel(cs.Name) == nil {
				add("%s does not exist (channels of %q: %s)%s", cwhere, ps.Name, strings.Join(p.ChannelNames(), ", "), suggest(cs.Name, p.ChannelNames()))
				continue
			}
			chSel, err := parseSelector(cwhere, cs.MinVersion, cs.MaxVersion, cs.VersionRange)
			if err != nil {
				errs = append(errs, err.Error())
			}
			if chSel != nil && (ps.MinVersion != "" || ps.MaxVersion != "" || ps.VersionRange != "") {
				add("%s: versions are set both for the package and for the channel: set them in one place", cwhere)
			}
			if chSel != nil && spec.Full {
				add("%s: full: true keeps every version, so it cannot be combined with minVersion, maxVersion or versionRange: remove one", cwhere)
			}
		}
		if ps.DefaultChannel != "" {
			switch {
			case p.Channel(ps.DefaultChannel) == nil:
				add("%s: defaultChannel %q is not a channel of the package (channels: %s)", where, ps.DefaultChannel, strings.Join(p.ChannelNames(), ", "))
			case len(ps.Channels) > 0 && !chSeen[ps.DefaultChannel]:
				add("%s: defaultChannel %q is not among the selected channels: add it to channels", where, ps.DefaultChannel)
			}
		}
		bSeen := map[string]bool{}
		for _, name := range ps.Bundles {
			if bSeen[name] {
				add("%s: bundle %q is listed twice", where, name)
				continue
			}
			bSeen[name] = true
			if p.Bundle(name) == nil {
				names := make([]string, len(p.Bundles))
				for k, b := range p.Bundles {
					names[k] = b.Name
				}
				add("%s: bundle %q does not exist%s", where, name, suggest(name, names))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("the catalog filter cannot be applied:\n  %s", strings.Join(errs, "\n  "))
	}
	return nil
}

// suggest returns " (did you mean …?)" with the names closest to name, or "".
func suggest(name string, names []string) string {
	type scored struct {
		name string
		d    int
	}
	var best []scored
	limit := max(2, len(name)/3)
	for _, n := range names {
		d := spelling.Distance(strings.ToLower(name), strings.ToLower(n))
		if d <= limit || strings.Contains(n, name) || strings.Contains(name, n) {
			best = append(best, scored{n, d})
		}
	}
	if len(best) == 0 {
		return ""
	}
	slices.SortFunc(best, func(a, b scored) int {
		if a.d != b.d {
			return a.d - b.d
		}
		return strings.Compare(a.name, b.name)
	})
	var out []string
	for i, b := range best {
		if i == 3 {
			break
		}
		out = append(out, fmt.Sprintf("%q", b.name))
	}
	return " (did you mean " + strings.Join(out, " or ") + "?)"
}
