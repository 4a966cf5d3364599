package main

import (
	"path/filepath"
	"testing"

	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// TestFlakyUpstream: an upstream that answers 5xx, 429 and resets
// connections at a few percent, and cuts every blob download once
// half-way, is still mirrored completely and correctly.
func TestFlakyUpstream(t *testing.T) {
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
