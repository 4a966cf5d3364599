package sections

import (
	"context"
	"fmt"
	"io"
	"log/slog"
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
	"github.com/gapmirror/gapmirror/ocistore"
	"github.com/gapmirror/gapmirror/transfer"
	"github.com/gapmirror/gapmirror/workspace"
)

// A disk-to-mirror subset's catalogs filtered again (mirror's subset.go
// decides which): filtering and rebuilding are this stage's, as for
// mirror-to-disk's operators.

// Rebuilt are the catalogs a subset filtered again: the new images in a
// store of their own and the bundle and related images they keep.
type Rebuilt struct {
	store *ocistore.Store
	// catalogs maps the digest of an archive catalog image to its rebuilt
	// Set entry.
	catalogs map[string]imageset.Image
	// images are the origins of the bundle and related images the rebuilt
	// catalogs keep, by the reason prefix of their catalog.
	images map[string]map[string]bool
}

// Catalog is the rebuilt entry of the archive catalog img, if the subset
// filtered it again.
func (r *Rebuilt) Catalog(img imageset.Image) (imageset.Image, bool) {
	if r == nil || img.Kind != imageset.KindOperatorCatalog {
		return img, false
	}
	out, ok := r.catalogs[img.Digest]
	return out, ok
}

// Keeps reports whether img is a rebuilt catalog or one of its images.
func (r *Rebuilt) Keeps(img imageset.Image) bool {
	if _, ok := r.Catalog(img); ok {
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

// Source reads the rebuilt catalogs from their store, the rest from src.
func (r *Rebuilt) Source(src transfer.Source) transfer.Source {
	if r == nil {
		return src
	}
	return storeFirst{Source: src, store: r.store}
}

// Close removes the store of the rebuilt catalogs.
func (r *Rebuilt) Close() {
	if r != nil {
		os.RemoveAll(r.store.Dir())
	}
}

// Refilter filters again, with the entries of -c, the catalogs of the
// archive that those entries select otherwise, and rebuilds their images
// on the archive's, as mirror-to-disk does on the upstream one. The
// archive's catalog holds only what its configuration selected, so -c can
// take no more than that: a package it lacks is refused.
// ws is the archive directory's working-dir, root the mirror root pushed
// to; a dry run keeps nothing for later runs.
func Refilter(ctx context.Context, set *imageset.Set, ar transfer.BlobReader, s *imageset.Subset, ws, root string, dryRun bool, log *slog.Logger) (*Rebuilt, error) {
	// On the archive's disk: a catalog can be large for /tmp.
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(ws, "subset-catalogs-")
	if err != nil {
		return nil, err
	}
	store, err := ocistore.Open(tmp)
	if err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	rb := &Rebuilt{store: store, catalogs: map[string]imageset.Image{}, images: map[string]map[string]bool{}}
	// The catalog images read for root, kept from run to run: an
	// incremental archive lacks their unchanged blobs.
	kept, err := ocistore.Open(filepath.Join(ws, subsetCatalogs, strings.TrimSuffix(workspace.LocationFile(root), ".json")))
	if err != nil {
		rb.Close()
		return nil, err
	}
	blobs := &overlayBlobs{read: ar, store: store, kept: kept, save: root != "" && !dryRun, used: map[digest.Digest]bool{}}
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
		ci := &CatalogImage{Origin: f.Catalog.Catalog, Digest: digest.Digest(old.Digest), Blobs: blobs}
		src, err := ci.Load(tmp)
		if err != nil {
			s.Refused = append(s.Refused, fmt.Sprintf("%s: %v (an incremental archive lacks the catalog's unchanged blobs, kept in working-dir/subset-catalogs only for a mirror this directory pushed a subset of that catalog to: push the whole entry, or from a full archive)", label, err))
			continue
		}
		filtered, _, err := catalog.Filter(src, FilterSpec(f.Catalog))
		if err != nil {
			s.Refused = append(s.Refused, fmt.Sprintf("%s: %s (the archive's catalog holds only what its configuration selected)", label, LocateFilterError(fmt.Sprintf("mirror.operators[%d]", f.Entry), f.Catalog, err.Error())))
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
		log.Info("operator catalog filtered again for the subset", "catalog", f.Catalog.Catalog, "packages", len(filtered.PackageNames()), "bundles", filtered.BundleCount(), "image", img.Destination)
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
	store, kept *ocistore.Store
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
	store *ocistore.Store
}

func (s storeFirst) Manifest(ctx context.Context, img imageset.Image, d digest.Digest) ([]byte, string, error) {
	if s.store.Has(d) {
		return transfer.StoreSource(s.store).Manifest(ctx, img, d)
	}
	return s.Source.Manifest(ctx, img, d)
}

func (s storeFirst) Blob(ctx context.Context, img imageset.Image, desc ocispec.Descriptor) (io.ReadCloser, error) {
	if s.store.Has(desc.Digest) {
		return transfer.StoreSource(s.store).Blob(ctx, img, desc)
	}
	return s.Source.Blob(ctx, img, desc)
}
