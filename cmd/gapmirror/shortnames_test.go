package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// TestShortNamesWarned: an image or catalog named without its registry is
// read as oc-mirror and skopeo read it, from Docker Hub, so that their
// configurations run unchanged, and the run says so once per entry with
// the file, line and field and how to name the registry; list operators
// says it for --catalog. Docker Hub is this test's upstream, through a
// registries.conf location rewrite (nothing reaches the internet).
func TestShortNamesWarned(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(2, 4<<10)
	w.pushCatalog("redhat/redhat-operator-index", "v4.18", catalogOptions{Spec: smallSpec, Single: true})
	w.setRegistriesConf("[[registry]]\nprefix = \"docker.io\"\nlocation = \"" + w.up.Host() + "\"\ninsecure = true\n")
	ex := w.images[0] // apps/…:tag upstream, i.e. docker.io/apps/… through the rewrite
	short := ex.Repo + ":" + ex.Tag
	isc := w.writeISC("short.yaml", "  additionalImages:\n  - name: "+w.images[1].Ref+"\n  - name: "+short+"\n  operators:\n  - catalog: redhat/redhat-operator-index:v4.18\n    packages:\n    - name: operator-000\n")
	out := filepath.Join(w.dir, "ar")
	code, _, errOut := w.gapmirror("mirror", "-c", isc, "file://"+out)
	if code != 0 {
		t.Fatalf("mirror-to-disk with short names: exit %d", code)
	}
	for _, want := range []string{
		isc + `:6: mirror.additionalImages[1].name: "` + short + `" names no registry: read as docker.io/` + short + ` (Docker Hub), as oc-mirror and skopeo read it`,
		"write the registry in full to say which, e.g. registry.redhat.io/" + short + " or docker.io/" + short,
		isc + `:8: mirror.operators[0].catalog: "redhat/redhat-operator-index:v4.18" names no registry: read as docker.io/redhat/redhat-operator-index:v4.18`,
	} {
		if n := strings.Count(errOut, want); n != 1 {
			t.Errorf("want %q once, found %d times in:\n%s", want, n, errOut)
		}
	}
	if strings.Contains(errOut, w.images[1].Ref+`" names no registry`) {
		t.Errorf("a name with its registry was warned about:\n%s", errOut)
	}
	// Pinned by digest under its Docker Hub name, at its own path.
	found := false
	for _, img := range archiveOf(t, out).Set.Images {
		if img.Origin == "docker.io/"+short {
			found = img.Digest == ex.Digest.String() && img.Destination == short
		}
	}
	if !found {
		t.Errorf("the archive has no image docker.io/%s at %s by digest %s", short, short, ex.Digest)
	}

	_, _, errOut = w.gapmirror("list", "operators", "--catalog", "redhat/redhat-operator-index:v4.18")
	if !strings.Contains(errOut, `warning: --catalog "redhat/redhat-operator-index:v4.18" names no registry: read as docker.io/redhat/redhat-operator-index:v4.18`) {
		t.Errorf("list operators with a short name gives no warning:\n%s", errOut)
	}
}
