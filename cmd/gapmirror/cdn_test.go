package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// TestBlobsFromCDN: an upstream that wants credentials and answers blob
// GETs with a redirect to a CDN (as quay.io and registry.redhat.io do)
// mirrors to disk and to a mirror, every blob read from the CDN, which
// refuses requests carrying the registry's credentials: none are sent
// there.
func TestBlobsFromCDN(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{Dir: t.TempDir(), BlobCDN: true, Username: "alice", Password: "s3cret"})
	w.pushFleetAuth(5, "alice", "s3cret")
	auth := `{"auths":{"` + w.up.Host() + `":{"auth":"YWxpY2U6czNjcmV0"}}}` // alice:s3cret
	must(t, os.WriteFile(w.authFile, []byte(auth), 0o600))
	w.assertMirrorsFromCDN("a CDN-backed upstream")
}

// assertMirrorsFromCDN mirrors the fleet from a CDN-backed upstream (named
// in failures as upstream) to disk, then to a mirror, checking that each
// read blobs from the CDN and that the mirror has the fleet.
func (w *world) assertMirrorsFromCDN(upstream string) {
	t := w.t
	t.Helper()
	isc := w.isc("")
	out := filepath.Join(w.dir, "archive")
	if code, _, _ := w.gapmirror("mirror", "-c", isc, "file://"+out); code != 0 {
		t.Fatalf("mirror-to-disk from %s failed", upstream)
	}
	fromCDN := w.up.CDNRequests()
	if fromCDN == 0 {
		t.Fatal("no blob was read from the CDN: the upstream did not redirect")
	}
	w.applyArchive(out)
	if code, _, _ := w.gapmirror("mirror", "-c", isc, "--workspace", "file://"+filepath.Join(w.dir, "ws"), "docker://"+w.dst.Host()+"/m2m"); code != 0 {
		t.Fatalf("mirror-to-mirror from %s failed", upstream)
	}
	if w.up.CDNRequests() == fromCDN {
		t.Error("mirror-to-mirror read no blob from the CDN")
	}
	w.assertMirrored(w.dst, "m2m")
}
