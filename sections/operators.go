package sections

// Operator catalogs (mirror.operators): each catalog image is pinned to a
// digest once, copied into the local store (so reruns reuse it), its
// file-based catalog extracted and filtered as the configuration asks, and
// — unless the whole catalog is kept — rebuilt around the filtered FBC. The
// catalog image, every kept bundle image and every related image join the
// Set by digest.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/gapmirror/gapmirror/generate"
	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/imageset/catalog"
	"github.com/gapmirror/gapmirror/imageset/catalogimage"
	"github.com/gapmirror/gapmirror/imageset/fbc"
	"github.com/gapmirror/gapmirror/ocistore"
	"github.com/gapmirror/gapmirror/transfer"
	"github.com/gapmirror/gapmirror/workspace"
)

// CatalogSourcesRepo prefixes the store names of the original catalog
// images gapmirror reads, so they never collide with a Set destination.
const CatalogSourcesRepo = "gapmirror-catalog-sources/"

// operators is the Contributor for mirror.operators.
type operators struct {
	trip  *Env
	up    *transfer.Registry
	store *ocistore.Store
	plan  *workspace.Plan
	// fetched are the catalog images fetch put in the store, by the
	// configuration's name for them.
	fetched map[string]*CatalogImage
	// failed are the errors of the fetches that failed (a Prefetch's), by
	// the same name: the next fetch says it reads the catalog again.
	failed map[string]error
}

// Prefetch implements imageset.Prefetcher: each registry catalog is pinned
// and copied into the store while the additional images' tags are pinned.
// One that is blocked is left alone, one that cannot be fetched to
// Contribute, which reports it.
func (o *operators) Prefetch(ctx context.Context, cfg *imageset.ImageSetConfiguration, r *imageset.Resolving) {
	if o.store == nil {
		return
	}
	for _, oc := range cfg.Mirror.Operators {
		if _, isLayout := oc.OCILayoutPath(); isLayout || readable(oc, r) != nil {
			continue
		}
		_, _ = o.fetch(ctx, oc.Catalog) // an error: Contribute meets it again and reports it
	}
}

// readable says why the catalog of oc may not be read: not an image
// reference, or blocked by mirror.blockedImages (an OCI layout always may).
func readable(oc imageset.OperatorCatalog, r *imageset.Resolving) error {
	if _, isLayout := oc.OCILayoutPath(); isLayout {
		return nil
	}
	named, err := reference.ParseNormalizedNamed(oc.Catalog)
	if err != nil {
		return fmt.Errorf("%q is not an image reference: %w", oc.Catalog, err)
	}
	if b := r.Blocked(reference.TagNameOnly(named).String(), reference.Path(named)); b != "" {
		return fmt.Errorf("%s is blocked by %s: remove the catalog or the blocking rule", oc.Catalog, b)
	}
	return nil
}

// fetch is FetchCatalog once per catalog the configuration names: the
// entries naming the same catalog, and Contribute after Prefetch, take
// the first fetch's image.
func (o *operators) fetch(ctx context.Context, ref string) (*CatalogImage, error) {
	if ci := o.fetched[ref]; ci != nil {
		return ci, nil
	}
	if first := o.failed[ref]; first != nil {
		o.trip.Log.Info("reading operator catalog again", "catalog", ref, "firstTry", first.Error())
	} else {
		o.trip.Log.Info("reading operator catalog", "catalog", ref)
	}
	ci, err := FetchCatalog(ctx, ref, o.up, o.store, o.trip.Copy)
	if err != nil {
		if o.failed == nil {
			o.failed = map[string]error{}
		}
		o.failed[ref] = err
		return nil, err
	}
	if o.fetched == nil {
		o.fetched = map[string]*CatalogImage{}
	}
	o.fetched[ref] = ci
	return ci, nil
}

// Sections implements imageset.Contributor.
func (o *operators) Sections() []string { return []string{"mirror.operators"} }

// Contribute implements imageset.Contributor: one catalog after the other,
// each adding its catalog image, bundles and related images to r.Set.
func (o *operators) Contribute(ctx context.Context, cfg *imageset.ImageSetConfiguration, r *imageset.Resolving) error {
	if len(cfg.Mirror.Operators) > 0 && o.store == nil {
		return errors.New("internal: operator catalogs need the local store")
	}
	for i, oc := range cfg.Mirror.Operators {
		path := fmt.Sprintf("mirror.operators[%d]", i)
		if err := o.contribute(ctx, path, oc, r); err != nil {
			return err
		}
	}
	return nil
}

// CatalogImage is an operator catalog image held in a blob store (the
// local store, an OCI layout or an archive), found by its manifest digest.
type CatalogImage struct {
	// Origin is the catalog as the user named it.
	Origin string
	// Named is the registry reference, nil for an OCI layout or an archive.
	Named reference.Named
	// Digest is the manifest (or index) digest.
	Digest digest.Digest
	// Blobs holds the image's manifests and blobs.
	Blobs catalogimage.Blobs
}

// Load extracts the image's file-based catalog into a temporary directory
// under tmp and loads it. Errors name the catalog and, for malformed FBC,
// the file and line inside the configs directory.
func (ci *CatalogImage) Load(tmp string) (*fbc.Catalog, error) {
	configs, err := catalogimage.ConfigsDir(ci.Blobs, ci.Digest)
	if err != nil {
		return nil, fmt.Errorf("catalog %s: %w", ci.Origin, err)
	}
	dir, err := os.MkdirTemp(tmp, "fbc-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := catalogimage.ExtractFBC(ci.Blobs, ci.Digest, dir); err != nil {
		return nil, fmt.Errorf("catalog %s: %w", ci.Origin, err)
	}
	c, err := fbc.LoadFS(os.DirFS(dir), ".")
	if err != nil {
		return nil, fmt.Errorf("catalog %s: the file-based catalog in %s is malformed (file names are relative to %s): %w; the catalog's publisher must fix it (opm validate shows such errors)", ci.Origin, configs, configs, err)
	}
	return c, nil
}

// FetchCatalog pins the catalog ref (an image reference or an oci: layout
// path) to a digest and makes sure the image is in store, copying it there
// if needed; a catalog already in the store is not fetched again.
func FetchCatalog(ctx context.Context, ref string, up *transfer.Registry, store *ocistore.Store, opts transfer.Options) (*CatalogImage, error) {
	if layout, ok := (imageset.OperatorCatalog{Catalog: ref}).OCILayoutPath(); ok {
		return fetchLayoutCatalog(ctx, ref, layout, store, opts)
	}
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return nil, fmt.Errorf("catalog %q is not an image reference: %w", ref, err)
	}
	named = reference.TagNameOnly(named)
	d, err := up.ResolveDigest(ctx, named)
	if err != nil {
		return nil, fmt.Errorf("cannot resolve catalog %s to a digest: %w", ref, err)
	}
	img := imageset.Image{
		Source:      reference.TrimNamed(named).String() + "@" + d.String(),
		Origin:      named.String(),
		Digest:      d.String(),
		Destination: CatalogSourcesRepo + reference.Path(named) + ":" + imageset.DigestTag(d),
		Kind:        imageset.KindOperatorCatalog,
	}
	if err := CopyIntoStore(ctx, img, up, store, opts); err != nil {
		return nil, err
	}
	return &CatalogImage{Origin: ref, Named: named, Digest: d, Blobs: store}, nil
}

// CopyIntoStore copies one image into the store unless it is there already,
// planned: a catalog image can take minutes, so it shows its planning and
// copying lines (nested in the resolving phase), the total fixed from the
// first.
func CopyIntoStore(ctx context.Context, img imageset.Image, src transfer.Source, store *ocistore.Store, opts transfer.Options) error {
	res := transfer.CopyPlanned(ctx, &imageset.Set{Images: []imageset.Image{img}}, src, transfer.StoreDestination(store), opts)
	if len(res.Failed) > 0 {
		return fmt.Errorf("cannot copy catalog %s into the local store %s: %w", img.Origin, store.Dir(), res.Failed[0].Err)
	}
	return store.SaveIndex()
}

// fetchLayoutCatalog copies the catalog image of the OCI layout dir into
// store. A layout naming one manifest uses it; a layout naming several
// platform images (as some tools write a multi-arch catalog) is gathered
// into one index.
func fetchLayoutCatalog(ctx context.Context, ref, dir string, store *ocistore.Store, opts transfer.Options) (*CatalogImage, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("catalog %s: %w", ref, err)
	}
	data, err := os.ReadFile(filepath.Join(abs, ocispec.ImageIndexFile))
	if err != nil {
		return nil, fmt.Errorf("catalog %s: %s is not an OCI image layout (%w): point oci:// at a directory holding index.json, oci-layout and blobs/", ref, abs, err)
	}
	var idx ocispec.Index
	if err := json.Unmarshal(data, &idx); err != nil {
		return nil, fmt.Errorf("catalog %s: %s/index.json is not an OCI index: %w", ref, abs, err)
	}
	blobs := layoutBlobs{dir: abs}
	var top ocispec.Descriptor
	switch n := len(idx.Manifests); {
	case n == 0:
		return nil, fmt.Errorf("catalog %s: the OCI layout %s names no image", ref, abs)
	case n == 1:
		top = idx.Manifests[0]
	default:
		for _, m := range idx.Manifests {
			if transfer.IsIndex(m.MediaType) {
				return nil, fmt.Errorf("catalog %s: the OCI layout %s names %d images, among them an index: keep only the catalog image in it", ref, abs, n)
			}
		}
		// Several platform images: one index over them, stored with them.
		gathered := ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex}
		for _, m := range idx.Manifests {
			m.Annotations = nil
			gathered.Manifests = append(gathered.Manifests, m)
		}
		raw, err := json.Marshal(gathered)
		if err != nil {
			return nil, err
		}
		top = ocispec.Descriptor{MediaType: ocispec.MediaTypeImageIndex, Digest: digest.FromBytes(raw), Size: int64(len(raw))}
		blobs.extra = map[digest.Digest][]byte{top.Digest: raw}
	}
	img := imageset.Image{
		Source:      "oci:" + abs + "@" + top.Digest.String(),
		Origin:      ref,
		Digest:      top.Digest.String(),
		Destination: CatalogSourcesRepo + "oci/" + layoutRepo(abs) + ":" + imageset.DigestTag(top.Digest),
		Kind:        imageset.KindOperatorCatalog,
	}
	if err := CopyIntoStore(ctx, img, &transfer.ArchiveSource{Archive: blobs, Name: "OCI layout " + abs}, store, opts); err != nil {
		return nil, err
	}
	return &CatalogImage{Origin: ref, Digest: top.Digest, Blobs: store}, nil
}

// layoutRepo derives a repository path from an OCI layout directory: its
// base name, lower-cased, with characters a repository path may not hold
// replaced by '-'.
func layoutRepo(dir string) string {
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		default:
			return '-'
		}
	}, filepath.Base(dir))
	name = strings.Trim(name, "-._")
	if name == "" {
		return "catalog"
	}
	return name
}

// layoutBlobs reads the blobs of an OCI image layout (plus blobs made in
// memory), for ArchiveSource, which verifies what it reads.
type layoutBlobs struct {
	dir   string
	extra map[digest.Digest][]byte
}

func (l layoutBlobs) path(d digest.Digest) string {
	return filepath.Join(l.dir, "blobs", d.Algorithm().String(), d.Encoded())
}

func (l layoutBlobs) Has(d digest.Digest) bool {
	if _, ok := l.extra[d]; ok {
		return true
	}
	if d.Validate() != nil {
		return false
	}
	_, err := os.Stat(l.path(d))
	return err == nil
}

func (l layoutBlobs) Open(d digest.Digest) (io.ReadCloser, error) {
	if data, ok := l.extra[d]; ok {
		return io.NopCloser(strings.NewReader(string(data))), nil
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return os.Open(l.path(d))
}

// ReadOnlyBlobs lets a catalog be read from blobs that cannot be written
// (an archive): Put fails.
type ReadOnlyBlobs struct{ transfer.BlobReader }

// Put implements catalogimage.Blobs by refusing.
func (ReadOnlyBlobs) Put(d digest.Digest, _ int64, _ io.Reader) error {
	return fmt.Errorf("blob %s: this catalog source is read-only", d)
}

// FilterSpec turns one mirror.operators entry into the catalog filter.
func FilterSpec(oc imageset.OperatorCatalog) catalog.FilterSpec {
	spec := catalog.FilterSpec{Full: oc.Full, SkipDependencies: oc.SkipDependencies}
	for _, p := range oc.Packages {
		ps := catalog.PackageSpec{Name: p.Name, DefaultChannel: p.DefaultChannel, MinVersion: p.MinVersion, MaxVersion: p.MaxVersion, VersionRange: p.VersionRange}
		for _, c := range p.Channels {
			ps.Channels = append(ps.Channels, catalog.ChannelSpec{Name: c.Name, MinVersion: c.MinVersion, MaxVersion: c.MaxVersion, VersionRange: c.VersionRange})
		}
		for _, b := range p.Bundles {
			ps.Bundles = append(ps.Bundles, b.Name)
		}
		spec.Packages = append(spec.Packages, ps)
	}
	return spec
}

// filterErrPlace matches how catalog filter errors name a package and channel.
var filterErrPlace = regexp.MustCompile(`package "([^"]+)"(?: channel "([^"]+)")?`)

// LocateFilterError rewrites the package and channel names in a filter error into the
// configuration paths that select them, so the user sees what to edit.
func LocateFilterError(path string, oc imageset.OperatorCatalog, msg string) string {
	return filterErrPlace.ReplaceAllStringFunc(msg, func(m string) string {
		sub := filterErrPlace.FindStringSubmatch(m)
		j := slices.IndexFunc(oc.Packages, func(p imageset.Package) bool { return p.Name == sub[1] })
		if j < 0 {
			return m
		}
		where := fmt.Sprintf("%s.packages[%d]", path, j)
		if sub[2] != "" {
			if k := slices.IndexFunc(oc.Packages[j].Channels, func(c imageset.Channel) bool { return c.Name == sub[2] }); k >= 0 {
				where += fmt.Sprintf(".channels[%d]", k)
			}
		}
		return where + " (" + m + ")"
	})
}

// contribute resolves one catalog entry at path into r.
func (o *operators) contribute(ctx context.Context, path string, oc imageset.OperatorCatalog, r *imageset.Resolving) error {
	label := fmt.Sprintf("%s (catalog %s)", path, oc.Catalog)
	if err := readable(oc, r); err != nil {
		return fmt.Errorf("%s.catalog: %w", path, err)
	}
	var template []byte
	if oc.TargetCatalogSourceTemplate != "" {
		var err error
		if template, err = os.ReadFile(oc.TargetCatalogSourceTemplate); err != nil {
			return fmt.Errorf("%s.targetCatalogSourceTemplate: %w", path, err)
		}
		// Render it once now: a bad template must stop the run before
		// anything is copied, not after.
		probe := generate.Catalog{Name: "template-check", Image: "registry.invalid/template/check:v1", Template: template, TemplatePath: oc.TargetCatalogSourceTemplate}
		if _, err := generate.CatalogSource(probe, generate.Meta{}); err != nil {
			return fmt.Errorf("%s.targetCatalogSourceTemplate: %w", path, err)
		}
	}

	ci, err := o.fetch(ctx, oc.Catalog)
	if err != nil {
		return fmt.Errorf("%s.catalog: %w", path, err)
	}
	o.plan.PinCatalog(path, ci.Digest.String())
	tmp, err := os.MkdirTemp("", "gapmirror-catalog-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	src, err := ci.Load(tmp)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	spec := FilterSpec(oc)
	kept, rep, err := catalog.Filter(src, spec)
	if err != nil {
		return fmt.Errorf("%s: %s", label, LocateFilterError(path, oc, err.Error()))
	}
	for _, w := range rep.Warnings {
		r.Warn("%s: %s", label, LocateFilterError(path, oc, w))
	}
	for _, p := range rep.Packages {
		for _, w := range p.Warnings {
			r.Warn("%s: package %s: %s", label, p.Name, LocateFilterError(path, oc, w))
		}
	}

	// The catalog image: the original when kept whole, else rebuilt.
	rebuild := !(oc.Full && len(oc.Packages) == 0)
	_, isLayout := oc.OCILayoutPath()
	final, built := ci.Digest, isLayout || rebuild
	// A rebuilt catalog holds only the listed platforms (a new image has no
	// digest to keep); everything else is copied sparse.
	platforms := imageset.PlatformNames(oc.Platforms)
	if rebuild {
		out := filepath.Join(tmp, "filtered")
		if err := kept.WriteDir(out); err != nil {
			return fmt.Errorf("%s: writing the filtered catalog: %w", label, err)
		}
		sum, _ := json.Marshal(spec) // plain struct: always marshals
		h := sha256.Sum256(sum)
		final, _, err = catalogimage.Rebuild(o.store, ci.Digest, out, catalogimage.RebuildOptions{Comment: "gapmirror filter " + hex.EncodeToString(h[:8]), TempDir: tmp, Platforms: platforms})
		if err != nil {
			return fmt.Errorf("%s: rebuilding the filtered catalog image: %w", label, err)
		}
	}
	img, err := catalogImage(oc, ci, final, built)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if !rebuild {
		// The catalog kept as it is: sparse like its images.
		img.Platforms = platforms
	}
	img.Why = []string{label}
	if err := r.Set.Add(img); err != nil {
		return fmt.Errorf("%s: %w", label, err)
	}
	if template != nil {
		o.plan.AddFile(TemplateExtra(img.Destination), template)
	}
	o.trip.Log.Info("operator catalog filtered", "catalog", oc.Catalog, "packages", len(kept.PackageNames()), "bundles", kept.BundleCount(), "image", img.Destination, "rebuilt", built && final != ci.Digest)
	return o.bundleImages(ctx, oc.Catalog, kept, platforms, r)
}

// catalogImage is the Set entry of a mirrored catalog: at targetCatalog (or
// the source's repository path) and targetTag (or the source's tag, or the
// digest tag of what is mirrored when the source is pinned by digest).
func catalogImage(oc imageset.OperatorCatalog, ci *CatalogImage, final digest.Digest, built bool) (imageset.Image, error) {
	img := imageset.Image{Origin: ci.Origin, Digest: final.String(), Kind: imageset.KindOperatorCatalog, Built: built}
	var repo, tag string
	if ci.Named != nil {
		repo = reference.Path(ci.Named)
		if t, ok := ci.Named.(reference.Tagged); ok {
			tag = t.Tag()
		}
		img.Source = reference.TrimNamed(ci.Named).String() + "@" + final.String()
		img.Origin = ci.Named.String()
	} else {
		layout, _ := oc.OCILayoutPath()
		abs, err := filepath.Abs(layout)
		if err != nil {
			return img, err
		}
		repo = layoutRepo(abs)
		img.Source = "oci:" + abs + "@" + final.String()
	}
	if oc.TargetCatalog != "" {
		repo = strings.Trim(oc.TargetCatalog, "/")
	}
	if oc.TargetTag != "" {
		tag = oc.TargetTag
	}
	if tag == "" {
		tag = imageset.DigestTag(final)
	}
	img.Destination = repo + ":" + tag
	return img, nil
}

// TemplateExtra is the archive file carrying the CatalogSource template of
// the catalog mirrored at dest, so disk-to-mirror applies it too.
func TemplateExtra(dest string) string {
	return "catalog-templates/" + strings.NewReplacer("/", "_", ":", "=").Replace(dest) + ".yaml"
}

// bundleImages adds every bundle and related image of the kept catalog to
// r, pinned by digest, sparse when platforms are set. Tag-only references
// are resolved (with a warning); one that cannot be is a failure of the
// image, not of the run.
func (o *operators) bundleImages(ctx context.Context, catalogRef string, kept *fbc.Catalog, platforms []string, r *imageset.Resolving) error {
	refs := kept.RelatedImages()
	wanted := make([]imageset.Wanted, 0, len(refs))
	blockedBy := map[string]int{}
	for _, ref := range refs {
		w := imageset.Wanted{Kind: imageset.KindOperatorRelated, Platforms: platforms}
		if ref.Bundle {
			w.Kind = imageset.KindOperatorBundle
		}
		for _, u := range ref.Users {
			w.Why = append(w.Why, fmt.Sprintf("operator catalog %s: package %s bundle %s", catalogRef, u.Package, u.Bundle))
		}
		w.Why = slices.Compact(w.Why)
		named, err := reference.ParseNormalizedNamed(ref.Image)
		if err != nil {
			r.Warn("operator catalog %s: %s names image %q, which is not an image reference (%v): skipped", catalogRef, fbc.BundlesOf(ref.Users), ref.Image, err)
			continue
		}
		w.Named = reference.TagNameOnly(named)
		if b := r.Block(w.Named.String(), reference.Path(w.Named)); b != "" {
			blockedBy[b]++
			continue
		}
		w.Failing = "needed by " + fbc.BundlesOf(ref.Users) + " in catalog " + catalogRef
		w.ByTag = fmt.Sprintf("operator catalog %s: %s", catalogRef, fbc.BundlesOf(ref.Users))
		wanted = append(wanted, w)
	}
	for _, rule := range slices.Sorted(maps.Keys(blockedBy)) {
		r.Warn("operator catalog %s: %d bundle or related images left out by %s", catalogRef, blockedBy[rule], rule)
	}
	return r.AddPinned(ctx, wanted)
}
