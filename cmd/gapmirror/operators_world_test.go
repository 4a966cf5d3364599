package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/imageset/catalog"
	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// opCatalog is an operator catalog pushed upstream as an opm-style catalog
// image, with every bundle and related image it names pushed as real images.
type opCatalog struct {
	cat    *catalog.Catalog
	repo   string
	tag    string
	digest digest.Digest
	ref    string // host/repo:tag
}

// catalogOptions tune pushCatalog.
type catalogOptions struct {
	spec catalog.GenSpec
	// skip lists images (as the generated catalog names them, by index in
	// the sorted image list) that are NOT pushed, to make them missing upstream.
	skip func(i int, ref string) bool
	// files replaces the FBC files of the catalog image (malformed catalogs).
	files map[string][]byte
	// labels replaces the catalog image labels (nil: the configs label).
	labels map[string]string
	// single makes a single-platform image instead of a two-platform index.
	single bool
	// mutate changes the catalog (real image references in place) before
	// it is written into the catalog image.
	mutate func(c *catalog.Catalog)
	// layout also writes the catalog image into this OCI layout directory.
	layout string
}

// pushCatalog generates a catalog, pushes one small real image for every
// image it names (sharing a base layer) and rewrites the catalog to name
// them by their real digests, then pushes the catalog image at repo:tag.
func (w *world) pushCatalog(repo, tag string, o catalogOptions) *opCatalog {
	t := w.t
	t.Helper()
	ctx := context.Background()
	o.spec.Registry = w.up.Host()
	cat, err := catalog.Generate(o.spec)
	must(t, err)

	var refs []string
	seen := map[string]bool{}
	for _, name := range cat.PackageNames() {
		for _, b := range cat.Package(name).Bundles {
			for _, ref := range append([]string{b.Image}, relatedOf(b)...) {
				if !seen[ref] {
					seen[ref] = true
					refs = append(refs, ref)
				}
			}
		}
	}
	sort.Strings(refs)
	real := make(map[string]string, len(refs))
	target := w.upTarget()
	base := imagebuilder.RandomLayer(o.spec.Seed+7, 24<<10)
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, len(refs))
	sem := make(chan struct{}, 8)
	for i, ref := range refs {
		named, err := reference.ParseNormalizedNamed(ref)
		must(t, err)
		h := fnv.New64a()
		io.WriteString(h, ref)
		img, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{base, imagebuilder.RandomLayer(h.Sum64(), 1<<10)}})
		must(t, err)
		mu.Lock()
		real[ref] = named.Name() + "@" + img.Digest.String()
		mu.Unlock()
		if o.skip != nil && o.skip(i, ref) {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := imagebuilder.Push(ctx, target, reference.Path(named), fmt.Sprintf("src-%d", i), img); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	must(t, <-errs)
	for _, name := range cat.PackageNames() {
		for _, b := range cat.Package(name).Bundles {
			b.Image = real[b.Image]
			for k := range b.RelatedImages {
				b.RelatedImages[k].Image = real[b.RelatedImages[k].Image]
			}
		}
	}

	if o.mutate != nil {
		o.mutate(cat)
	}
	files := o.files
	if files == nil {
		files = map[string][]byte{}
		must(t, cat.WriteFiles(func(name string, data []byte) error {
			files["configs/"+name] = data
			return nil
		}))
	}
	labels := o.labels
	if labels == nil {
		labels = map[string]string{catalog.ConfigsLabel: "/configs"}
	}
	platformImage := func(p imagebuilder.Platform, seed uint64) imagebuilder.ImageSpec {
		return imagebuilder.ImageSpec{
			Platform: p,
			Layers: []imagebuilder.LayerSpec{
				imagebuilder.RandomLayer(seed, 16<<10),
				imagebuilder.FileLayer(files),
				imagebuilder.FileLayer(map[string][]byte{"tmp/cache/digest": []byte("stale"), "tmp/cache/pogreb.00000": []byte("stale")}),
			},
			Labels:     labels,
			Entrypoint: []string{"/bin/opm"},
			Cmd:        []string{"serve", "/configs", "--cache-dir=/tmp/cache"},
		}
	}
	oc := &opCatalog{cat: cat, repo: repo, tag: tag, ref: w.up.Host() + "/" + repo + ":" + tag}
	if o.single {
		img, err := imagebuilder.Build(platformImage(imagebuilder.Platform{}, 11))
		must(t, err)
		must(t, imagebuilder.Push(ctx, target, repo, tag, img))
		oc.digest = img.Digest
		if o.layout != "" {
			must(t, imagebuilder.WriteLayout(o.layout, tag, img))
		}
	} else {
		idx, err := imagebuilder.BuildIndex(imagebuilder.IndexSpec{Images: []imagebuilder.ImageSpec{
			platformImage(imagebuilder.Platform{OS: "linux", Architecture: "amd64"}, 11),
			platformImage(imagebuilder.Platform{OS: "linux", Architecture: "arm64"}, 12),
		}})
		must(t, err)
		must(t, imagebuilder.PushIndex(ctx, target, repo, tag, idx))
		oc.digest = idx.Digest
		if o.layout != "" {
			must(t, imagebuilder.WriteIndexLayout(o.layout, tag, idx))
		}
	}
	return oc
}

func relatedOf(b *catalog.Bundle) []string {
	var out []string
	for _, ri := range b.RelatedImages {
		out = append(out, ri.Image)
	}
	return out
}

// writeISC writes an ImageSetConfiguration with the given mirror section body.
func (w *world) writeISC(name, mirrorBody string) string {
	w.t.Helper()
	path := filepath.Join(w.dir, name)
	must(w.t, os.WriteFile(path, []byte("kind: ImageSetConfiguration\napiVersion: mirror.openshift.io/v2alpha1\nmirror:\n"+mirrorBody), 0o644))
	return path
}

// registryBlobs reads an image's manifests and blobs from a test registry
// for the catalog library (read-only).
type registryBlobs struct {
	reg  *registrytest.Registry
	repo string
}

func (b registryBlobs) Has(d digest.Digest) bool {
	if _, err := b.reg.Blob(b.repo, d); err == nil {
		return true
	}
	_, _, err := b.reg.Manifest(b.repo, d.String())
	return err == nil
}

func (b registryBlobs) Open(d digest.Digest) (io.ReadCloser, error) {
	if data, err := b.reg.Blob(b.repo, d); err == nil {
		return io.NopCloser(bytes.NewReader(data)), nil
	}
	data, _, err := b.reg.Manifest(b.repo, d.String())
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

func (b registryBlobs) Put(digest.Digest, int64, io.Reader) error {
	return errors.New("read-only")
}

// mirroredCatalog extracts and loads the catalog image repo@d of reg.
func mirroredCatalog(t *testing.T, reg *registrytest.Registry, repo string, d digest.Digest) *catalog.Catalog {
	t.Helper()
	dir := t.TempDir()
	blobs := registryBlobs{reg: reg, repo: repo}
	must(t, catalog.ExtractFBC(blobs, d, dir))
	c, err := catalog.LoadFS(os.DirFS(dir), ".")
	must(t, err)
	return c
}

// bundleNames lists package/bundle for every bundle of c, sorted.
func bundleNames(c *catalog.Catalog) []string {
	var out []string
	for _, p := range c.PackageNames() {
		for _, b := range c.Package(p).Bundles {
			out = append(out, p+"/"+b.Name)
		}
	}
	sort.Strings(out)
	return out
}

// checkNoOPMCache checks every platform image of the mirrored catalog: no
// --cache-dir left in its command, and a layer that whites out /tmp/cache.
func checkNoOPMCache(t *testing.T, reg *registrytest.Registry, repo string, d digest.Digest) {
	t.Helper()
	data, _, err := reg.Manifest(repo, d.String())
	must(t, err)
	var top struct {
		Manifests []ocispec.Descriptor `json:"manifests"`
	}
	must(t, json.Unmarshal(data, &top))
	images := []digest.Digest{d}
	if len(top.Manifests) > 0 {
		images = nil
		for _, m := range top.Manifests {
			images = append(images, m.Digest)
		}
	}
	for _, id := range images {
		data, _, err := reg.Manifest(repo, id.String())
		must(t, err)
		var m ocispec.Manifest
		must(t, json.Unmarshal(data, &m))
		cfgData, err := reg.Blob(repo, m.Config.Digest)
		must(t, err)
		var cfg ocispec.Image
		must(t, json.Unmarshal(cfgData, &cfg))
		if strings.Contains(strings.Join(append(cfg.Config.Entrypoint, cfg.Config.Cmd...), " "), "--cache-dir") {
			t.Errorf("catalog %s@%s: command still names the opm cache: %v %v", repo, id, cfg.Config.Entrypoint, cfg.Config.Cmd)
		}
		whiteout := false
		for _, l := range m.Layers {
			for _, name := range layerNames(t, reg, repo, l.Digest) {
				if name == "tmp/.wh.cache" {
					whiteout = true
				}
			}
		}
		if !whiteout {
			t.Errorf("catalog %s@%s: no layer whites out the stale opm cache /tmp/cache", repo, id)
		}
	}
}

func layerNames(t *testing.T, reg *registrytest.Registry, repo string, d digest.Digest) []string {
	t.Helper()
	data, err := reg.Blob(repo, d)
	must(t, err)
	var r io.Reader = bytes.NewReader(data)
	if gz, err := gzip.NewReader(bytes.NewReader(data)); err == nil {
		r = gz
	}
	var names []string
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err != nil {
			break
		}
		names = append(names, strings.TrimPrefix(hdr.Name, "./"))
	}
	return names
}

// checkImages checks that every image the catalog c needs (but those
// whose reference contains one of except) is at reg under prefix by
// digest, complete, with the digest tag; it returns how many it checked.
func (w *world) checkImages(reg *registrytest.Registry, prefix string, c *catalog.Catalog, except ...string) int {
	t := w.t
	t.Helper()
	n := 0
next:
	for _, ref := range c.RelatedImages() {
		for _, e := range except {
			if strings.Contains(ref.Image, e) {
				continue next
			}
		}
		named, err := reference.ParseNormalizedNamed(ref.Image)
		must(t, err)
		d := named.(reference.Canonical).Digest()
		repo := prefix + "/" + reference.Path(named)
		got, err := reg.ManifestDigest(repo, imageset.DigestTag(d))
		if err != nil || got != d {
			t.Errorf("%s: not at the mirror as %s:%s (%v, %s)", ref.Image, repo, imageset.DigestTag(d), err, got)
			continue
		}
		w.assertComplete(reg, repo, d)
		n++
	}
	return n
}
