package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/internal/helmtest"
	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// pushApp pushes a small image upstream as apps/<name>:<tag> and returns its digest.
func (w *world) pushApp(name, tag string, seed uint64) digest.Digest {
	w.t.Helper()
	img, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(seed, 8<<10)}})
	must(w.t, err)
	must(w.t, imagebuilder.Push(context.Background(), imagebuilder.Target{URL: w.up.URL()}, "apps/"+name, tag, img))
	return img.Digest
}

// expectApp records an upstream image the charts name, for assertMirrored.
func (w *world) expectApp(name, tag string, seed uint64) {
	d := w.pushApp(name, tag, seed)
	w.images = append(w.images, example{Ref: w.up.Host() + "/apps/" + name + ":" + tag, Repo: "apps/" + name, Tag: tag, Digest: d})
}

// TestHelmThreeTrips mirrors the images of a chart repository (the latest
// "web", whose aliased sub-chart and env-var operand oc-mirror misses, and
// a CronJob chart) and of a local chart directory to disk, from a copy of
// the archive alone into a registry, and registry to registry: every image
// by digest at the mirror, every chart in working-dir/helm as served.
func TestHelmThreeTrips(t *testing.T) {
	w := newWorld(t, registrytest.Options{})
	for i, name := range []string{"web", "init", "operand", "worker", "cleanup"} {
		w.expectApp(name, "v1", uint64(100+i))
	}
	localDigest := w.pushApp("local", "v1", 200)
	w.images = append(w.images, example{Ref: w.up.Host() + "/apps/local@" + localDigest.String(), Repo: "apps/local", Tag: "sha256-" + localDigest.Encoded(), Digest: localDigest})
	reg := w.up.Host()
	web := helmtest.Web("1.2.0", reg, "v1")
	jobs := helmtest.Jobs("0.2.0", reg+"/apps/cleanup:v1")
	// Older and pre-release versions name images that do not exist upstream:
	// picking one of them instead of the latest stable fails the run.
	repo := helmtest.Serve(t, helmtest.Web("1.1.0", reg, "old"), web, helmtest.Web("2.0.0-rc.1", reg, "rc"), helmtest.Jobs("0.1.0", reg+"/apps/cleanup:old"), jobs)
	local := helmtest.Pod("mine", "0.3.0", reg+"/apps/local@"+localDigest.String()).WriteDir(t, filepath.Join(w.dir, "charts"))
	isc := w.writeISC("helm.yaml", fmt.Sprintf(`  helm:
    repositories:
    - name: demo
      url: %s
      charts:
      - name: web
        imagePaths:
        - "{.spec.template.spec.containers[*].env[*].value}"
      - name: jobs
        version: 0.2.0
    local:
    - name: mine
      path: %s
`, repo.URL(), local))

	archiveDir := filepath.Join(w.dir, "archive")
	code, out, stderr := w.gapmirror("mirror", "-c", isc, "file://"+archiveDir)
	if code != 0 {
		t.Fatalf("mirror-to-disk exit %d", code)
	}
	if !strings.Contains(out, "6 images copied") {
		t.Errorf("summary does not say 6 images copied:\n%s", out)
	}
	if !strings.Contains(stderr, "by tag only") {
		t.Errorf("tag-only chart images are not reported:\n%s", stderr)
	}

	// The air-gapped side has only the archive chunks.
	airgap := filepath.Join(w.dir, "airgap")
	must(t, os.MkdirAll(airgap, 0o755))
	chunks, _ := filepath.Glob(filepath.Join(archiveDir, "mirror_*.tar"))
	for _, c := range chunks {
		data, err := os.ReadFile(c)
		must(t, err)
		must(t, os.WriteFile(filepath.Join(airgap, filepath.Base(c)), data, 0o644))
	}
	code, out, _ = w.gapmirror("mirror", "--from", "file://"+airgap, "docker://"+w.dst.Host()+"/d2m")
	if code != 0 {
		t.Fatalf("disk-to-mirror exit %d", code)
	}
	w.assertMirrored(w.dst, "d2m")
	if !strings.Contains(out, "helm chart: "+filepath.Join(airgap, "working-dir", "helm", "charts", "demo", "web-1.2.0.tgz")) {
		t.Errorf("summary does not name the web chart it wrote:\n%s", out)
	}
	assertCharts(t, filepath.Join(airgap, "working-dir"), map[string][]byte{
		"demo/web-1.2.0.tgz":   web.Archive(),
		"demo/jobs-0.2.0.tgz":  jobs.Archive(),
		"local/mine-0.3.0.tgz": nil,
	})
	for name, want := range map[string]string{"idms-gapmirror.yaml": "source: " + reg + "/apps", "itms-gapmirror.yaml": "source: " + reg + "/apps"} {
		data, err := os.ReadFile(filepath.Join(airgap, "working-dir", "cluster-resources", name))
		must(t, err)
		if !strings.Contains(string(data), want) || !strings.Contains(string(data), w.dst.Host()+"/d2m/apps") {
			t.Errorf("%s does not map %s to the mirror:\n%s", name, want, data)
		}
	}

	ws := filepath.Join(w.dir, "ws")
	code, _, _ = w.gapmirror("mirror", "-c", isc, "--workspace", "file://"+ws, "docker://"+w.dst.Host()+"/m2m")
	if code != 0 {
		t.Fatalf("mirror-to-mirror exit %d", code)
	}
	w.assertMirrored(w.dst, "m2m")
	assertCharts(t, filepath.Join(ws, "working-dir"), map[string][]byte{"demo/web-1.2.0.tgz": web.Archive(), "demo/jobs-0.2.0.tgz": jobs.Archive(), "local/mine-0.3.0.tgz": nil})

	// A rerun reuses the charts the workspace keeps: no second download.
	code, out, _ = w.gapmirror("mirror", "-c", isc, "--workspace", "file://"+ws, "docker://"+w.dst.Host()+"/m2m")
	if code != 0 || !strings.Contains(out, "0 images copied, 6 already there") {
		t.Errorf("rerun: exit %d:\n%s", code, out)
	}
	if n := repo.Count("/charts/web-1.2.0.tgz"); n != 2 {
		t.Errorf("web-1.2.0.tgz downloaded %d times over three runs in two workspaces, want 2", n)
	}
}

// assertCharts checks working-dir/helm: each chart file (with the bytes
// the repository served, when want has them) and its entry in charts.json.
func assertCharts(t *testing.T, wd string, want map[string][]byte) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(wd, "helm", "charts.json"))
	if err != nil {
		t.Errorf("no chart list: %v", err)
		return
	}
	var records []struct {
		File   string   `json:"file"`
		Digest string   `json:"digest"`
		Images []string `json:"images"`
	}
	must(t, json.Unmarshal(data, &records))
	if len(records) != len(want) {
		t.Errorf("charts.json lists %d charts, want %d:\n%s", len(records), len(want), data)
	}
	for name, body := range want {
		got, err := os.ReadFile(filepath.Join(wd, "helm", "charts", filepath.FromSlash(name)))
		if err != nil {
			t.Errorf("chart %s: %v", name, err)
			continue
		}
		if body != nil && string(got) != string(body) {
			t.Errorf("chart %s differs from what the repository served", name)
		}
		found := false
		for _, r := range records {
			if r.File == "helm/charts/"+name {
				found = r.Digest == digest.FromBytes(got).String() && len(r.Images) > 0
			}
		}
		if !found {
			t.Errorf("charts.json has no entry with the digest and images of %s:\n%s", name, data)
		}
	}
}
