package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// TestShortNamesRefused: an image, catalog or release named without its
// registry is refused up front, with the file, line and field, instead
// of being pulled from Docker Hub (what oc-mirror and skopeo would do)
// or from a registries.conf search; nothing is contacted.
func TestShortNamesRefused(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	isc := w.writeISC("short.yaml", "  additionalImages:\n  - name: "+w.up.Host()+"/apps/app:v1\n  - name: ubi9/ubi:latest\n  operators:\n  - catalog: redhat/redhat-operator-index:v4.18\n")
	code, _, errOut := w.gapmirror("mirror", "-c", isc, "file://"+filepath.Join(w.dir, "ar"))
	for _, want := range []string{
		isc + `:6: mirror.additionalImages[1].name: "ubi9/ubi:latest" is not a valid image reference: it names no registry`,
		"e.g. registry.redhat.io/ubi9/ubi:latest, or docker.io/ubi9/ubi:latest for Docker Hub's",
		isc + `:8: mirror.operators[0].catalog: "redhat/redhat-operator-index:v4.18" is not a valid catalog reference`,
	} {
		if code != 1 || !strings.Contains(errOut, want) {
			t.Errorf("short names: exit %d (want 1), want %q in:\n%s", code, want, errOut)
		}
	}
	code, _, errOut = w.gapmirror("list", "operators", "--catalog", "redhat/redhat-operator-index:v4.18")
	if code != 1 || !strings.Contains(errOut, `--catalog "redhat/redhat-operator-index:v4.18": it names no registry`) {
		t.Errorf("list operators with a short name: exit %d, stderr:\n%s", code, errOut)
	}
}
