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
	t.Parallel()
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

	// The plan names each image's chart, version, object and template.
	code, out, _ := w.gapmirror("mirror", "-c", isc, "--dry-run", "--workspace", "file://"+filepath.Join(w.dir, "plan"), "docker://"+w.dst.Host()+"/plan")
	if code != 0 || !strings.Contains(out, reg+"/apps/worker:v1 -> apps/worker:v1  (mirror.helm.repositories[0].charts[0]: helm chart web 1.2.0: Deployment/web-worker (web/charts/worker/templates/deployment.yaml))") {
		t.Errorf("dry run: exit %d, plan:\n%s", code, out)
	}

	archiveDir := filepath.Join(w.dir, "archive")
	code, out, stderr := w.gapmirror("mirror", "-c", isc, "file://"+archiveDir)
	if code != 0 {
		t.Fatalf("mirror-to-disk exit %d", code)
	}
	if !strings.Contains(out, "6 copied") {
		t.Errorf("summary does not say 6 copied:\n%s", out)
	}
	if !strings.Contains(stderr, "by tag only") {
		t.Errorf("tag-only chart images are not reported:\n%s", stderr)
	}

	code, out, _ = w.gapmirror("describe", "file://"+archiveDir)
	if code != 0 || !strings.Contains(out, "helm charts (3): demo/web-1.2.0.tgz, demo/jobs-0.2.0.tgz, local/mine-0.3.0.tgz") {
		t.Errorf("describe does not list the charts: exit %d\n%s", code, out)
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
	if code != 0 || !strings.Contains(out, "0 copied, 6 already at the destination, 3 built by gapmirror") {
		t.Errorf("rerun: exit %d:\n%s", code, out)
	}
	if n := repo.Count("/charts/web-1.2.0.tgz"); n != 3 {
		t.Errorf("web-1.2.0.tgz downloaded %d times over four runs in three workspaces, want 3", n)
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

// TestHelmBadInputs: an unreachable repository, an unknown chart, an
// unknown version, a chart that needs values, an image missing upstream and
// a blocked image each fail or leave out only themselves, say what to fix,
// and the run exits with the helm bit (16) after mirroring the rest.
func TestHelmBadInputs(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.expectApp("good", "v1", 300)
	w.expectApp("many", "v1", 302)
	w.expectApp("many", "v2", 303)
	w.pushApp("blocked", "v1", 301)
	reg := w.up.Host()
	// A repository listed without charts gives every version of every chart but library ones.
	every := helmtest.Serve(t, helmtest.Pod("many", "1.0.0", reg+"/apps/many:v1"), helmtest.Pod("many", "2.0.0", reg+"/apps/many:v2"),
		helmtest.New("lib", "1.0.0", "type: library\n", map[string]string{"templates/_x.tpl": "{{ define \"lib.x\" }}{{ end }}"}))
	repo := helmtest.Serve(t,
		helmtest.Pod("good", "1.0.0", reg+"/apps/good:v1"),
		helmtest.Pod("gone", "1.0.0", reg+"/apps/missing:v1"),
		helmtest.Pod("fenced", "1.0.0", reg+"/apps/blocked:v1"),
		helmtest.NeedsValues("picky", "1.0.0"),
		helmtest.Pod("shouty", "1.0.0", reg+"/apps/Shouty:v1"))
	isc := w.writeISC("bad.yaml", fmt.Sprintf(`  blockedImages:
  - name: apps/blocked
  helm:
    repositories:
    - name: down
      url: http://127.0.0.1:1/charts
    - name: demo
      url: %s
      charts:
      - name: good
      - name: nosuch
      - name: good
        version: 9.9.9
      - name: picky
      - name: gone
      - name: fenced
      - name: shouty
    - name: every
      url: %s
    local:
    - name: missing-dir
      path: %s
`, repo.URL(), every.URL(), filepath.Join(w.dir, "no-such-chart")))
	ws := filepath.Join(w.dir, "ws")
	code, out, stderr := w.gapmirror("mirror", "-c", isc, "--workspace", "file://"+ws, "docker://"+w.dst.Host()+"/m")
	if code != 16 {
		t.Errorf("exit %d, want 16 (helm failures)", code)
	}
	if _, err := os.Stat(filepath.Join(ws, "working-dir", "helm", "charts", "demo", "shouty-1.0.0.tgz")); err != nil {
		t.Errorf("a chart that rendered is not kept because one of its images is bad: %v", err)
	}
	if every.Count("/charts/lib-1.0.0.tgz") != 0 {
		t.Error("a library chart was downloaded")
	}
	w.assertMirrored(w.dst, "m")
	all := out + stderr
	for _, want := range []string{
		"helm repository down (http://127.0.0.1:1/charts)",
		"check mirror.helm.repositories[0].url",
		`chart "nosuch" is not in the repository index (it has fenced, gone, good, picky, shouty): fix mirror.helm.repositories[1].charts[1]`,
		`chart "good" has no version "9.9.9" in the repository index (it has 1.0.0): fix mirror.helm.repositories[1].charts[2]`,
		"helm chart picky 1.0.0 from repository demo (mirror.helm.repositories[1].charts[3])",
		"set image.tag",
		reg + "/apps/missing:v1 (mirror.helm.repositories[1].charts[4]: helm chart gone 1.0.0: Pod/gone",
		"helm chart missing-dir (local, ",
		"fix mirror.helm.local[0].path",
		"1 images left out by mirror.blockedImages",
		"6 helm repositories, charts or chart images could not be used",
		`Pod/shouty in shouty/templates/pod.yaml renders image "` + reg + `/apps/Shouty:v1", which is not an image reference`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("output does not say %q", want)
		}
	}
	// Nothing the config did not ask for, and no blocked image, in IDMS/ITMS terms: the blocked repository is not mirrored.
	if _, err := w.dst.ManifestDigest("m/apps/blocked", "v1"); err == nil {
		t.Error("the blocked image was mirrored")
	}

	// A broken imagePaths expression is a configuration error naming the field.
	bad := w.writeISC("badpath.yaml", fmt.Sprintf(`  helm:
    repositories:
    - name: demo
      url: %s
      charts:
      - name: good
        imagePaths: ["{.spec.containers[*"]
`, repo.URL()))
	code, _, stderr = w.gapmirror("mirror", "-c", bad, "--workspace", "file://"+ws, "docker://"+w.dst.Host()+"/m")
	if code != 1 || !strings.Contains(stderr, "mirror.helm.repositories[0].charts[0].imagePaths[0]") {
		t.Errorf("broken imagePaths: exit %d:\n%s", code, stderr)
	}
}
