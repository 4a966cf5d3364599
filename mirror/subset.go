package mirror

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gapmirror/gapmirror/imageset"
)

// Disk-to-mirror with a subset: -c may name a configuration whose entries
// are entries of the archive's configuration (as written, or as the pinned
// configuration wrote them): fewer additional images, operator catalogs or
// release channels, or no platform or helm section. The run then pushes
// and generates resources for exactly those images, as oc-mirror does to
// serve several enclaves from one archive. What the archive cannot answer
// (an entry it does not hold, a catalog filtered differently, which would
// need the catalog rebuilt) is refused, every such entry named.

// subset narrows plan, read from an archive, to the -c configuration.
func (t *Trip) subset(plan *Plan, archiveDir string) error {
	if t.Config == nil || plan.Config == "" {
		return nil
	}
	mine := imageset.Redacted(t.Config)
	data, err := imageset.MarshalYAML(mine)
	if err != nil {
		return err
	}
	if string(data) == plan.Config {
		return nil
	}
	made, err := imageset.ParseImageSetConfiguration([]byte(plan.Config), archiveDir+" (the archive's configuration)")
	if err != nil {
		return fmt.Errorf("reading the configuration the archive in %s was made from: %w", archiveDir, err)
	}
	pinned := made
	if p, ok := plan.file(pinnedExtra); ok {
		if pinned, err = imageset.ParseImageSetConfiguration(p, archiveDir+" (the archive's pinned configuration)"); err != nil {
			return fmt.Errorf("reading the pinned configuration of the archive in %s: %w", archiveDir, err)
		}
	}
	s := subsetter{made: made, pinned: pinned}
	keep := s.match(&mine.Mirror)
	if len(s.refused) > 0 {
		return fmt.Errorf("%s asks for what the archive in %s does not hold:\n  - %s\ndisk-to-mirror pushes the archive's images or a subset of its configuration's entries (each written as in the archive's configuration or its pinned one): remove or correct these entries, or run mirror-to-disk with this configuration for a new archive",
			t.ConfigPath, archiveDir, strings.Join(s.refused, "\n  - "))
	}
	kept := &imageset.Set{FormatVersion: plan.Set.FormatVersion}
	digests := map[string]bool{}
	// A release's components are tagged with the release's tag and "-".
	var releases []string
	for _, img := range plan.Set.Images {
		if img.Kind == imageset.KindRelease && keep(img) {
			releases = append(releases, tagOf(img.Destination)+"-")
		}
	}
	for _, img := range plan.Set.Images {
		component := img.Kind == imageset.KindReleaseComponent && hasAnyPrefix(tagOf(img.Destination), releases)
		if img.Kind != imageset.KindSignature && (component || keep(img)) {
			kept.Images = append(kept.Images, img)
			digests[img.Digest] = true
		}
	}
	for _, img := range plan.Set.Images {
		if img.Kind == imageset.KindSignature && digests[img.SignatureOf] {
			kept.Images = append(kept.Images, img)
		}
	}
	kept.Sort()
	t.Log.Info("pushing a subset of the archive", "config", t.ConfigPath, "images", len(kept.Images), "of", len(plan.Set.Images))
	plan.Set, plan.Config = kept, string(data)
	if !s.helm {
		plan.Files = slices.DeleteFunc(plan.Files, func(f PlanFile) bool { return strings.HasPrefix(f.Name, helmDir+"/") })
	}
	return nil
}

// subsetter matches the entries of a configuration to those of the
// archive's.
type subsetter struct {
	made, pinned *imageset.ImageSetConfiguration
	refused      []string
	helm         bool
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
	data, err := imageset.MarshalYAML(v)
	if err != nil {
		return fmt.Sprintf("unmarshalable %#v", v)
	}
	return string(data)
}

// match returns what of the archive's Set the mirror section m keeps,
// recording in s.refused each entry the archive does not hold.
func (s *subsetter) match(m *imageset.Mirror) func(imageset.Image) bool {
	made, pinned := &s.made.Mirror, &s.pinned.Mirror
	var reasons, catalogs []string
	for i, ai := range m.AdditionalImages {
		j := index(ai, made.AdditionalImages, pinned.AdditionalImages)
		if j < 0 {
			s.refused = append(s.refused, fmt.Sprintf("mirror.additionalImages[%d] %s: not an additional image of the archive", i, ai.Name))
			continue
		}
		reasons = append(reasons, fmt.Sprintf("mirror.additionalImages[%d]", j))
	}
	for i, oc := range m.Operators {
		j := index(oc, made.Operators, pinned.Operators)
		if j < 0 {
			why := "not a catalog of the archive"
			if slices.ContainsFunc(made.Operators, func(o imageset.OperatorCatalog) bool { return o.Catalog == oc.Catalog }) {
				why = "the archive holds this catalog filtered otherwise (other packages, channels or versions), and disk-to-mirror cannot rebuild a catalog: write the entry as the archive's configuration has it"
			}
			s.refused = append(s.refused, fmt.Sprintf("mirror.operators[%d] %s: %s", i, oc.Catalog, why))
			continue
		}
		reasons = append(reasons, fmt.Sprintf("mirror.operators[%d] (", j))
		catalogs = append(catalogs, "operator catalog "+made.Operators[j].Catalog+": ")
	}
	for i, b := range m.BlockedImages {
		if index(b, made.BlockedImages, pinned.BlockedImages) < 0 {
			s.refused = append(s.refused, fmt.Sprintf("mirror.blockedImages[%d] %s: not a rule of the archive's configuration, and disk-to-mirror applies no new blocking rules: leave out the entries of the images to keep out instead", i, b.Name))
		}
	}
	allReleases := false
	switch {
	case yamlOf(m.Platform) == yamlOf(imageset.Platform{}):
	case yamlOf(m.Platform) == yamlOf(made.Platform) || yamlOf(m.Platform) == yamlOf(pinned.Platform):
		allReleases = true
	default:
		// Fewer channels, everything else as the archive has it: the
		// releases those channels selected, with their components.
		other, rest := m.Platform, made.Platform
		other.Channels, rest.Channels, other.Graph, rest.Graph = nil, nil, false, false
		if yamlOf(other) != yamlOf(rest) || m.Platform.Graph && !made.Platform.Graph {
			s.refused = append(s.refused, "mirror.platform: differs from the archive's other than by leaving out channels: keep it as the archive's configuration has it, leave channels out, or leave the section out")
			break
		}
		for i, c := range m.Platform.Channels {
			j := index(c, made.Platform.Channels, pinned.Platform.Channels)
			if j < 0 {
				s.refused = append(s.refused, fmt.Sprintf("mirror.platform.channels[%d] %s: not a channel of the archive, or with other versions", i, c.Name))
				continue
			}
			reasons = append(reasons, fmt.Sprintf("mirror.platform.channels[%d] ", j))
		}
		if m.Platform.Graph {
			reasons = append(reasons, "mirror.platform.graph")
		}
	}
	switch {
	case yamlOf(m.Helm) == yamlOf(imageset.Helm{}):
	case yamlOf(m.Helm) == yamlOf(made.Helm) || yamlOf(m.Helm) == yamlOf(pinned.Helm):
		s.helm = true
	default:
		s.refused = append(s.refused, "mirror.helm: differs from the archive's: keep it as the archive's configuration has it, or leave it out")
	}
	return func(img imageset.Image) bool {
		if allReleases && (isReleaseKind(img.Kind) || slices.ContainsFunc(img.AlsoKinds, isReleaseKind)) {
			return true
		}
		if s.helm && (img.Kind == imageset.KindHelm || slices.Contains(img.AlsoKinds, imageset.KindHelm)) {
			return true
		}
		for _, why := range img.Why {
			if hasAnyPrefix(why, reasons) || hasAnyPrefix(why, catalogs) {
				return true
			}
		}
		return false
	}
}

func isReleaseKind(k imageset.Kind) bool {
	return k == imageset.KindRelease || k == imageset.KindReleaseComponent || k == imageset.KindReleaseGraph
}

func hasAnyPrefix(s string, prefixes []string) bool {
	return slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(s, p) })
}

// tagOf is the tag of a destination (repo:tag).
func tagOf(dest string) string {
	_, tag, _ := strings.Cut(dest[strings.LastIndex(dest, "/")+1:], ":")
	return tag
}
