package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/imageset/release"
	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/releasetest"
)

// TestReleasesKubeVirtTwoArchitectures: kubeVirtContainer with the amd64
// and arm64 releases of a channel mirrors the amd64 release with its
// KubeVirt container disk and the arm64 one without (arm64 releases ship
// none), with a warning, not a refused arm64 release: the configuration
// cannot ask for the disk per architecture, and oc-mirror mirrors both.
func TestReleasesKubeVirtTwoArchitectures(t *testing.T) {
	t.Parallel()
	w := newReleaseWorld(t, []string{"4.18.1", "4.18.2"}, 3, true)
	arm, err := w.services.PublishChannel(context.Background(), w.upTarget(), w.key, "stable-4.18",
		releasetest.PayloadSpec{Host: w.up.Host(), Components: 3, KubeVirt: true, Arch: "arm64"}, "4.18.1", "4.18.2")
	must(t, err)
	w.payloads["4.18.2-arm64"], w.served["4.18.2-arm64"] = arm.Payloads["4.18.2"], arm.Signatures["4.18.2"]

	isc := w.releaseISC("isc", "    kubeVirtContainer: true\n    architectures: [amd64, arm64]\n    channels:\n    - name: stable-4.18\n")
	ws := filepath.Join(w.dir, "ws")
	code, out, errOut := w.run("mirror", "-c", isc, "--workspace", "file://"+ws, "docker://"+w.dst.Host()+"/m")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if want := "release 4.18.2 (arch arm64) is mirrored without a KubeVirt container disk"; !strings.Contains(out+errOut, want) {
		t.Errorf("output lacks %q", want)
	}
	w.assertRelease("m", w.payloads["4.18.2"], true)
	w.assertRelease("m", w.payloads["4.18.2-arm64"], false)
	if _, err := w.dst.ManifestDigest("m/openshift/release", "4.18.2-aarch64-kube-virt-container"); err == nil {
		t.Error("an arm64 KubeVirt container disk reached the mirror")
	}
	w.assertSignatureConfigMaps(filepath.Join(ws, "working-dir", "cluster-resources", "signature-configmap.yaml"), []string{"4.18.2", "4.18.2-arm64"})
}

// TestReleasesKubeVirtMulti: kubeVirtContainer with a multi-architecture
// release mirrors the KubeVirt container disk of every architecture that
// ships one (x86_64 and s390x, not arm64), each under its own tag
// (<release tag>-kube-virt-container-<arch>, as oc-mirror names them), by
// digest; the disks are in the release's plan and at the mirror.
func TestReleasesKubeVirtMulti(t *testing.T) {
	t.Parallel()
	w := newReleaseWorld(t, []string{"4.18.1"}, 3, false)
	multi := w.publishMulti(releasetest.PayloadSpec{Version: "4.18.2", Components: 3, KubeVirt: true, Platforms: []string{"amd64", "arm64", "s390x"}})
	isc := w.releaseISC("isc", "    kubeVirtContainer: true\n    architectures: [multi]\n    channels:\n    - name: stable-4.18\n      minVersion: 4.18.2\n      maxVersion: 4.18.2\n")
	code, out, errOut := w.run("mirror", "-c", isc, "--workspace", "file://"+filepath.Join(w.dir, "ws"), "docker://"+w.dst.Host()+"/m")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if strings.Contains(out+errOut, "without a KubeVirt container disk") {
		t.Errorf("a multi release with disks was said to have none:\n%s%s", out, errOut)
	}
	w.assertRelease("m", multi, false)
	for arch, tagArch := range map[string]string{"amd64": "x86_64", "s390x": "s390x"} {
		kv, ok := multi.KubeVirt[arch]
		if !ok {
			t.Fatalf("the fixture has no %s disk", arch)
		}
		tag := multi.Tag + "-kube-virt-container-" + tagArch
		if d, err := w.dst.ManifestDigest("m/openshift/release", tag); err != nil || d != kv.Digest {
			t.Errorf("openshift/release:%s at the mirror: %s, %v (want %s)", tag, d, err, kv.Digest)
			continue
		}
		w.assertComplete(w.dst, "m/openshift/release", kv.Digest)
	}
	if _, err := w.dst.ManifestDigest("m/openshift/release", multi.Tag+"-kube-virt-container-aarch64"); err == nil {
		t.Error("an arm64 KubeVirt container disk reached the mirror")
	}
}

// TestReleasesSignatureStoreFailsAfterGoodSignature: a signature store that
// serves a trusted signature-1 and then fails on signature-2 (HTTP 503) has
// proved the release: it is mirrored, with signature-1 in its ConfigMap,
// instead of refused for a lookup it did not need.
func TestReleasesSignatureStoreFailsAfterGoodSignature(t *testing.T) {
	t.Parallel()
	w := newReleaseWorld(t, []string{"4.18.1"}, 3, false)
	flaky := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/signature-2") {
			http.Error(rw, "try again later", http.StatusServiceUnavailable)
			return
		}
		w.sigs.ServeHTTP(rw, r)
	}))
	t.Cleanup(flaky.Close)
	isc := w.releaseISC("isc", "    channels:\n    - name: stable-4.18\n")
	ws := filepath.Join(w.dir, "ws")
	code, out, errOut := w.runWith(map[string]string{"--release-signature-url": flaky.URL + "/signatures"},
		"mirror", "-c", isc, "--workspace", "file://"+ws, "docker://"+w.dst.Host()+"/m")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if !strings.Contains(errOut, "release signature verified version=4.18.1") {
		t.Errorf("no verification logged:\n%s", errOut)
	}
	w.assertRelease("m", w.payloads["4.18.1"], false)
	w.assertSignatureConfigMaps(filepath.Join(ws, "working-dir", "cluster-resources", "signature-configmap.yaml"), []string{"4.18.1"})
}

// TestReleasesRealTwoMinorsShortestPath plans, with the CLI, the real
// stable-4.17 and stable-4.18 channels (real versions, generated edges) with
// a range in each and shortestPath: the dry-run plan holds exactly the
// releases of both channels' shortest paths and of the upgrade path from the
// lowest to the highest selected release, each one verified and read; that
// path is a chain of updates of the graphs, with no gap, from the first
// 4.17 release of the range to the stable-4.18 head.
func TestReleasesRealTwoMinorsShortestPath(t *testing.T) {
	t.Parallel()
	files := map[string]*releasetest.ChannelFile{}
	for _, name := range []string{"stable-4.17", "stable-4.18"} {
		cf, err := releasetest.ReadChannelFile(filepath.Join(realChannels, name+".yaml"))
		if err != nil {
			t.Skipf("real channel lists not available in %s: %v", realChannels, err)
		}
		files[name] = cf
	}
	minorOf := func(name, prefix string) []string {
		var out []string
		for _, v := range files[name].Versions {
			if strings.HasPrefix(v, prefix) {
				out = append(out, v)
			}
		}
		return out
	}
	v417, v418 := minorOf("stable-4.17", "4.17."), minorOf("stable-4.18", "4.18.")
	if len(v417) < 8 || len(v418) < 2 {
		t.Skipf("stable-4.17 has %d 4.17 releases, stable-4.18 %d 4.18 ones", len(v417), len(v418))
	}
	// stable-4.17 from its 4.17.x at a quarter to a third of the way,
	// stable-4.18 from its first 4.18 release to its head.
	min417, max417 := v417[len(v417)/4], v417[len(v417)/3]
	min418, head := v418[0], v418[len(v418)-1]
	w := newReleaseWorld(t, nil, 0, false)
	graphs := map[string]*releasetest.Graph{}
	parsed := release.Graphs{}
	for name, cf := range files {
		g := releasetest.NewGraph("amd64", cf.Versions...).GenerateEdges()
		data, err := g.JSON()
		must(t, err)
		pg, err := release.ParseGraph(data, name, "amd64")
		must(t, err)
		graphs[name], parsed[release.GraphKey{Channel: name, Type: release.TypeOCP, Arch: "amd64"}] = g, pg
	}
	spec := release.Spec{Channels: []release.ChannelSpec{
		{Name: "stable-4.17", MinVersion: min417, MaxVersion: max417, ShortestPath: true},
		{Name: "stable-4.18", MinVersion: min418, ShortestPath: true},
	}}
	plan, err := release.NewPlan(parsed, spec)
	must(t, err)
	if len(plan.Warnings) != 0 {
		t.Fatalf("plan warnings: %v", plan.Warnings)
	}
	// The upgrade path across the channels: a chain of updates of the
	// graphs from min417 to the stable-4.18 head, every release of it planned.
	edges := map[[2]string]bool{}
	for _, g := range parsed {
		for _, e := range g.Edges {
			edges[[2]string{g.Nodes[e[0]].Version, g.Nodes[e[1]].Version}] = true
		}
	}
	planned := map[string]bool{}
	for _, r := range plan.Releases {
		planned[r.Version] = true
	}
	var path []string
	for _, r := range plan.Releases {
		for _, why := range r.Why {
			if rest, ok := strings.CutPrefix(why, "mirror.platform.channels: upgrade path "); ok {
				path = strings.Split(rest[:strings.Index(rest, " (")], " → ")
			}
		}
	}
	if len(path) < 2 || path[0] != min417 || path[len(path)-1] != head {
		t.Fatalf("upgrade path across the channels %v does not go from %s to %s", path, min417, head)
	}
	for i, v := range path {
		if !planned[v] {
			t.Errorf("release %s of the upgrade path is not planned", v)
		}
		if i > 0 && !edges[[2]string{path[i-1], v}] {
			t.Errorf("the upgrade path takes %s → %s, which no graph has", path[i-1], v)
		}
	}

	// Publish signed payloads for the planned releases only, in both graphs.
	want := map[string]bool{}
	for _, r := range plan.Releases {
		p, err := releasetest.NewPayload(releasetest.PayloadSpec{Version: r.Version, Host: w.up.Host(), Components: 1})
		must(t, err)
		must(t, p.Push(context.Background(), imagebuilder.Target{URL: w.up.URL()}))
		sig, err := w.key.SignRelease(p.Digest.String(), p.Ref())
		must(t, err)
		w.sigs.Put(p.Digest.String(), sig)
		for name, g := range graphs {
			for _, v := range files[name].Versions {
				if v == r.Version {
					g.SetPayload(v, p.PullSpec())
				}
			}
		}
		want["openshift/release-images:"+p.Tag] = true
	}
	for name, g := range graphs {
		must(t, w.graphs.Put(name, g))
	}
	isc := w.releaseISC("real", fmt.Sprintf("    channels:\n    - name: stable-4.17\n      minVersion: %s\n      maxVersion: %s\n      shortestPath: true\n    - name: stable-4.18\n      minVersion: %s\n      shortestPath: true\n",
		min417, max417, min418))
	dir := filepath.Join(w.dir, "real")
	if code, out, _ := w.run("mirror", "-c", isc, "--dry-run", "file://"+dir); code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	got := plannedReleases(t, dir)
	var wanted []string
	for d := range want {
		wanted = append(wanted, d)
	}
	sort.Strings(got)
	sort.Strings(wanted)
	if strings.Join(got, " ") != strings.Join(wanted, " ") {
		t.Errorf("plan holds\n%v\nwant\n%v", got, wanted)
	}
	t.Logf("stable-4.17 %s..%s + stable-4.18 %s..%s: %d releases, upgrade path %s", min417, max417, min418, head, len(want), strings.Join(path, " → "))
}

// TestReleasesGraphWithUpdateURLOverride: with UPDATE_URL_OVERRIDE set (an
// enclave's own update service, where api.openshift.com is out of reach)
// and no --graph-data-url, graph: true reuses the graph image an earlier
// run built, as oc-mirror does, instead of downloading the graph data from
// its default address; disk-to-mirror pushes it as usual.
func TestReleasesGraphWithUpdateURLOverride(t *testing.T) {
	w := newReleaseWorld(t, []string{"4.18.1"}, 2, false)
	isc := w.releaseISC("isc", "    graph: true\n    channels:\n    - name: stable-4.18\n      minVersion: 4.18.1\n      maxVersion: 4.18.1\n")
	first := filepath.Join(w.dir, "first")
	if code, _, _ := w.run("mirror", "-c", isc, "file://"+first); code != 0 {
		t.Fatal("the first mirror-to-disk failed")
	}
	built := graphImageIn(t, first)
	t.Setenv("UPDATE_URL_OVERRIDE", w.services.GraphURL())
	second := filepath.Join(w.dir, "second")
	code, stdout, stderr := w.gapmirror("mirror", "-c", isc, "file://"+second,
		"--release-signature-url", w.services.SignatureURL(), "--release-signature-key", w.keyFile, "--graph-base-image", w.up.Host()+"/ubi9/ubi:latest")
	if code != 0 {
		t.Fatalf("mirror-to-disk with UPDATE_URL_OVERRIDE: exit %d", code)
	}
	if !strings.Contains(stdout+stderr, "reusing the graph image an earlier run built") {
		t.Error("the run did not say it reused the graph image")
	}
	if got := graphImageIn(t, second); got != built {
		t.Errorf("graph image %s, want the one the first run built, %s", got, built)
	}
	if code, _, _ := w.gapmirror("mirror", "--from", "file://"+second, "docker://"+w.dst.Host()+"/m"); code != 0 {
		t.Fatal("disk-to-mirror failed")
	}
	w.assertGraphImage("m/openshift/graph-image", built)
}

// graphImageIn is the digest of the graph image in the archive of dir.
func graphImageIn(t *testing.T, dir string) digest.Digest {
	t.Helper()
	for _, img := range archiveOf(t, dir).Set.Images {
		if img.Kind == imageset.KindReleaseGraph {
			return digest.Digest(img.Digest)
		}
	}
	t.Fatalf("no graph image in the archive of %s", dir)
	return ""
}
