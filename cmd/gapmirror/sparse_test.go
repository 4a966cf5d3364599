package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/imageset/fbc"
	"github.com/gapmirror/gapmirror/internal/helmtest"
	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
	"github.com/gapmirror/gapmirror/internal/releasetest"
)

// sparseFixture is a three-platform image upstream (a big amd64 layer, two
// small ones) and a single-platform amd64 image.
type sparseFixture struct {
	index  *imagebuilder.Index
	single *imagebuilder.Image
}

// newSparseCopyWorld is a world whose mirror keeps sparse indexes, with the
// sparse fixture upstream and its index pushed again as multi/copy:v1.
func newSparseCopyWorld(t *testing.T) (*world, sparseFixture) {
	t.Helper()
	w := newWorld(t, registrytest.Options{})
	w.dst = registrytest.Start(t, registrytest.Options{SparseIndexes: true})
	fx := w.pushSparseFixture()
	must(t, imagebuilder.PushIndex(context.Background(), w.upTarget(), "multi/copy", "v1", fx.index))
	return w, fx
}

func (w *world) pushSparseFixture() sparseFixture {
	t := w.t
	t.Helper()
	ctx := context.Background()
	shared := imagebuilder.RandomLayer(70, 32<<10)
	idx, err := imagebuilder.BuildIndex(imagebuilder.IndexSpec{Images: []imagebuilder.ImageSpec{
		{Platform: imagebuilder.Platform{OS: "linux", Architecture: "amd64"}, Layers: []imagebuilder.LayerSpec{shared, imagebuilder.RandomLayer(71, 1<<20)}},
		{Platform: imagebuilder.Platform{OS: "linux", Architecture: "arm64"}, Layers: []imagebuilder.LayerSpec{shared, imagebuilder.RandomLayer(72, 128<<10)}},
		{Platform: imagebuilder.Platform{OS: "linux", Architecture: "ppc64le"}, Layers: []imagebuilder.LayerSpec{shared, imagebuilder.RandomLayer(73, 128<<10)}},
	}})
	must(t, err)
	must(t, imagebuilder.PushIndex(ctx, imagebuilder.Target{URL: w.up.URL()}, "multi/tool", "v1", idx))
	single, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(74, 16<<10)}})
	must(t, err)
	must(t, imagebuilder.Push(ctx, imagebuilder.Target{URL: w.up.URL()}, "single/tool", "v1", single))
	return sparseFixture{index: idx, single: single}
}

// sparseISC asks for both fixture images restricted to platforms.
func (w *world) sparseISC(name string, platforms ...string) string {
	var p strings.Builder
	for _, pl := range platforms {
		fmt.Fprintf(&p, "    - os: linux\n      architecture: %s\n", pl)
	}
	isc := fmt.Sprintf(`kind: ImageSetConfiguration
apiVersion: mirror.openshift.io/v2alpha1
mirror:
  additionalImages:
  - name: %[1]s/multi/tool:v1
    platforms:
%[2]s  - name: %[1]s/single/tool:v1
    platforms:
%[2]s`, w.up.Host(), p.String())
	path := filepath.Join(w.dir, name)
	must(w.t, os.WriteFile(path, []byte(isc), 0o644))
	return path
}

// assertSparseIndex checks that repo@d at reg is an index copied sparse
// from srcRepo upstream: the instances of the wanted architectures are there
// whole, the others and the blobs only they use are absent.
func (w *world) assertSparseIndex(reg *registrytest.Registry, repo, srcRepo string, d digest.Digest, wanted ...string) {
	t := w.t
	t.Helper()
	data, _, err := reg.Manifest(repo, d.String())
	if err != nil || digest.FromBytes(data) != d {
		t.Errorf("%s@%s: not there byte for byte (%v)", repo, d, err)
		return
	}
	var idx ocispec.Index
	must(t, json.Unmarshal(data, &idx))
	kept := map[digest.Digest]int64{}
	var dropped []ocispec.Descriptor
	for _, m := range idx.Manifests {
		if m.Platform != nil && slices.Contains(wanted, m.Platform.Architecture) {
			w.assertComplete(reg, repo, m.Digest)
			w.blobsIn(reg, repo, m.Digest, kept)
		} else {
			dropped = append(dropped, m)
		}
	}
	if len(dropped) == 0 || len(dropped) == len(idx.Manifests) {
		t.Fatalf("%s@%s: %d of %d instances are unselected: the check proves nothing", repo, d, len(dropped), len(idx.Manifests))
	}
	for _, m := range dropped {
		if _, _, err := reg.Manifest(repo, m.Digest.String()); err == nil {
			t.Errorf("%s: manifest %s of unselected platform %s was copied", repo, m.Digest, m.Platform.Architecture)
		}
		up := map[digest.Digest]int64{}
		w.blobsIn(w.up, srcRepo, m.Digest, up)
		for b := range up {
			if _, shared := kept[b]; shared || b == m.Digest {
				continue
			}
			if has, err := reg.HasBlob(repo, b); err != nil || has {
				t.Errorf("%s: blob %s of unselected platform %s is there (%v)", repo, b, m.Platform.Architecture, err)
			}
		}
	}
}

// TestSparseAdditionalImage: additionalImages[].platforms copies the index
// byte for byte and only the listed platforms' manifests and blobs, through
// the archive (which carries only those) and registry to registry; a
// single-platform image is copied whole; prune copes with the instances
// never pushed; dropping platforms later copies the rest (store, archive,
// registries); a registry that refuses sparse indexes gets a clear error.
func TestSparseAdditionalImage(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	fx := w.pushSparseFixture()
	sparse := registrytest.Start(t, registrytest.Options{SparseIndexes: true})
	isc := w.sparseISC("sparse.yaml", "arm64", "ppc64le")
	archiveDir := filepath.Join(w.dir, "archive")

	code, out, _ := w.gapmirror("mirror", "-c", isc, "--dry-run", "file://"+filepath.Join(w.dir, "plan"))
	if code != 0 || !strings.Contains(out, "[sparse: linux/arm64, linux/ppc64le]") {
		t.Errorf("dry run: exit %d, the plan does not show the platforms:\n%s", code, out)
	}

	code, _, _ = w.gapmirror("mirror", "-c", isc, "file://"+archiveDir)
	if code != 0 {
		t.Fatalf("mirror-to-disk exit %d", code)
	}
	if _, desc, _ := w.gapmirror("describe", "--images", "file://"+archiveDir); !strings.Contains(desc, "multi/tool:v1@"+fx.index.Digest.String()+"  [sparse: linux/arm64, linux/ppc64le]") {
		t.Errorf("describe does not show the sparse image:\n%s", desc)
	}
	// The archive carries the index, the selected platforms and the single
	// image: not the 1 MiB amd64 layer.
	var want int64 = int64(len(fx.index.Manifest)) + int64(len(fx.single.Manifest))
	for _, img := range fx.index.Images[1:] {
		want += int64(len(img.Manifest))
	}
	seen := map[digest.Digest]bool{}
	for _, img := range append(fx.index.Images[1:], fx.single) {
		for _, b := range img.Blobs() {
			if !seen[b.Digest] {
				seen[b.Digest] = true
				want += b.Size
			}
		}
	}
	chunks, _ := filepath.Glob(filepath.Join(archiveDir, "mirror_*.tar"))
	var size int64
	for _, c := range chunks {
		fi, err := os.Stat(c)
		must(t, err)
		size += fi.Size()
	}
	if size < want || size > want+128<<10 {
		t.Errorf("archive is %d bytes; the selected platforms are %d bytes (the amd64 layer alone is 1 MiB)", size, want)
	}

	code, _, _ = w.gapmirror("mirror", "-c", isc, "--from", "file://"+archiveDir, "docker://"+sparse.Host()+"/d2m")
	if code != 0 {
		t.Fatalf("disk-to-mirror exit %d", code)
	}
	if got, err := sparse.ManifestDigest("d2m/multi/tool", "v1"); err != nil || got != fx.index.Digest {
		t.Errorf("d2m/multi/tool:v1 is %s (%v), want the upstream index %s", got, err, fx.index.Digest)
	}
	w.assertSparseIndex(sparse, "d2m/multi/tool", "multi/tool", fx.index.Digest, "arm64", "ppc64le")
	w.assertComplete(sparse, "d2m/single/tool", fx.single.Digest)
	code, out, _ = w.gapmirror("mirror", "-c", isc, "--from", "file://"+archiveDir, "docker://"+sparse.Host()+"/d2m")
	if code != 0 || !strings.Contains(out, "0 copied, 2 already at the destination") {
		t.Errorf("disk-to-mirror again: exit %d; a sparse image already there must count as mirrored:\n%s", code, out)
	}

	ws := filepath.Join(w.dir, "ws")
	m2m := func(isc string, reg *registrytest.Registry) (int, string, string) {
		return w.gapmirror("mirror", "-c", isc, "--workspace", "file://"+ws, "--retry-times", "0", "docker://"+reg.Host()+"/m2m")
	}
	if code, _, _ := m2m(isc, sparse); code != 0 {
		t.Fatalf("mirror-to-mirror exit %d", code)
	}
	w.assertSparseIndex(sparse, "m2m/multi/tool", "multi/tool", fx.index.Digest, "arm64", "ppc64le")
	if code, out, _ := m2m(isc, sparse); code != 0 || !strings.Contains(out, "0 copied, 2 already at the destination") {
		t.Errorf("mirror-to-mirror again: exit %d:\n%s", code, out)
	}

	// Prune deletes the sparse image, taking the platforms never pushed in
	// its stride.
	single := w.writeISC("single.yaml", "  additionalImages:\n  - name: "+w.up.Host()+"/single/tool:v1\n")
	if code, out, _ := w.gapmirror("mirror", "-c", single, "--workspace", "file://"+ws, "--prune", "docker://"+sparse.Host()+"/m2m"); code != 0 || !strings.Contains(out, "prune:") {
		t.Errorf("mirror-to-mirror --prune: exit %d:\n%s", code, out)
	}
	w.gone(sparse, "m2m/multi/tool", "v1", fx.index.Digest)
	for _, img := range fx.index.Images[1:] {
		w.gone(sparse, "m2m/multi/tool", "", img.Digest)
	}

	// platforms removed: the image is wanted whole. The store, the archive
	// and both registries notice what is missing, and only that moves.
	whole := w.writeISC("whole.yaml", "  additionalImages:\n  - name: "+w.up.Host()+"/multi/tool:v1\n  - name: "+w.up.Host()+"/single/tool:v1\n")
	code, out, _ = w.gapmirror("mirror", "-c", whole, "file://"+archiveDir)
	if code != 0 || !strings.Contains(out, "1 copied, 1 already at the destination") {
		t.Errorf("mirror-to-disk whole after sparse: exit %d:\n%s", code, out)
	}
	size = 0 // the new archive's chunks: the first archive stays beside it
	for _, c := range archiveOf(t, archiveDir).Chunks {
		size += c.Size
	}
	if amd64 := fx.index.Images[0]; size < amd64.Layers[1].Size || size > amd64.Layers[1].Size+128<<10 {
		t.Errorf("incremental archive is %d bytes, want the amd64 image (%d bytes) and little more", size, amd64.Layers[1].Size)
	}
	code, out, _ = w.gapmirror("mirror", "-c", whole, "--from", "file://"+archiveDir, "docker://"+sparse.Host()+"/d2m")
	if code != 0 || !strings.Contains(out, "1 copied, 1 already at the destination") {
		t.Errorf("disk-to-mirror whole after sparse: exit %d:\n%s", code, out)
	}
	w.assertComplete(sparse, "d2m/multi/tool", fx.index.Digest)
	if code, _, _ := m2m(w.sparseISC("again.yaml", "arm64"), sparse); code != 0 {
		t.Fatalf("mirror-to-mirror sparse again: exit %d", code)
	}
	if code, out, _ := m2m(whole, sparse); code != 0 || !strings.Contains(out, "1 copied, 1 already at the destination") {
		t.Errorf("mirror-to-mirror whole after sparse: exit %d:\n%s", code, out)
	}
	w.assertComplete(sparse, "m2m/multi/tool", fx.index.Digest)

	// A registry validating every index instance refuses the sparse index.
	code, out, errOut := w.gapmirror("mirror", "-c", isc, "--workspace", "file://"+filepath.Join(w.dir, "ws2"), "--retry-times", "0", "docker://"+w.dst.Host()+"/strict")
	if code == 0 {
		t.Fatal("a registry refusing sparse indexes: exit 0")
	}
	if all := out + errOut; !strings.Contains(all, "validation.manifests.indexes.platforms: none") || !strings.Contains(all, "sparse manifest list") {
		t.Errorf("the error does not say the registry must accept sparse manifest lists:\n%s", all)
	}
}

// TestSparseRelease: platform.platforms mirrors the multi payload of the
// channel, its release image and every component copied sparse, and the
// signature that names the index digest still applies.
func TestSparseRelease(t *testing.T) {
	t.Parallel()
	w := newReleaseWorld(t, []string{"4.18.2"}, 3, false)
	multi := w.publishMulti(releasetest.PayloadSpec{Version: "4.18.2", Components: 3, Platforms: []string{"amd64", "arm64", "s390x"}})
	sparse := registrytest.Start(t, registrytest.Options{SparseIndexes: true})

	isc := w.releaseISC("sparse", "    platforms:\n    - os: linux\n      architecture: arm64\n    - os: linux\n      architecture: s390x\n    channels:\n    - name: stable-4.18\n")
	code, _, _ := w.run("mirror", "-c", isc, "--workspace", "file://"+filepath.Join(w.dir, "ws"), "docker://"+sparse.Host()+"/m")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	if got, err := sparse.ManifestDigest("m/openshift/release-images", multi.Tag); err != nil || got != multi.Digest {
		t.Fatalf("release image %s: %s (%v), want the signed index %s", multi.Tag, got, err, multi.Digest)
	}
	w.assertSparseIndex(sparse, "m/openshift/release-images", releasetest.ReleaseRepo, multi.Digest, "arm64", "s390x")
	for _, c := range multi.Components {
		named, err := reference.ParseNormalizedNamed(c.Image)
		must(t, err)
		w.assertSparseIndex(sparse, "m/openshift/release", reference.Path(named), c.Digest, "arm64", "s390x")
	}
	w.assertSignatureConfigMaps(filepath.Join(w.dir, "ws", "working-dir", "cluster-resources", "signature-configmap.yaml"), []string{"4.18.2-multi"})
}

// TestSparseOperatorCatalog: operators[].platforms rebuilds a filtered
// catalog with only the listed platforms (a new image, so whole), copies a
// catalog kept as it is (full, no packages) sparse, and copies the catalog's
// multi-arch related images sparse; single-platform bundles go whole.
func TestSparseOperatorCatalog(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	fx := w.pushSparseFixture()
	multiRef := w.up.Host() + "/multi/tool@" + fx.index.Digest.String()
	oc := w.pushCatalog("catalogs/sparse-index", "v1", catalogOptions{Spec: smallSpec, Mutate: func(c *fbc.Catalog) {
		b := c.Package("operator-001").Bundles[0]
		b.RelatedImages = append(b.RelatedImages, fbc.RelatedImage{Name: "tool", Image: multiRef})
	}})
	sparse := registrytest.Start(t, registrytest.Options{SparseIndexes: true})
	isc := w.writeISC("isc.yaml", `  operators:
  - catalog: `+oc.Ref+`
    platforms:
    - os: linux
      architecture: arm64
  - catalog: `+oc.Ref+`
    targetCatalog: whole/sparse-index
    targetTag: whole
    full: true
    platforms:
    - os: linux
      architecture: arm64
`)
	code, _, _ := w.gapmirror("mirror", "-c", isc, "--workspace", "file://"+filepath.Join(w.dir, "ws"), "docker://"+sparse.Host()+"/m")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}

	// Rebuilt: an index of the arm64 image only, complete.
	rebuilt, err := sparse.ManifestDigest("m/catalogs/sparse-index", "v1")
	must(t, err)
	data, _, err := sparse.Manifest("m/catalogs/sparse-index", rebuilt.String())
	must(t, err)
	var idx ocispec.Index
	must(t, json.Unmarshal(data, &idx))
	if len(idx.Manifests) != 1 || idx.Manifests[0].Platform == nil || idx.Manifests[0].Platform.Architecture != "arm64" {
		t.Errorf("rebuilt catalog index lists %+v, want the arm64 image only", idx.Manifests)
	}
	w.assertComplete(sparse, "m/catalogs/sparse-index", rebuilt)
	kept := mirroredCatalog(t, sparse, "m/catalogs/sparse-index", rebuilt)

	// Kept as it is: the upstream index, sparse.
	if got, err := sparse.ManifestDigest("m/whole/sparse-index", "whole"); err != nil || got != oc.Digest {
		t.Fatalf("whole catalog: %s (%v), want the upstream index %s", got, err, oc.Digest)
	}
	w.assertSparseIndex(sparse, "m/whole/sparse-index", "catalogs/sparse-index", oc.Digest, "arm64")

	// The related images: the multi-arch one sparse, the others whole.
	if n := w.checkImages(sparse, "m", kept, "multi/tool"); n == 0 {
		t.Error("no bundle image checked")
	}
	if got, err := sparse.ManifestDigest("m/multi/tool", imageset.DigestTag(fx.index.Digest)); err != nil || got != fx.index.Digest {
		t.Fatalf("multi-arch related image: %s (%v)", got, err)
	}
	w.assertSparseIndex(sparse, "m/multi/tool", "multi/tool", fx.index.Digest, "arm64")
}

// TestSparseHelmChart: platforms on a chart (oc-mirror's
// mirror.helm.*.platforms) copy the multi-platform images it renders sparse,
// registry to registry and through the archive; an image two charts render
// gets the union of their platforms, and whole when one chart lists none.
func TestSparseHelmChart(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	fx := w.pushSparseFixture()
	sparse := registrytest.Start(t, registrytest.Options{SparseIndexes: true})
	multi := w.up.Host() + "/multi/tool:v1"
	repo := helmtest.Serve(t, helmtest.Pod("tool", "1.0.0", multi))
	local := helmtest.Pod("mine", "0.1.0", multi).WriteDir(t, filepath.Join(w.dir, "charts"))
	platforms := func(archs ...string) string {
		if len(archs) == 0 {
			return ""
		}
		s := "        platforms:\n"
		for _, a := range archs {
			s += "        - os: linux\n          architecture: " + a + "\n"
		}
		return s
	}
	isc := func(name string, repoArchs []string, localArchs ...string) string {
		body := fmt.Sprintf("  helm:\n    repositories:\n    - name: demo\n      url: %s\n      charts:\n      - name: tool\n%s", repo.URL(), platforms(repoArchs...))
		if localArchs != nil {
			body += fmt.Sprintf("    local:\n    - name: mine\n      path: %s\n%s", local, strings.ReplaceAll(platforms(localArchs...), "        ", "      "))
		}
		return w.writeISC(name, body)
	}

	one := isc("one.yaml", []string{"arm64"})
	code, out, _ := w.gapmirror("mirror", "-c", one, "--dry-run", "--workspace", "file://"+filepath.Join(w.dir, "plan"), "docker://"+sparse.Host()+"/plan")
	if code != 0 || !strings.Contains(out, "[sparse: linux/arm64]") {
		t.Errorf("dry run: exit %d, the plan does not show the chart's platforms:\n%s", code, out)
	}
	if code, _, _ := w.gapmirror("mirror", "-c", one, "--workspace", "file://"+filepath.Join(w.dir, "ws"), "docker://"+sparse.Host()+"/m2m"); code != 0 {
		t.Fatalf("mirror-to-mirror exit %d", code)
	}
	w.assertSparseIndex(sparse, "m2m/multi/tool", "multi/tool", fx.index.Digest, "arm64")

	// Two charts render the image: the union of their platforms moves.
	union := isc("union.yaml", []string{"arm64"}, "ppc64le")
	archiveDir := filepath.Join(w.dir, "archive")
	if code, _, _ := w.gapmirror("mirror", "-c", union, "file://"+archiveDir); code != 0 {
		t.Fatalf("mirror-to-disk exit %d", code)
	}
	if code, _, _ := w.gapmirror("mirror", "-c", union, "--from", "file://"+archiveDir, "docker://"+sparse.Host()+"/d2m"); code != 0 {
		t.Fatalf("disk-to-mirror exit %d", code)
	}
	w.assertSparseIndex(sparse, "d2m/multi/tool", "multi/tool", fx.index.Digest, "arm64", "ppc64le")

	// One of them lists no platforms: the image is wanted whole.
	whole := isc("whole.yaml", []string{"arm64"}, []string{}...)
	code, out, _ = w.gapmirror("mirror", "-c", whole, "--dry-run", "--workspace", "file://"+filepath.Join(w.dir, "plan2"), "docker://"+sparse.Host()+"/plan")
	if code != 0 || !strings.Contains(out, "multi/tool:v1") || strings.Contains(out, "[sparse") {
		t.Errorf("dry run with a chart listing no platforms: exit %d, want multi/tool whole:\n%s", code, out)
	}
}
