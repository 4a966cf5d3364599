package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// TestSharedReadQAGhostRepo: an image named by a digest its repository
// does not hold, next to the repository that does: the manifest read
// shared by digest must not make it look present there.
func TestSharedReadQAGhostRepo(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	ctx := context.Background()
	layers := []imagebuilder.LayerSpec{imagebuilder.RandomLayer(91, 16<<10)}
	a, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: layers, Annotations: map[string]string{"which": "a"}})
	must(t, err)
	b, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: layers, Annotations: map[string]string{"which": "b"}})
	must(t, err)
	other, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(92, 16<<10)}})
	must(t, err)
	must(t, imagebuilder.Push(ctx, w.upTarget(), "good/app", "v1", a))
	must(t, imagebuilder.Push(ctx, w.upTarget(), "ghost/same", "v1", b))
	must(t, imagebuilder.Push(ctx, w.upTarget(), "ghost/other", "v1", other))
	if _, _, err := w.up.Manifest("ghost/same", a.Digest.String()); err == nil {
		t.Fatal("fixture: ghost/same holds a's manifest")
	}
	for _, mode := range []string{"m2m", "m2d"} {
		isc := filepath.Join(w.dir, mode+".yaml")
		must(t, os.WriteFile(isc, []byte(fmt.Sprintf(`kind: ImageSetConfiguration
apiVersion: mirror.openshift.io/v2alpha1
mirror:
  additionalImages:
  - name: %[1]s/good/app:v1
  - name: %[1]s/ghost/same@%[2]s
  - name: %[1]s/ghost/other@%[2]s
`, w.up.Host(), a.Digest)), 0o644))
		target := "docker://" + w.dst.Host() + "/" + mode
		args := []string{"mirror", "-c", isc, "--workspace", "file://" + filepath.Join(w.dir, "ws-"+mode), target}
		if mode == "m2d" {
			args = []string{"mirror", "-c", isc, "file://" + filepath.Join(w.dir, "out")}
		}
		code, out, _ := w.gapmirror(args...)
		if code == 0 {
			t.Errorf("%s: exit 0 with two images whose repositories do not hold them", mode)
		}
		for _, repo := range []string{"ghost/same", "ghost/other"} {
			if !strings.Contains(out, "FAILED") || !strings.Contains(out, repo+"@") {
				t.Errorf("%s: %s not reported failed:\n%s", mode, repo, out)
			}
			if mode == "m2m" {
				if _, _, err := w.dst.Manifest(mode+"/"+repo, a.Digest.String()); err == nil {
					t.Errorf("%s: %s@%s is at the mirror, upstream %s does not hold it", mode, repo, a.Digest, repo)
				}
			}
		}
	}
}

// TestSharedReadQARetried: two images naming one multi-arch index with
// other platforms, whose blob reads are cut once each and retried
// (--retry-times): both arrive whole with their own platforms, to a
// mirror and through an archive.
func TestSharedReadQARetried(t *testing.T) {
	t.Parallel()
	w, fx := newSparseCopyWorld(t)
	isc := w.writeISC("isc.yaml", fmt.Sprintf(`  additionalImages:
  - name: %[1]s/multi/tool:v1
    platforms:
    - os: linux
      architecture: arm64
  - name: %[1]s/multi/copy@%[2]s
    platforms:
    - os: linux
      architecture: amd64
    - os: linux
      architecture: ppc64le
`, w.up.Host(), fx.index.Digest))
	cut := registrytest.NewBlobTruncator(1000, 1)
	w.up.SetWrap(cut.Wrap)
	code, _, _ := w.gapmirror("mirror", "-c", isc, "--retry-times", "3", "--workspace", "file://"+filepath.Join(w.dir, "ws"), "docker://"+w.dst.Host()+"/m")
	if code != 0 {
		t.Fatalf("mirror-to-mirror with cut blobs: exit %d", code)
	}
	out := filepath.Join(w.dir, "out")
	code, _, _ = w.gapmirror("mirror", "-c", isc, "--retry-times", "3", "file://"+out)
	w.up.SetWrap(nil)
	if code != 0 {
		t.Fatalf("mirror-to-disk with cut blobs: exit %d", code)
	}
	if cut.Cuts() == 0 {
		t.Fatal("no blob read was cut")
	}
	if code, _, _ := w.gapmirror("mirror", "--from", "file://"+out, "docker://"+w.dst.Host()+"/d"); code != 0 {
		t.Fatal("disk-to-mirror failed")
	}
	for _, p := range []string{"m", "d"} {
		w.assertSparseIndex(w.dst, p+"/multi/tool", "multi/tool", fx.index.Digest, "arm64")
		w.assertSparseIndex(w.dst, p+"/multi/copy", "multi/copy", fx.index.Digest, "amd64", "ppc64le")
	}
}
