package imageset

import (
	"fmt"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/gapmirror/gapmirror/imageset/release"
)

// Subset matches the entries of a configuration (disk-to-mirror's -c) to
// those of the configuration an archive was made from, as written (Made)
// or pinned (Pinned), so that disk-to-mirror can push part of an archive.
type Subset struct {
	Made, Pinned *ImageSetConfiguration
	// Refused names each entry of -c the archive does not hold (Match
	// fills it).
	Refused []string
	// Helm: -c keeps the archive's helm section.
	Helm bool
	// Refilter are the catalog entries of -c that select otherwise from a
	// catalog of the archive: that catalog is filtered again.
	Refilter []Refilter
}

// Refilter is the catalog entry Entry of -c over the archive's entry
// ArchiveEntry.
type Refilter struct {
	Entry, ArchiveEntry int
	Catalog             OperatorCatalog
}

// index returns the position of e among the archive's entries, as made
// or as pinned; -1 when it is not one of them.
func index[E any](e E, made, pinned []E) int {
	y := yamlOf(e)
	for j := range made {
		if y == yamlOf(made[j]) || j < len(pinned) && y == yamlOf(pinned[j]) {
			return j
		}
	}
	return -1
}

func yamlOf(v any) string {
	data, err := MarshalYAML(v)
	if err != nil {
		return fmt.Sprintf("unmarshalable %#v", v)
	}
	return string(data)
}

// Match returns what of the archive's Set the mirror section m keeps,
// recording in s.Refused each entry the archive does not hold.
func (s *Subset) Match(m *Mirror) func(Image) bool {
	made, pinned := &s.Made.Mirror, &s.Pinned.Mirror
	var reasons, catalogs []string
	for i, ai := range m.AdditionalImages {
		j := index(ai, made.AdditionalImages, pinned.AdditionalImages)
		if j < 0 {
			s.Refused = append(s.Refused, fmt.Sprintf("mirror.additionalImages[%d] %s: not an additional image of the archive", i, ai.Name))
			continue
		}
		reasons = append(reasons, fmt.Sprintf("mirror.additionalImages[%d]", j))
	}
	for i, oc := range m.Operators {
		j := index(oc, made.Operators, pinned.Operators)
		if j < 0 {
			if j = index(selectionLess(oc), selectionsLess(made.Operators), selectionsLess(pinned.Operators)); j >= 0 {
				s.Refilter = append(s.Refilter, Refilter{Entry: i, ArchiveEntry: j, Catalog: oc})
				continue
			}
			why := "not a catalog of the archive"
			if slices.ContainsFunc(made.Operators, func(o OperatorCatalog) bool { return o.Catalog == oc.Catalog }) {
				why = "the archive holds this catalog with another destination, platforms or template: write those fields as the archive's configuration has them"
			}
			s.Refused = append(s.Refused, fmt.Sprintf("mirror.operators[%d] %s: %s", i, oc.Catalog, why))
			continue
		}
		reasons = append(reasons, fmt.Sprintf("mirror.operators[%d] (", j))
		catalogs = append(catalogs, "operator catalog "+made.Operators[j].Catalog+": ")
	}
	for i, b := range m.BlockedImages {
		if index(b, made.BlockedImages, pinned.BlockedImages) < 0 {
			s.Refused = append(s.Refused, fmt.Sprintf("mirror.blockedImages[%d] %s: not a rule of the archive's configuration, and disk-to-mirror applies no new blocking rules: leave out the entries of the images to keep out instead", i, b.Name))
		}
	}
	allReleases := false
	var narrowed []releaseRange
	switch {
	case yamlOf(m.Platform) == yamlOf(Platform{}):
	case yamlOf(m.Platform) == yamlOf(made.Platform) || yamlOf(m.Platform) == yamlOf(pinned.Platform):
		allReleases = true
	default:
		// Fewer channels, everything else as the archive has it: the
		// releases those channels selected, with their components.
		other, rest := m.Platform, made.Platform
		other.Channels, rest.Channels, other.Graph, rest.Graph = nil, nil, false, false
		if yamlOf(other) != yamlOf(rest) || m.Platform.Graph && !made.Platform.Graph {
			s.Refused = append(s.Refused, "mirror.platform: differs from the archive's other than by leaving out channels: keep it as the archive's configuration has it, leave channels out, or leave the section out")
			break
		}
		for i, c := range m.Platform.Channels {
			j := index(c, made.Platform.Channels, pinned.Platform.Channels)
			if j >= 0 {
				reasons = append(reasons, fmt.Sprintf("mirror.platform.channels[%d] ", j))
				continue
			}
			nr, why := narrowedChannel(i, c, made.Platform.Channels, pinned.Platform.Channels)
			if nr.min != nil {
				// Also when refused for reaching outside the archive's
				// range: an earlier archive of several (partialSubset)
				// pushes what it holds within it.
				narrowed = append(narrowed, nr)
			}
			if why != "" {
				s.Refused = append(s.Refused, why)
			}
		}
		if m.Platform.Graph {
			reasons = append(reasons, "mirror.platform.graph")
		}
	}
	switch {
	case yamlOf(m.Helm) == yamlOf(Helm{}):
	case yamlOf(m.Helm) == yamlOf(made.Helm) || yamlOf(m.Helm) == yamlOf(pinned.Helm):
		s.Helm = true
	default:
		s.Refused = append(s.Refused, "mirror.helm: differs from the archive's: keep it as the archive's configuration has it, or leave it out")
	}
	return func(img Image) bool {
		if allReleases && (isReleaseKind(img.Kind) || slices.ContainsFunc(img.AlsoKinds, isReleaseKind)) {
			return true
		}
		if s.Helm && (img.Kind == KindHelm || slices.Contains(img.AlsoKinds, KindHelm)) {
			return true
		}
		for _, why := range img.Why {
			if hasAnyPrefix(why, reasons) || hasAnyPrefix(why, catalogs) {
				return true
			}
			if img.Kind == KindRelease && slices.ContainsFunc(narrowed, func(r releaseRange) bool { return r.keeps(why, img) }) {
				return true
			}
		}
		return false
	}
}

// releaseRange is a release channel of -c that is a channel of the archive
// with a narrower version range: of the releases that channel selected,
// those in [min, max] are kept, with their components.
type releaseRange struct {
	why      string // the archive's channel, as a release's Why starts
	min, max *semver.Version
}

func (r releaseRange) keeps(why string, img Image) bool {
	if !strings.HasPrefix(why, r.why) {
		return false
	}
	v, err := semver.NewVersion(release.TagVersion(tagOf(img.Destination)))
	return err == nil && !v.LessThan(r.min) && !v.GreaterThan(r.max)
}

// narrowedChannel matches channel c (mirror.platform.channels[i] of -c)
// with a channel of the archive that differs from it only by a version
// range holding c's: the archive holds every release c would select from
// it. why says why it is refused otherwise.
func narrowedChannel(i int, c ReleaseChannel, made, pinned []ReleaseChannel) (releaseRange, string) {
	field := fmt.Sprintf("mirror.platform.channels[%d] %s", i, c.Name)
	cmin, errMin := semver.StrictNewVersion(c.MinVersion)
	cmax, errMax := semver.StrictNewVersion(c.MaxVersion)
	for _, list := range [][]ReleaseChannel{made, pinned} {
		for j, a := range list {
			same, other := c, a
			same.MinVersion, same.MaxVersion, other.MinVersion, other.MaxVersion = "", "", "", ""
			if yamlOf(same) != yamlOf(other) || a.MinVersion == "" || a.MaxVersion == "" {
				continue
			}
			amin, err1 := semver.NewVersion(a.MinVersion)
			amax, err2 := semver.NewVersion(a.MaxVersion)
			if err1 != nil || err2 != nil {
				continue
			}
			if errMin != nil || errMax != nil {
				return releaseRange{}, fmt.Sprintf("%s: a channel narrowing the archive's %s (minVersion %s, maxVersion %s) needs both minVersion and maxVersion, each a full version (x.y.z)", field, a.Name, a.MinVersion, a.MaxVersion)
			}
			if a.ShortestPath {
				return releaseRange{}, fmt.Sprintf("%s: the archive's channel takes the shortest path from %s to %s, which a narrower range would choose anew: keep its range, or leave the channel out", field, a.MinVersion, a.MaxVersion)
			}
			if cmin.GreaterThan(cmax) {
				return releaseRange{}, fmt.Sprintf("%s: minVersion %s is newer than maxVersion %s", field, c.MinVersion, c.MaxVersion)
			}
			r := releaseRange{why: fmt.Sprintf("mirror.platform.channels[%d] ", j), min: cmin, max: cmax}
			if cmin.LessThan(amin) || cmax.GreaterThan(amax) {
				// Refused, with the range: an earlier archive of several
				// pushes the releases it holds within it.
				return r, fmt.Sprintf("%s: versions %s to %s are not within the archive's %s to %s: the archive holds no releases outside them", field, c.MinVersion, c.MaxVersion, a.MinVersion, a.MaxVersion)
			}
			return r, ""
		}
	}
	return releaseRange{}, field + ": not a channel of the archive, nor one of them with a narrower version range"
}

func isReleaseKind(k Kind) bool {
	return k == KindRelease || k == KindReleaseComponent || k == KindReleaseGraph
}

func hasAnyPrefix(s string, prefixes []string) bool {
	return slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(s, p) })
}

// tagOf is the tag of a destination (repo:tag).
func tagOf(dest string) string {
	_, tag, _ := strings.Cut(dest[strings.LastIndex(dest, "/")+1:], ":")
	return tag
}

// selectionLess is a catalog entry without what selects its content
// (packages, full, skipDependencies): what must stay as the archive has it
// for the catalog to be filtered again.
func selectionLess(oc OperatorCatalog) OperatorCatalog {
	oc.Packages, oc.Full, oc.SkipDependencies = nil, false, false
	return oc
}

func selectionsLess(list []OperatorCatalog) []OperatorCatalog {
	out := make([]OperatorCatalog, len(list))
	for i, oc := range list {
		out[i] = selectionLess(oc)
	}
	return out
}

// SubsetOf is what of set keep keeps, each image as swap gives it (a
// catalog filtered again), with the components of the releases it keeps
// and the signatures of every image it keeps.
func SubsetOf(set *Set, keep func(Image) bool, swap func(Image) (Image, bool)) *Set {
	kept := &Set{FormatVersion: set.FormatVersion}
	digests := map[string]bool{}
	// A release's components are tagged with the release's tag and "-".
	var releases []string
	for _, img := range set.Images {
		if img.Kind == KindRelease && keep(img) {
			releases = append(releases, tagOf(img.Destination)+"-")
		}
	}
	for _, img := range set.Images {
		component := img.Kind == KindReleaseComponent && hasAnyPrefix(tagOf(img.Destination), releases)
		if !img.Kind.Attached() && (component || keep(img)) {
			if r, ok := swap(img); ok {
				img = r
			}
			kept.Images = append(kept.Images, img)
			digests[img.Digest] = true
		}
	}
	for _, img := range set.Images {
		if img.Kind.Attached() && digests[img.SignatureOf] {
			kept.Images = append(kept.Images, img)
		}
	}
	kept.Sort()
	return kept
}
