package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// TestFlakyUpstream: an upstream that answers 5xx, 429 and resets
// connections at a few percent, and cuts every blob download once
// half-way, is still mirrored completely and correctly.
func TestFlakyUpstream(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(22, 128<<10)
	isc := w.isc("")
	faults, err := registrytest.NewFaultInjector(registrytest.FaultConfig{Rate: 0.05, Seed: 7, RetryAfterSeconds: 0})
	must(t, err)
	cuts := registrytest.NewBlobTruncator(40<<10, 1)
	w.up.SetWrap(registrytest.Chain(faults.Wrap, cuts.Wrap))

	code, _, _ := w.gapmirror("mirror", "-c", isc, "--workspace", "file://"+filepath.Join(w.dir, "ws"), "docker://"+w.dst.Host()+"/m")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	if faults.Injected() == 0 || cuts.Cuts() == 0 {
		t.Fatalf("no faults injected (%d) or no cuts (%d): the test tests nothing", faults.Injected(), cuts.Cuts())
	}
	t.Logf("survived %d injected faults (5xx %d, 429 %d, reset %d) and %d cut downloads", faults.Injected(),
		faults.InjectedOf(registrytest.FaultServerError), faults.InjectedOf(registrytest.FaultTooManyRequests),
		faults.InjectedOf(registrytest.FaultReset), cuts.Cuts())
	w.assertMirrored(w.dst, "m")

	// The same through the store and an archive.
	out := filepath.Join(w.dir, "a")
	if code, _, _ := w.gapmirror("mirror", "-c", isc, "file://"+out); code != 0 {
		t.Fatalf("m2d exit %d", code)
	}
	if code, _, _ := w.gapmirror("mirror", "--from", "file://"+out, "docker://"+w.dst.Host()+"/d"); code != 0 {
		t.Fatalf("d2m exit %d", code)
	}
	w.assertMirrored(w.dst, "d")
}

// TestRetryFailed: a run with an image failing for good lists it in a
// failure file; --retry-failed copies exactly that image.
func TestRetryFailed(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(5, 32<<10)
	data, _, err := w.up.Manifest(w.images[1].Repo, w.images[1].Digest.String())
	must(t, err)
	all := layersOf(t, data)
	w.up.SetWrap(registrytest.NewBlobCorrupter(0, all[len(all)-1]).Wrap)
	ws := filepath.Join(w.dir, "ws")
	code, stdout, _ := w.gapmirror("mirror", "-c", w.isc(""), "--retry-times", "1", "--workspace", "file://"+ws, "docker://"+w.dst.Host()+"/m")
	if code != 8 {
		t.Fatalf("exit %d, want 8", code)
	}
	i := strings.Index(stdout, "--retry-failed ")
	if i < 0 {
		t.Fatalf("no retry hint:\n%s", stdout)
	}
	file := strings.TrimSpace(strings.SplitN(stdout[i+len("--retry-failed "):], "\n", 2)[0])

	w.up.SetWrap(nil)
	code, stdout, _ = w.gapmirror("mirror", "--retry-failed", file, "--workspace", "file://"+ws, "docker://"+w.dst.Host()+"/m")
	if code != 0 || !strings.Contains(stdout, "1 copied, 4 already at the destination, 0 built by gapmirror, 0 failed") {
		t.Fatalf("retry: exit %d\n%s", code, stdout)
	}
	w.assertMirrored(w.dst, "m")
	idms, err := os.ReadFile(filepath.Join(ws, "working-dir", "cluster-resources", "itms-gapmirror.yaml"))
	must(t, err)
	if !strings.Contains(string(idms), w.up.Host()+"/apps") {
		t.Errorf("cluster resources after the retry do not cover the set:\n%s", idms)
	}
}
