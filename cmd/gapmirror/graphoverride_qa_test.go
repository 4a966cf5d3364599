package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/imageset/release"
	"github.com/gapmirror/gapmirror/ocistore"
	"github.com/gapmirror/gapmirror/transfer"
)

// TestGraphOverrideQAMirrorToMirror: mirror-to-mirror with graph: true,
// UPDATE_URL_OVERRIDE set and no --graph-data-url reuses the graph image an
// earlier mirror-to-mirror built and pushes it whole. (t.Setenv: not parallel.)
func TestGraphOverrideQAMirrorToMirror(t *testing.T) {
	w := newReleaseWorld(t, []string{"4.18.1"}, 2, false)
	isc := w.releaseISC("isc", "    graph: true\n"+narrowChannel("4.18.1", "4.18.1"))
	ws := "file://" + filepath.Join(w.dir, "ws")
	if code, _, _ := w.run("mirror", "-c", isc, "--workspace", ws, "docker://"+w.dst.Host()+"/first"); code != 0 {
		t.Fatal("first mirror-to-mirror failed")
	}
	built, err := w.dst.ManifestDigest("first/openshift/graph-image", "latest")
	must(t, err)
	t.Setenv("UPDATE_URL_OVERRIDE", w.services.GraphURL())
	code, out, errOut := w.gapmirror("mirror", "-c", isc, "--workspace", ws, "docker://"+w.dst.Host()+"/second",
		"--release-signature-url", w.services.SignatureURL(), "--release-signature-key", w.keyFile, "--graph-base-image", w.up.Host()+"/ubi9/ubi:latest")
	if code != 0 {
		t.Fatalf("mirror-to-mirror with UPDATE_URL_OVERRIDE: exit %d", code)
	}
	if !strings.Contains(out+errOut, "reusing the graph image an earlier run built") {
		t.Error("the run did not say it reused the graph image")
	}
	w.assertGraphImage("second/openshift/graph-image", built)
	w.assertRelease("second", w.payloads["4.18.1"], false)
}

// TestGraphOverrideQACarried: mirror-to-disk's archive carried away (its
// chunks moved off the machine, the usual workflow) still leaves a graph
// image the next run with UPDATE_URL_OVERRIDE can reuse: otherwise that run
// would download graph data from api.openshift.com, which the override
// says is out of reach. Checked on the store, so the test never tries the
// internet.
func TestGraphOverrideQACarried(t *testing.T) {
	t.Parallel()
	w := newReleaseWorld(t, []string{"4.18.1"}, 2, false)
	isc := w.releaseISC("isc", "    graph: true\n"+narrowChannel("4.18.1", "4.18.1"))
	out := filepath.Join(w.dir, "out")
	if code, _, _ := w.run("mirror", "-c", isc, "file://"+out); code != 0 {
		t.Fatal("mirror-to-disk failed")
	}
	gd := graphImageIn(t, out)
	carried := filepath.Join(w.dir, "carried")
	must(t, os.MkdirAll(carried, 0o755))
	chunks, _ := filepath.Glob(filepath.Join(out, "mirror_*.tar"))
	for _, c := range chunks {
		must(t, os.Rename(c, filepath.Join(carried, filepath.Base(c))))
	}
	store, err := ocistore.Open(filepath.Join(w.dir, "cache", ".gapmirror", "store"))
	must(t, err)
	desc, ok := store.Resolve(release.GraphImageDestination)
	if !ok || desc.Digest != gd {
		t.Fatalf("the store names graph image %v (%v), want %s", desc.Digest, ok, gd)
	}
	img := imageset.Image{Digest: string(gd), Kind: imageset.KindReleaseGraph}
	if _, err := transfer.StoreBlobs(store, img); err != nil {
		t.Errorf("once the archive is carried away the store no longer holds the graph image, so UPDATE_URL_OVERRIDE runs cannot reuse it: %v", err)
	}
}
