package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/distribution/reference"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/gapmirror/gapmirror/imageset/catalog"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// sharedOperand pushes a one-package catalog and returns it with the
// reference (by digest) of an operand image its bundles need.
func (w *world) sharedOperand() (*opCatalog, string) {
	w.t.Helper()
	oc := w.pushCatalog("catalogs/shared-index", "v1", catalogOptions{spec: catalog.GenSpec{Seed: 8, Packages: 1, Bundles: 2, Channels: 1, RelatedImages: 1,
		SkipRatio: -1, SkipRangeRatio: -1, PrereleaseRatio: -1, DependencyRatio: -1}})
	for _, b := range oc.cat.Package("operator-000").Bundles {
		for _, ri := range b.RelatedImages {
			if ri.Name == "operand-0" {
				return oc, ri.Image
			}
		}
	}
	w.t.Fatal("generated catalog has no operand image")
	return nil, ""
}

// TestSharedImageFailure: an image both an operator catalog and
// additionalImages need fails to copy: the exit code has the operator and
// the additional-images bits, and the failure names the bundle needing it.
func TestSharedImageFailure(t *testing.T) {
	w := newWorld(t, registrytest.Options{})
	oc, shared := w.sharedOperand()
	named, err := reference.ParseNormalizedNamed(shared)
	must(t, err)
	data, _, err := w.up.Manifest(reference.Path(named), named.(reference.Canonical).Digest().String())
	must(t, err)
	var m ocispec.Manifest
	must(t, json.Unmarshal(data, &m))
	// Its own layer (the base layer is shared with every other image).
	w.up.SetWrap(registrytest.NewBlobCorrupter(0, m.Layers[len(m.Layers)-1].Digest).Wrap)

	isc := w.writeISC("isc.yaml", "  additionalImages:\n  - name: "+shared+"\n  operators:\n  - catalog: "+oc.ref+"\n    full: true\n    packages:\n    - name: operator-000\n")
	code, stdout, _ := w.gapmirror("mirror", "-c", isc, "--workspace", "file://"+filepath.Join(w.dir, "ws"), "--retry-times", "1", "docker://"+w.dst.Host()+"/m")
	if code != 4|8 {
		t.Errorf("exit %d, want 12 (operator 4 | additional images 8)", code)
	}
	if !strings.Contains(stdout, "FAILED") || !strings.Contains(stdout, "needed by") || !strings.Contains(stdout, "mirror.additionalImages[0]") || !strings.Contains(stdout, "package operator-000 bundle") {
		t.Errorf("the failure does not say both sections need the image:\n%s", stdout)
	}
	if strings.Count(stdout, "FAILED") != 1 {
		t.Errorf("one image failed, reported %d times:\n%s", strings.Count(stdout, "FAILED"), stdout)
	}
}
