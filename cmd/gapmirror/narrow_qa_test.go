package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/releasetest"
)

// narrowChannel is a stable-4.18 channel body from min to max.
func narrowChannel(min, max string) string {
	return "    channels:\n    - name: stable-4.18\n      minVersion: " + min + "\n      maxVersion: " + max + "\n"
}

// publishMultis pushes and signs a multi payload per version and serves
// them as the multi graph of stable-4.18, as payloads["<version>-multi"].
func (w *releaseWorld) publishMultis(components int, versions ...string) {
	w.t.Helper()
	w.publishMultiSpecs(releasetest.PayloadSpec{Components: components}, versions...)
}

// publishMultiSpecs is publishMultis with spec for every payload.
func (w *releaseWorld) publishMultiSpecs(spec releasetest.PayloadSpec, versions ...string) {
	t := w.t
	t.Helper()
	g := releasetest.NewGraph("multi", versions...)
	for _, v := range versions {
		spec.Version, spec.Arch, spec.Host = v, "multi", w.up.Host()
		p, err := releasetest.NewPayload(spec)
		must(t, err)
		must(t, p.Push(context.Background(), imagebuilder.Target{URL: w.up.URL()}))
		sig, err := w.key.SignRelease(p.Digest.String(), p.Ref())
		must(t, err)
		w.sigs.Put(p.Digest.String(), sig)
		w.payloads[v+"-multi"], w.served[v+"-multi"] = p, sig
		g.SetPayload(v, p.PullSpec())
	}
	must(t, w.graphs.Put("stable-4.18", g.GenerateEdges()))
}

// TestNarrowQAMulti: an archive of amd64 and multi releases of a channel
// (with graph: true and KubeVirt disks); a subset narrowing the channel
// pushes both architectures' releases within the range, with their
// components and disks, the graph image, and the signature ConfigMaps of
// exactly those releases.
func TestNarrowQAMulti(t *testing.T) {
	t.Parallel()
	w := newReleaseWorld(t, []string{"4.18.1", "4.18.2", "4.18.3"}, 2, true)
	w.publishMultis(2, "4.18.1", "4.18.2", "4.18.3")
	archiveDir := filepath.Join(w.dir, "archive")
	head := "    graph: true\n    kubeVirtContainer: true\n    architectures: [amd64, multi]\n"
	if code, out, errOut := w.run("mirror", "-c", w.releaseISC("isc", head+narrowChannel("4.18.1", "4.18.3")), "file://"+archiveDir); code != 0 {
		t.Fatalf("mirror-to-disk failed\n%s%s", out, errOut)
	}
	code, out, errOut := w.run("mirror", "-c", w.releaseISC("narrow", head+narrowChannel("4.18.2", "4.18.3")), "--from", "file://"+archiveDir, "docker://"+w.dst.Host()+"/n")
	if code != 0 {
		t.Fatalf("disk-to-mirror of the narrowed channel failed\n%s%s", out, errOut)
	}
	for _, v := range []string{"4.18.2", "4.18.3"} {
		w.assertRelease("n", w.payloads[v], true)
		w.assertRelease("n", w.payloads[v+"-multi"], false)
	}
	for _, v := range []string{"4.18.1", "4.18.1-multi"} {
		if _, err := w.dst.ManifestDigest("n/openshift/release-images", w.payloads[v].Tag); err == nil {
			t.Errorf("release %s is outside the range but was pushed", v)
		}
	}
	if _, err := w.dst.ManifestDigest("n/openshift/graph-image", "latest"); err != nil {
		t.Errorf("graph image not pushed: %v", err)
	}
	cr := filepath.Join(archiveDir, "working-dir", "cluster-resources")
	w.assertSignatureConfigMaps(filepath.Join(cr, "signature-configmap.yaml"), []string{"4.18.2", "4.18.3", "4.18.2-multi", "4.18.3-multi"})
	if data, err := os.ReadFile(filepath.Join(cr, "updateService.yaml")); err != nil || !strings.Contains(string(data), "graph-image") {
		t.Errorf("updateService.yaml: %v\n%s", err, data)
	}
}

// TestNarrowQAEmptyRange: a narrowed range within the archive's holding
// none of its releases pushes no release, and says so or succeeds without
// claiming releases.
func TestNarrowQAEmptyRange(t *testing.T) {
	t.Parallel()
	w := newReleaseWorld(t, []string{"4.18.1", "4.18.3"}, 2, false)
	archiveDir := filepath.Join(w.dir, "archive")
	if code, _, _ := w.run("mirror", "-c", w.releaseISC("isc", narrowChannel("4.18.1", "4.18.3")), "file://"+archiveDir); code != 0 {
		t.Fatal("mirror-to-disk failed")
	}
	code, out, errOut := w.run("mirror", "-c", w.releaseISC("none", narrowChannel("4.18.2", "4.18.2")), "--from", "file://"+archiveDir, "docker://"+w.dst.Host()+"/e")
	t.Logf("exit %d\n%s%s", code, out, errOut)
	if repos, _ := w.dst.Catalog(); len(repos) > 0 {
		t.Errorf("an empty range pushed: %v", repos)
	}
}

// TestNarrowQAPruneSwitch: an enclave on a wide subset of the archive's
// channel switched with --prune to a narrower one loses only the releases
// that left (and components no kept release shares) and keeps the rest whole.
func TestNarrowQAPruneSwitch(t *testing.T) {
	t.Parallel()
	w := newReleaseWorld(t, []string{"4.18.1", "4.18.2", "4.18.3"}, 6, false)
	archiveDir := filepath.Join(w.dir, "archive")
	if code, _, _ := w.run("mirror", "-c", w.releaseISC("isc", "    graph: true\n"+narrowChannel("4.18.1", "4.18.3")), "file://"+archiveDir); code != 0 {
		t.Fatal("mirror-to-disk failed")
	}
	dst := "docker://" + w.dst.Host() + "/p"
	if code, out, errOut := w.run("mirror", "-c", w.releaseISC("wide", narrowChannel("4.18.1", "4.18.2")), "--from", "file://"+archiveDir, dst); code != 0 {
		t.Fatalf("wide subset failed\n%s%s", out, errOut)
	}
	w.assertRelease("p", w.payloads["4.18.1"], false)
	if code, out, errOut := w.run("mirror", "-c", w.releaseISC("narrow", narrowChannel("4.18.2", "4.18.3")), "--prune", "--from", "file://"+archiveDir, dst); code != 0 {
		t.Fatalf("narrow subset with --prune failed\n%s%s", out, errOut)
	}
	p1 := w.payloads["4.18.1"]
	w.gone(w.dst, "p/openshift/release-images", p1.Tag, p1.Digest)
	kept := map[string]bool{}
	for _, v := range []string{"4.18.2", "4.18.3"} {
		w.assertRelease("p", w.payloads[v], false)
		for _, c := range w.payloads[v].Components {
			kept[c.Digest.String()] = true
		}
	}
	for _, c := range p1.Components {
		if kept[c.Digest.String()] {
			w.gone(w.dst, "p/openshift/release", p1.Tag+"-"+c.Name, "")
		} else {
			w.gone(w.dst, "p/openshift/release", p1.Tag+"-"+c.Name, c.Digest)
		}
	}
	if _, err := w.dst.ManifestDigest("p/openshift/graph-image", "latest"); err == nil {
		t.Error("graph image pushed by subsets without graph")
	}
	w.assertSignatureConfigMaps(filepath.Join(archiveDir, "working-dir", "cluster-resources", "signature-configmap.yaml"), []string{"4.18.2", "4.18.3"})
}

// TestNarrowQATwoArchives: an enclave catching up on two archives (the
// second incremental, its channel's range widened) with a subset narrowing
// the channel to releases of both archives gets each of them whole.
func TestNarrowQATwoArchives(t *testing.T) {
	t.Parallel()
	w := newReleaseWorld(t, []string{"4.18.1", "4.18.2", "4.18.3"}, 6, false)
	archiveDir := filepath.Join(w.dir, "archive")
	for _, max := range []string{"4.18.2", "4.18.3"} {
		if code, _, _ := w.run("mirror", "-c", w.releaseISC("isc-"+max, narrowChannel("4.18.1", max)), "file://"+archiveDir); code != 0 {
			t.Fatalf("mirror-to-disk to %s failed", max)
		}
	}
	code, out, errOut := w.run("mirror", "-c", w.releaseISC("narrow", narrowChannel("4.18.2", "4.18.3")), "--from", "file://"+archiveDir, "docker://"+w.dst.Host()+"/c")
	if code != 0 {
		t.Fatalf("disk-to-mirror of two archives failed\n%s%s", out, errOut)
	}
	for _, v := range []string{"4.18.2", "4.18.3"} {
		w.assertRelease("c", w.payloads[v], false)
	}
	if _, err := w.dst.ManifestDigest("c/openshift/release-images", w.payloads["4.18.1"].Tag); err == nil {
		t.Error("4.18.1 is outside the subset but was pushed")
	}
}

// TestNarrowQATwoChannels: an archive of two channels selecting the same
// releases; a subset narrowing only the second (the first left out) pushes
// the releases within its range, and one keeping the first whole beside
// the narrowed second pushes them all.
func TestNarrowQATwoChannels(t *testing.T) {
	t.Parallel()
	w := newReleaseWorld(t, []string{"4.18.1", "4.18.2", "4.18.3"}, 2, false)
	g := releasetest.NewGraph("amd64", "4.18.1", "4.18.2", "4.18.3")
	for _, v := range []string{"4.18.1", "4.18.2", "4.18.3"} {
		g.SetPayload(v, w.payloads[v].PullSpec())
	}
	must(t, w.graphs.Put("fast-4.18", g.GenerateEdges()))
	fast := func(min, max string) string {
		return "    - name: fast-4.18\n      minVersion: " + min + "\n      maxVersion: " + max + "\n"
	}
	archiveDir := filepath.Join(w.dir, "archive")
	if code, _, _ := w.run("mirror", "-c", w.releaseISC("isc", narrowChannel("4.18.1", "4.18.3")+fast("4.18.1", "4.18.3")), "file://"+archiveDir); code != 0 {
		t.Fatal("mirror-to-disk failed")
	}
	if code, _, _ := w.run("mirror", "-c", w.releaseISC("second", "    channels:\n"+fast("4.18.2", "4.18.3")), "--from", "file://"+archiveDir, "docker://"+w.dst.Host()+"/second"); code != 0 {
		t.Fatal("the subset narrowing the second channel failed")
	}
	for _, v := range []string{"4.18.2", "4.18.3"} {
		w.assertRelease("second", w.payloads[v], false)
	}
	if _, err := w.dst.ManifestDigest("second/openshift/release-images", w.payloads["4.18.1"].Tag); err == nil {
		t.Error("4.18.1 is outside the subset but was pushed")
	}
	if code, _, _ := w.run("mirror", "-c", w.releaseISC("both", narrowChannel("4.18.1", "4.18.3")+fast("4.18.3", "4.18.3")), "--from", "file://"+archiveDir, "docker://"+w.dst.Host()+"/both"); code != 0 {
		t.Fatal("the subset keeping the first channel whole failed")
	}
	for _, v := range []string{"4.18.1", "4.18.2", "4.18.3"} {
		w.assertRelease("both", w.payloads[v], false)
	}
}
