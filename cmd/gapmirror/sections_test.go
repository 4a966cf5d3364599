package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/distribution/reference"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/gapmirror/gapmirror/imageset/catalog"
	"github.com/gapmirror/gapmirror/imageset/release/releasetest"
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

// TestBlockedAcrossSections: one blockedImages list keeps the matching
// images of every section out (a catalog operand, release components); the
// summary says so; disk-to-mirror writes the same IDMS as mirror-to-mirror,
// with no entry covering a blocked image.
func TestBlockedAcrossSections(t *testing.T) {
	w := newReleaseWorld(t, []string{"4.18.1", "4.18.2"}, 3, false)
	oc, operand := w.sharedOperand()
	isc := w.writeISC("isc.yaml", "  operators:\n  - catalog: "+oc.ref+"\n    packages:\n    - name: operator-000\n"+
		"  platform:\n    channels:\n    - name: stable-4.18\n      minVersion: 4.18.1\n  blockedImages:\n  - name: operand-0\n  - name: "+releasetest.ComponentRepo+"\n")
	out := filepath.Join(w.dir, "out")
	code, m2dOut, _ := w.run("mirror", "-c", isc, "file://"+out)
	if code != 0 {
		t.Fatalf("mirror-to-disk exit %d", code)
	}
	code, d2mOut, _ := w.run("mirror", "--from", "file://"+out, "docker://"+w.dst.Host()+"/d2m")
	if code != 0 {
		t.Fatalf("disk-to-mirror exit %d", code)
	}
	code, m2mOut, _ := w.run("mirror", "-c", isc, "--workspace", "file://"+filepath.Join(w.dir, "ws"), "docker://"+w.dst.Host()+"/m2m")
	if code != 0 {
		t.Fatalf("mirror-to-mirror exit %d", code)
	}
	// 4 distinct components (two are the same image in both releases) and the operand.
	for _, stdout := range []string{m2dOut, d2mOut, m2mOut} {
		if !strings.Contains(stdout, "5 images left out by mirror.blockedImages") {
			t.Errorf("the summary does not say what was blocked:\n%s", stdout)
		}
	}
	named, err := reference.ParseNormalizedNamed(operand)
	must(t, err)
	for _, prefix := range []string{"d2m", "m2m"} {
		if _, err := w.dst.ManifestDigest(prefix+"/"+reference.Path(named), named.(reference.Canonical).Digest().String()); err == nil {
			t.Errorf("%s: blocked %s was mirrored", prefix, operand)
		}
		if tags, _ := w.dst.Tags(prefix + "/openshift/release"); len(tags) != 0 {
			t.Errorf("%s: blocked release components were mirrored: %v", prefix, tags)
		}
		for _, v := range []string{"4.18.1", "4.18.2"} {
			p := w.payloads[v]
			w.present(w.dst, prefix+"/openshift/release-images", p.Tag, p.Digest)
		}
	}
	idms := func(dir string) string {
		return readFile(t, filepath.Join(dir, "working-dir", "cluster-resources", "idms-gapmirror.yaml"))
	}
	d2m, m2m := idms(out), idms(filepath.Join(w.dir, "ws"))
	if strings.ReplaceAll(d2m, "/d2m", "/X") != strings.ReplaceAll(m2m, "/m2m", "/X") {
		t.Errorf("disk-to-mirror and mirror-to-mirror IDMS differ:\n%s\n---\n%s", d2m, m2m)
	}
	for _, entry := range []string{"source: " + named.Name() + "\n", "source: " + w.up.Host() + "/operator-000\n", releasetest.ComponentRepo} {
		if strings.Contains(d2m, entry) {
			t.Errorf("disk-to-mirror IDMS has an entry covering a blocked image (%q):\n%s", entry, d2m)
		}
	}
}
