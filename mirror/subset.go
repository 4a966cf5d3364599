package mirror

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"
	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/imageset/catalog"
	"github.com/gapmirror/gapmirror/imageset/catalogimage"
	"github.com/gapmirror/gapmirror/imageset/release"
	"github.com/gapmirror/gapmirror/sections"
	"github.com/gapmirror/gapmirror/transfer"
	"github.com/gapmirror/gapmirror/workspace"
)

// Disk-to-mirror with a subset: -c may name a configuration whose entries
// are entries of the archive's configuration (as written, or as the pinned
// configuration wrote them): fewer additional images, operator catalogs or
// release channels (or a channel's version range narrowed), or no platform
// or helm section. The run then pushes
// and generates resources for exactly those images, as oc-mirror does to
// serve several enclaves from one archive. What the archive cannot answer
// (an entry it does not hold, a catalog filtered differently, which would
// need the catalog rebuilt) is refused, every such entry named.

// subset narrows plan, read from an archive, to the -c configuration.
// The rebuilt catalogs (a catalog entry of -c that selects otherwise)
// are in a store of their own, removed with Close, and pushed from there.
//
// root is the mirror root pushed to: the catalog images a subset filters again are kept for it in
// working-dir/subset-catalogs/, so the next, incremental, archive (which
// does not carry their unchanged blobs) can be filtered again too.
func (t *Trip) subset(ctx context.Context, plan *workspace.Plan, ar transfer.BlobReader, archiveDir, root string) (*rebuilt, error) {
	if t.Config == nil || plan.Config == "" {
		return nil, nil
	}
	mine := imageset.Redacted(t.Config)
	data, err := imageset.MarshalYAML(mine)
	if err != nil {
		return nil, err
	}
	if string(data) == plan.Config {
		return nil, nil
	}
	made, err := imageset.ParseImageSetConfiguration([]byte(plan.Config), archiveDir+" (the archive's configuration)")
	if err != nil {
		return nil, fmt.Errorf("reading the configuration the archive in %s was made from: %w", archiveDir, err)
	}
	pinned := made
	if p, ok := plan.File(workspace.PinnedExtra); ok {
		if pinned, err = imageset.ParseImageSetConfiguration(p, archiveDir+" (the archive's pinned configuration)"); err != nil {
			return nil, fmt.Errorf("reading the pinned configuration of the archive in %s: %w", archiveDir, err)
		}
	}
	s := subsetter{made: made, pinned: pinned}
	keep := s.match(&mine.Mirror)
	var rb *rebuilt
	// Filtered even when something else is refused, so every refusal is named.
	if len(s.refilter) > 0 {
		if rb, err = t.refilter(ctx, plan.Set, ar, &s, filepath.Join(archiveDir, workspace.WorkingDir), root); err != nil {
			return nil, err
		}
	}
	if len(s.refused) > 0 && t.partialSubset {
		t.Log.Warn("an earlier archive lacks entries of the subset: pushing what it holds of it (the latest archive holds them all)", "archive", archiveDir, "lacking", strings.Join(s.refused, "; "))
	} else if len(s.refused) > 0 {
		rb.Close()
		return nil, fmt.Errorf("%s asks for what the archive in %s does not hold:\n  - %s\ndisk-to-mirror pushes the archive's images or a subset of its configuration's entries (each written as in the archive's configuration or its pinned one): remove or correct these entries, or run mirror-to-disk with this configuration for a new archive",
			t.ConfigPath, archiveDir, strings.Join(s.refused, "\n  - "))
	}
	if rb != nil {
		inner := keep
		keep = func(img imageset.Image) bool { return rb.keeps(img) || inner(img) }
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
			if r, ok := rb.catalog(img); ok {
				img = r
			}
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
		plan.Files = slices.DeleteFunc(plan.Files, func(f workspace.PlanFile) bool { return strings.HasPrefix(f.Name, workspace.HelmDir+"/") })
	}
	return rb, nil
}

// rebuilt are the catalogs a subset filtered again: the new images in a
// store of their own and the bundle and related images they keep.
type rebuilt struct {
	store *transfer.Store
	// catalogs maps the digest of an archive catalog image to its rebuilt
	// Set entry.
	catalogs map[string]imageset.Image
	// images are the origins of the bundle and related images the rebuilt
	// catalogs keep, by the reason prefix of their catalog.
	images map[string]map[string]bool
}

func (r *rebuilt) catalog(img imageset.Image) (imageset.Image, bool) {
	if r == nil || img.Kind != imageset.KindOperatorCatalog {
		return img, false
	}
	out, ok := r.catalogs[img.Digest]
	return out, ok
}

// keeps reports whether img is a rebuilt catalog or one of its images.
func (r *rebuilt) keeps(img imageset.Image) bool {
	if _, ok := r.catalog(img); ok {
		return true
	}
	for _, why := range img.Why {
		for prefix, origins := range r.images {
			if strings.HasPrefix(why, prefix) && origins[img.Origin] {
				return true
			}
		}
	}
	return false
}

// source reads the rebuilt catalogs from their store, the rest from src.
func (r *rebuilt) source(src transfer.Source) transfer.Source {
	if r == nil {
		return src
	}
	return storeFirst{Source: src, store: r.store}
}

// Close removes the store of the rebuilt catalogs.
func (r *rebuilt) Close() {
	if r != nil {
		os.RemoveAll(r.store.Dir())
	}
}

// refilter filters again, with the entries of -c, the catalogs of the
// archive that those entries select otherwise, and rebuilds their images
// on the archive's, as mirror-to-disk does on the upstream one. The
// archive's catalog holds only what its configuration selected, so -c can
// take no more than that: a package it lacks is refused.
func (t *Trip) refilter(ctx context.Context, set *imageset.Set, ar transfer.BlobReader, s *subsetter, ws, root string) (*rebuilt, error) {
	// On the archive's disk: a catalog can be large for /tmp.
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(ws, "subset-catalogs-")
	if err != nil {
		return nil, err
	}
	store, err := transfer.OpenStore(tmp)
	if err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	rb := &rebuilt{store: store, catalogs: map[string]imageset.Image{}, images: map[string]map[string]bool{}}
	// The catalog images read for root, kept from run to run: an
	// incremental archive lacks their unchanged blobs.
	kept, err := transfer.OpenStore(filepath.Join(ws, subsetCatalogs, strings.TrimSuffix(workspace.LocationFile(root), ".json")))
	if err != nil {
		rb.Close()
		return nil, err
	}
	blobs := &overlayBlobs{read: ar, store: store, kept: kept, save: root != "" && !t.DryRun, used: map[digest.Digest]bool{}}
	refused := len(s.refused)
	for _, f := range s.refilter {
		label := fmt.Sprintf("mirror.operators[%d] %s", f.i, f.oc.Catalog)
		prefix := fmt.Sprintf("mirror.operators[%d] (", f.j)
		i := slices.IndexFunc(set.Images, func(img imageset.Image) bool {
			return img.Kind == imageset.KindOperatorCatalog && slices.ContainsFunc(img.Why, func(w string) bool { return strings.HasPrefix(w, prefix) })
		})
		if i < 0 {
			s.refused = append(s.refused, label+": the archive does not hold this catalog's image (mirror-to-disk could not get it)")
			continue
		}
		old := set.Images[i]
		ci := &sections.CatalogImage{Origin: f.oc.Catalog, Digest: digest.Digest(old.Digest), Blobs: blobs}
		src, err := ci.Load(tmp)
		if err != nil {
			s.refused = append(s.refused, fmt.Sprintf("%s: %v (an incremental archive lacks the catalog's unchanged blobs, kept in working-dir/subset-catalogs only for a mirror this directory pushed a subset of that catalog to: push the whole entry, or from a full archive)", label, err))
			continue
		}
		filtered, _, err := catalog.Filter(src, sections.FilterSpec(f.oc))
		if err != nil {
			s.refused = append(s.refused, fmt.Sprintf("%s: %s (the archive's catalog holds only what its configuration selected)", label, sections.LocateFilterError(fmt.Sprintf("mirror.operators[%d]", f.i), f.oc, err.Error())))
			continue
		}
		out, err := os.MkdirTemp(tmp, "filtered-")
		if err != nil {
			return nil, err
		}
		if err := filtered.WriteDir(out); err != nil {
			return nil, fmt.Errorf("%s: writing the filtered catalog: %w", label, err)
		}
		final, _, err := catalogimage.Rebuild(blobs, ci.Digest, out, catalogimage.RebuildOptions{Comment: "gapmirror subset " + label, TempDir: tmp, Platforms: imageset.PlatformNames(f.oc.Platforms)})
		if err != nil {
			return nil, fmt.Errorf("%s: rebuilding the filtered catalog image: %w", label, err)
		}
		img := old
		img.Digest, img.Built = final.String(), true
		if repo, _, ok := strings.Cut(old.Source, "@"); ok {
			img.Source = repo + "@" + final.String()
		}
		rb.catalogs[old.Digest] = img
		origins := map[string]bool{}
		for _, ref := range filtered.RelatedImages() {
			if named, err := reference.ParseNormalizedNamed(ref.Image); err == nil {
				origins[reference.TagNameOnly(named).String()] = true
			}
		}
		rb.images["operator catalog "+s.made.Mirror.Operators[f.j].Catalog+": "] = origins
		t.Log.Info("operator catalog filtered again for the subset", "catalog", f.oc.Catalog, "packages", len(filtered.PackageNames()), "bundles", filtered.BundleCount(), "image", img.Destination)
	}
	if blobs.save && len(s.refused) == refused {
		// Only what this run read is needed by the next.
		blobs.prune()
	}
	return rb, nil
}

// subsetCatalogs (in working-dir) keeps, per mirror root, the blobs of the
// archive's catalog images a subset filtered again there.
const subsetCatalogs = "subset-catalogs"

// overlayBlobs reads blobs from the store, else those kept from earlier
// runs, else the archive, and writes into the store: a catalog rebuilt on
// an archive's image. With save, what it reads from the archive is kept.
type overlayBlobs struct {
	read        transfer.BlobReader
	store, kept *transfer.Store
	save        bool
	// used are the blobs read from kept or the archive.
	used map[digest.Digest]bool
}

func (o *overlayBlobs) Has(d digest.Digest) bool {
	return o.store.Has(d) || o.kept.Has(d) || o.read.Has(d)
}

func (o *overlayBlobs) Open(d digest.Digest) (io.ReadCloser, error) {
	if o.store.Has(d) {
		return o.store.Open(d)
	}
	o.used[d] = true
	if o.kept.Has(d) {
		return o.kept.Open(d)
	}
	if o.save && o.read.Has(d) {
		r, err := o.read.Open(d)
		if err != nil {
			return nil, err
		}
		err = o.kept.Put(d, -1, r)
		r.Close()
		if err != nil {
			return nil, err
		}
		return o.kept.Open(d)
	}
	return o.read.Open(d)
}

func (o *overlayBlobs) Put(d digest.Digest, size int64, r io.Reader) error {
	return o.store.Put(d, size, r)
}

// prune removes the kept blobs this run did not read.
func (o *overlayBlobs) prune() {
	dir := filepath.Join(o.kept.Dir(), "blobs", digest.Canonical.String())
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !o.used[digest.NewDigestFromEncoded(digest.Canonical, e.Name())] {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// storeFirst reads what store holds from there, the rest from Source.
type storeFirst struct {
	transfer.Source
	store *transfer.Store
}

func (s storeFirst) Manifest(ctx context.Context, img imageset.Image, d digest.Digest) ([]byte, string, error) {
	if s.store.Has(d) {
		return s.store.Source().Manifest(ctx, img, d)
	}
	return s.Source.Manifest(ctx, img, d)
}

func (s storeFirst) Blob(ctx context.Context, img imageset.Image, desc ocispec.Descriptor) (io.ReadCloser, error) {
	if s.store.Has(desc.Digest) {
		return s.store.Source().Blob(ctx, img, desc)
	}
	return s.Source.Blob(ctx, img, desc)
}

// subsetter matches the entries of a configuration to those of the
// archive's.
type subsetter struct {
	made, pinned *imageset.ImageSetConfiguration
	refused      []string
	helm         bool
	// refilter are the catalog entries of -c that select otherwise from a
	// catalog of the archive: that catalog is filtered again.
	refilter []refilter
}

// refilter is a catalog entry of -c (index i) over the archive's entry j.
type refilter struct {
	i, j int
	oc   imageset.OperatorCatalog
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
			if j = index(selectionLess(oc), selectionsLess(made.Operators), selectionsLess(pinned.Operators)); j >= 0 {
				s.refilter = append(s.refilter, refilter{i: i, j: j, oc: oc})
				continue
			}
			why := "not a catalog of the archive"
			if slices.ContainsFunc(made.Operators, func(o imageset.OperatorCatalog) bool { return o.Catalog == oc.Catalog }) {
				why = "the archive holds this catalog with another destination, platforms or template: write those fields as the archive's configuration has them"
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
	var narrowed []releaseRange
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
				s.refused = append(s.refused, why)
			}
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
			if img.Kind == imageset.KindRelease && slices.ContainsFunc(narrowed, func(r releaseRange) bool { return r.keeps(why, img) }) {
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

func (r releaseRange) keeps(why string, img imageset.Image) bool {
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
func narrowedChannel(i int, c imageset.ReleaseChannel, made, pinned []imageset.ReleaseChannel) (releaseRange, string) {
	field := fmt.Sprintf("mirror.platform.channels[%d] %s", i, c.Name)
	cmin, errMin := semver.StrictNewVersion(c.MinVersion)
	cmax, errMax := semver.StrictNewVersion(c.MaxVersion)
	for _, list := range [][]imageset.ReleaseChannel{made, pinned} {
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

// selectionLess is a catalog entry without what selects its content
// (packages, full, skipDependencies): what must stay as the archive has it
// for the catalog to be filtered again.
func selectionLess(oc imageset.OperatorCatalog) imageset.OperatorCatalog {
	oc.Packages, oc.Full, oc.SkipDependencies = nil, false, false
	return oc
}

func selectionsLess(list []imageset.OperatorCatalog) []imageset.OperatorCatalog {
	out := make([]imageset.OperatorCatalog, len(list))
	for i, oc := range list {
		out[i] = selectionLess(oc)
	}
	return out
}
