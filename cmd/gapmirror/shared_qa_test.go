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
