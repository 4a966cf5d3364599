package mirror

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/imageset/catalog"
	"github.com/gapmirror/gapmirror/imageset/catalogimage"
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
	s := imageset.Subset{Made: made, Pinned: pinned}
	keep := s.Match(&mine.Mirror)
	var rb *rebuilt
	// Filtered even when something else is refused, so every refusal is named.
	if len(s.Refilter) > 0 {
		if rb, err = t.refilter(ctx, plan.Set, ar, &s, filepath.Join(archiveDir, workspace.WorkingDir), root); err != nil {
			return nil, err
		}
	}
	if len(s.Refused) > 0 && t.partialSubset {
		t.Log.Warn("an earlier archive lacks entries of the subset: pushing what it holds of it (the latest archive holds them all)", "archive", archiveDir, "lacking", strings.Join(s.Refused, "; "))
	} else if len(s.Refused) > 0 {
		rb.Close()
		return nil, fmt.Errorf("%s asks for what the archive in %s does not hold:\n  - %s\ndisk-to-mirror pushes the archive's images or a subset of its configuration's entries (each written as in the archive's configuration or its pinned one): remove or correct these entries, or run mirror-to-disk with this configuration for a new archive",
			t.ConfigPath, archiveDir, strings.Join(s.Refused, "\n  - "))
	}
	if rb != nil {
		inner := keep
		keep = func(img imageset.Image) bool { return rb.keeps(img) || inner(img) }
	}
	kept := imageset.SubsetOf(plan.Set, keep, rb.catalog)
	t.Log.Info("pushing a subset of the archive", "config", t.ConfigPath, "images", len(kept.Images), "of", len(plan.Set.Images))
	plan.Set, plan.Config = kept, string(data)
	if !s.Helm {
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
func (t *Trip) refilter(ctx context.Context, set *imageset.Set, ar transfer.BlobReader, s *imageset.Subset, ws, root string) (*rebuilt, error) {
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
	refused := len(s.Refused)
	for _, f := range s.Refilter {
		label := fmt.Sprintf("mirror.operators[%d] %s", f.Entry, f.Catalog.Catalog)
		prefix := fmt.Sprintf("mirror.operators[%d] (", f.ArchiveEntry)
		i := slices.IndexFunc(set.Images, func(img imageset.Image) bool {
			return img.Kind == imageset.KindOperatorCatalog && slices.ContainsFunc(img.Why, func(w string) bool { return strings.HasPrefix(w, prefix) })
		})
		if i < 0 {
			s.Refused = append(s.Refused, label+": the archive does not hold this catalog's image (mirror-to-disk could not get it)")
			continue
		}
		old := set.Images[i]
		ci := &sections.CatalogImage{Origin: f.Catalog.Catalog, Digest: digest.Digest(old.Digest), Blobs: blobs}
		src, err := ci.Load(tmp)
		if err != nil {
			s.Refused = append(s.Refused, fmt.Sprintf("%s: %v (an incremental archive lacks the catalog's unchanged blobs, kept in working-dir/subset-catalogs only for a mirror this directory pushed a subset of that catalog to: push the whole entry, or from a full archive)", label, err))
			continue
		}
		filtered, _, err := catalog.Filter(src, sections.FilterSpec(f.Catalog))
		if err != nil {
			s.Refused = append(s.Refused, fmt.Sprintf("%s: %s (the archive's catalog holds only what its configuration selected)", label, sections.LocateFilterError(fmt.Sprintf("mirror.operators[%d]", f.Entry), f.Catalog, err.Error())))
			continue
		}
		out, err := os.MkdirTemp(tmp, "filtered-")
		if err != nil {
			return nil, err
		}
		if err := filtered.WriteDir(out); err != nil {
			return nil, fmt.Errorf("%s: writing the filtered catalog: %w", label, err)
		}
		final, _, err := catalogimage.Rebuild(blobs, ci.Digest, out, catalogimage.RebuildOptions{Comment: "gapmirror subset " + label, TempDir: tmp, Platforms: imageset.PlatformNames(f.Catalog.Platforms)})
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
		rb.images["operator catalog "+s.Made.Mirror.Operators[f.ArchiveEntry].Catalog+": "] = origins
		t.Log.Info("operator catalog filtered again for the subset", "catalog", f.Catalog.Catalog, "packages", len(filtered.PackageNames()), "bundles", filtered.BundleCount(), "image", img.Destination)
	}
	if blobs.save && len(s.Refused) == refused {
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
