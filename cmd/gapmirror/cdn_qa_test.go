package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// TestBlobsFromCDNQAToken: a CDN-backed upstream with the bearer token flow
// (a pull-only account) mirrors to disk and to a mirror, blobs from the CDN.
func TestBlobsFromCDNQAToken(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{Dir: t.TempDir(), BlobCDN: true, Username: "pusher", Password: upPush,
		Token: &registrytest.TokenAuth{Users: []registrytest.TokenUser{{Username: "puller", Password: upPull, Actions: []string{"pull"}}}}})
	w.upUser, w.upPassword = "pusher", upPush
	w.pushFleetTo(w.upTarget(), 5, 16<<10)
	w.setAuth(login{w.up.Host(), "puller", upPull, ""})
	w.assertMirrorsFromCDN("a token-auth CDN-backed upstream")
}

// TestBlobsFromCDNQAMissing: a blob the registry redirects for but the CDN
// answers 404 fails its image clearly (exit non-zero, naming the blob), in
// bounded time, to disk and to a mirror; the other images arrive.
func TestBlobsFromCDNQAMissing(t *testing.T) {
	t.Parallel()
	storage := t.TempDir()
	w := newWorld(t, registrytest.Options{Dir: storage, BlobCDN: true, Username: "alice", Password: "s3cret"})
	w.pushFleetAuth(5, "alice", "s3cret")
	must(t, os.WriteFile(w.authFile, []byte(`{"auths":{"`+w.up.Host()+`":{"auth":"YWxpY2U6czNjcmV0"}}}`), 0o600))
	first, second := map[digest.Digest]int64{}, map[digest.Digest]int64{}
	w.blobsIn(w.up, w.images[0].Repo, w.images[0].Digest, first)
	w.blobsIn(w.up, w.images[1].Repo, w.images[1].Digest, second)
	var lost digest.Digest
	for d, size := range first {
		if _, shared := second[d]; !shared && size > 1024 {
			lost = d
		}
	}
	if lost == "" {
		t.Fatal("no layer of image 0 of its own")
	}
	// The registry still answers the blob (its descriptor is cached) and
	// redirects; the CDN has no file.
	must(t, os.Remove(filepath.Join(storage, "docker/registry/v2/blobs/sha256", lost.Encoded()[:2], lost.Encoded(), "data")))
	isc := w.isc("")
	for name, dest := range map[string][]string{
		"disk":   {"file://" + filepath.Join(w.dir, "archive")},
		"mirror": {"--workspace", "file://" + filepath.Join(w.dir, "ws"), "docker://" + w.dst.Host() + "/m2m"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		start := time.Now()
		code, out, errOut := w.gapmirrorCtx(ctx, append([]string{"mirror", "-c", isc, "--retry-times", "1"}, dest...)...)
		timedOut := ctx.Err() != nil
		cancel()
		if timedOut {
			t.Errorf("%s: still running after %s", name, time.Since(start))
		}
		if code == 0 {
			t.Errorf("%s: exit 0 although blob %s is missing at the CDN", name, lost)
		}
		if !strings.Contains(out+errOut, lost.String()) && !strings.Contains(out+errOut, lost.Encoded()[:12]) {
			t.Errorf("%s: the failure does not name blob %s", name, lost)
		}
		if !strings.Contains(out+errOut, "the storage the registry redirected to answered 404 page not found") {
			t.Errorf("%s: the failure does not say that the storage, not the registry, answered 404:\n%s%s", name, out, errOut)
		}
	}
	for _, i := range []int{1, 2, 3, 4} {
		if d, err := w.dst.ManifestDigest("m2m/"+w.images[i].Repo, w.images[i].Tag); err != nil || d != w.images[i].Digest {
			t.Errorf("image %d not mirrored: %s %v", i, d, err)
		}
	}
	if _, err := w.dst.ManifestDigest("m2m/"+w.images[0].Repo, w.images[0].Tag); err == nil {
		t.Error("image 0, whose blob the CDN lacks, reached the mirror")
	}
}
