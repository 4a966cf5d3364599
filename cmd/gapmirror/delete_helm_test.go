package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/internal/helmtest"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// twoImageChart is a chart whose Pod runs two images.
func twoImageChart(name, version, a, b string) helmtest.Chart {
	return helmtest.New(name, version, "", map[string]string{
		"templates/pod.yaml": fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  containers:
  - name: own
    image: %s
  - name: shared
    image: %s
`, name, a, b),
	})
}

// helmDeleteWorld is a chart repository with charts alpha and beta, each
// deploying an image of its own and one image both deploy, mirrored
// mirror-to-mirror.
type helmDeleteWorld struct {
	*world
	ws, root            string
	alpha, beta, shared digest.Digest
}

func newHelmDeleteWorld(t *testing.T) *helmDeleteWorld {
	w := &helmDeleteWorld{world: newWorld(t, registrytest.Options{})}
	reg := w.up.Host() + "/apps/"
	w.alpha, w.beta, w.shared = w.pushApp("alpha", "v1", 301), w.pushApp("beta", "v1", 302), w.pushApp("shared", "v1", 303)
	repo := helmtest.Serve(t, twoImageChart("alpha", "1.0.0", reg+"alpha:v1", reg+"shared:v1"), twoImageChart("beta", "2.0.0", reg+"beta:v1", reg+"shared:v1"))
	isc := w.writeISC("isc.yaml", fmt.Sprintf("  helm:\n    repositories:\n    - name: demo\n      url: %s\n      charts:\n      - name: alpha\n        version: 1.0.0\n      - name: beta\n", repo.URL()))
	w.ws = filepath.Join(w.dir, "ws")
	w.root = w.dst.Host() + "/m2m"
	if code, _, _ := w.gapmirror("mirror", "-c", isc, "--workspace", "file://"+w.ws, "docker://"+w.root); code != 0 {
		t.Fatal("mirror-to-mirror failed")
	}
	return w
}

// TestDeleteHelmChart: delete.helm naming one of two mirrored charts plans,
// from the workspace's records alone (the chart repository is gone), the
// deletion of that chart's own image and keeps the image the other chart
// also deploys, saying why; executed, the image is gone, the rest stays and
// the deletion is recorded.
func TestDeleteHelmChart(t *testing.T) {
	t.Parallel()
	w := newHelmDeleteWorld(t)
	disc := w.disc("disc.yaml", "  helm:\n    repositories:\n    - name: demo\n      url: http://127.0.0.1:1/gone\n      charts:\n      - name: alpha\n        version: 1.0.0\n")
	dst := "docker://" + w.root
	code, stdout, stderr := w.gapmirror("delete", "-c", disc, "--generate", "--workspace", "file://"+w.ws, dst)
	if code != 0 {
		t.Fatalf("generate: exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stdout, "still used by mirror.helm.repositories[0].charts[1]: helm chart beta 2.0.0") || !strings.Contains(stdout, "apps/shared") {
		t.Errorf("the preview does not say the shared image stays for chart beta:\n%s", stdout)
	}
	plan := filepath.Join(w.ws, "working-dir", "delete", "delete-images.yaml")
	data, err := os.ReadFile(plan)
	must(t, err)
	if !strings.Contains(string(data), "delete.helm.repositories[0].charts[0] (helm chart alpha 1.0.0)") || strings.Contains(string(data), "imageReference: docker://"+w.root+"/apps/shared") || strings.Contains(string(data), "imageReference: docker://"+w.root+"/apps/beta") {
		t.Errorf("the plan does not delete exactly alpha's own image:\n%s", data)
	}
	if code, _, _ := w.gapmirror("delete", "--delete-yaml-file", plan, dst); code != 0 {
		t.Fatalf("execute: exit %d", code)
	}
	w.gone(w.dst, "m2m/apps/alpha", "v1", w.alpha)
	// The chart itself, served from the mirror, goes with it; beta's stays.
	if _, err := w.dst.ManifestDigest("m2m/charts/alpha", "1.0.0"); err == nil {
		t.Errorf("the deleted chart alpha 1.0.0 is still served at m2m/charts/alpha:1.0.0")
	}
	if _, err := w.dst.ManifestDigest("m2m/charts/beta", "2.0.0"); err != nil {
		t.Errorf("chart beta 2.0.0 is gone from the mirror: %v", err)
	}
	w.present(w.dst, "m2m/apps/shared", "v1", w.shared)
	w.present(w.dst, "m2m/apps/beta", "v1", w.beta)
	if files, _ := filepath.Glob(filepath.Join(w.ws, "working-dir", "delete", "*-deleted.json")); len(files) != 1 {
		t.Errorf("deletion records: %v", files)
	}
	rec := readFile(t, filepath.Join(w.ws, "working-dir", "mirrors", strings.NewReplacer("/", "_", ":", "_").Replace(w.root)+".json"))
	if strings.Contains(rec, "apps/alpha:v1") || !strings.Contains(rec, "apps/beta:v1") {
		t.Errorf("the mirror record does not forget exactly the deleted image:\n%s", rec)
	}
}

// TestDeleteHelmBadInput: a chart, a chart version, a repository and a
// local chart this workspace never mirrored are refused, each naming its
// field, and no plan is written.
func TestDeleteHelmBadInput(t *testing.T) {
	t.Parallel()
	w := newHelmDeleteWorld(t)
	disc := w.disc("bad.yaml", `  helm:
    repositories:
    - name: demo
      url: http://127.0.0.1:1/
      charts:
      - name: nope
      - name: alpha
        version: 9.9.9
    - name: other
      url: http://127.0.0.1:1/other
    local:
    - name: mine
      path: /nowhere/mine
`)
	code, _, stderr := w.gapmirror("delete", "-c", disc, "--generate", "--workspace", "file://"+w.ws, "docker://"+w.root)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	for _, s := range []string{
		"delete.helm.repositories[0].charts[0]: helm chart nope (any version) from repository demo was not mirrored",
		"delete.helm.repositories[0].charts[1]: helm chart alpha 9.9.9",
		"delete.helm.repositories[1]: any chart of helm repository other",
		"delete.helm.local[0]: local helm chart mine",
		"alpha 1.0.0 (demo)",
	} {
		if !strings.Contains(stderr, s) {
			t.Errorf("error does not mention %q:\n%s", s, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(w.ws, "working-dir", "delete", "delete-images.yaml")); err == nil {
		t.Errorf("a plan was written for a refused configuration")
	}
	w.present(w.dst, "m2m/apps/alpha", "v1", w.alpha)
}
