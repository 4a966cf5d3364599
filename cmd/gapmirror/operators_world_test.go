package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/imageset/fbc"
	"github.com/gapmirror/gapmirror/internal/fixtures"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// opCatalog is an operator catalog pushed upstream (see fixtures.PushCatalog).
type opCatalog = fixtures.Catalog

// catalogOptions tune pushCatalog.
type catalogOptions = fixtures.CatalogOptions

// pushCatalog pushes a generated catalog and its images upstream.
func (w *world) pushCatalog(repo, tag string, o catalogOptions) *opCatalog {
	w.t.Helper()
	oc, err := fixtures.PushCatalog(context.Background(), w.upTarget(), w.up.Host(), repo, tag, o)
	must(w.t, err)
	return oc
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
func registryBlobs(reg *registrytest.Registry, repo string) fixtures.ReadOnlyBlobs {
	return func(d digest.Digest) ([]byte, error) {
		if data, err := reg.Blob(repo, d); err == nil {
			return data, nil
		}
		data, _, err := reg.Manifest(repo, d.String())
		return data, err
	}
}

// mirroredCatalog extracts and loads the catalog image repo@d of reg.
func mirroredCatalog(t *testing.T, reg *registrytest.Registry, repo string, d digest.Digest) *fbc.Catalog {
	t.Helper()
	c, err := fixtures.LoadCatalogImage(registryBlobs(reg, repo), d, t.TempDir())
	must(t, err)
	return c
}

// bundleNames lists package/bundle for every bundle of c, sorted.
var bundleNames = fixtures.BundleNames

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
func (w *world) checkImages(reg *registrytest.Registry, prefix string, c *fbc.Catalog, except ...string) int {
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
