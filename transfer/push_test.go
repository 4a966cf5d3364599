package transfer

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/failure"
	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
	"github.com/gapmirror/gapmirror/ocistore"
	"github.com/gapmirror/gapmirror/registryapi"
)

// TestRegistryClientRetry: what the registry client marks to be sent again
// (Retry: a large blob whose single POST the registry answered with an
// upload session after reading it) is retried by the copy, which reads the
// blob afresh; its other answers keep their classes.
func TestRegistryClientRetry(t *testing.T) {
	for _, c := range []struct {
		err  *registryapi.Error
		want bool
	}{
		{&registryapi.Error{Method: http.MethodPost, Status: http.StatusAccepted, Retry: true, Body: "the registry opened an upload session instead"}, true},
		{&registryapi.Error{Method: http.MethodPost, Status: http.StatusAccepted}, false},
		{&registryapi.Error{Method: http.MethodPut, Status: http.StatusBadRequest, Codes: []string{"DIGEST_INVALID"}}, false},
		{&registryapi.Error{Method: http.MethodPut, Status: http.StatusServiceUnavailable}, true},
	} {
		if got := failure.Transient(failure.Explain(c.err, "registry.example/ns/app:v1")); got != c.want {
			t.Errorf("Transient(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestLostBlobIsSentAgain: the records place a blob in a repository the
// registry has since lost it from (restored from a backup, cleaned). The
// push takes the records' word (no HEAD), the registry refuses the
// manifest (MANIFEST_BLOB_UNKNOWN), and the mirror asks about the blobs it
// trusted, sends the lost one again from the run's source and puts the
// manifest: the image arrives whole. Where the source cannot give the blob
// (an incremental archive that left it out), the image fails, its tag is
// not at the mirror, and the error says why.
func TestLostBlobIsSentAgain(t *testing.T) {
	ctx := context.Background()
	up := registrytest.Start(t, registrytest.Options{})
	dst := registrytest.Start(t, registrytest.Options{})
	base := imagebuilder.RandomLayer(41, 32<<10)
	var imgs []*imagebuilder.Image
	var sets []*imageset.Set
	for i := 0; i < 3; i++ {
		img, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{base, imagebuilder.RandomLayer(uint64(42+i), 8<<10)}})
		if err != nil {
			t.Fatal(err)
		}
		tag := fmt.Sprintf("v%d", i)
		if err := imagebuilder.Push(ctx, imagebuilder.Target{URL: up.URL()}, "ns/a", tag, img); err != nil {
			t.Fatal(err)
		}
		imgs = append(imgs, img)
		sets = append(sets, &imageset.Set{Images: []imageset.Image{{Source: up.Host() + "/ns/a@" + img.Digest.String(), Origin: up.Host() + "/ns/a:" + tag,
			Digest: img.Digest.String(), Destination: "ns/a:" + tag, Kind: imageset.KindAdditional}}})
	}
	baseDigest := imgs[0].Layers[0].Digest

	first, err := NewMirror(dst.Host()+"/m", testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	res := CopyPlanned(ctx, sets[0], NewUpstream(testOptions(t)), first, Options{})
	if res.Err() != nil || res.Locations[baseDigest] != "ns/a" {
		t.Fatalf("first push: %v, base recorded in %q", res.Err(), res.Locations[baseDigest])
	}
	records := res.Locations
	if err := dst.DeleteBlob("m/ns/a", baseDigest); err != nil {
		t.Fatal(err)
	}

	// The next run, its locations from the records.
	count := registrytest.NewRequestCounter()
	dst.SetWrap(count.Wrap)
	mir, err := NewMirror(dst.Host()+"/m", testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	mir.KnownLocations(records)
	src := NewUpstream(testOptions(t))
	mir.ResendFrom(src, nil)
	res = CopyPlanned(ctx, sets[1], src, mir, Options{})
	if res.Err() != nil || len(res.Copied) != 1 {
		t.Fatalf("push after the registry lost a recorded blob: %v", res.Err())
	}
	// The manifest refused, the trusted blob asked about and sent again
	// with the image's own two, the manifest put.
	checkCounts(t, "push after the registry lost a recorded blob", count,
		map[string]int{"GET ping": 1, "HEAD manifest": 1, "HEAD blob": 1, "POST blob": 3, "PUT blob": 3, "PUT manifest": 2})
	if d, err := dst.ManifestDigest("m/ns/a", "v1"); err != nil || d != imgs[1].Digest {
		t.Errorf("ns/a:v1 at the mirror: %s, %v", d, err)
	}
	for _, b := range imgs[1].Blobs() {
		if _, err := dst.Blob("m/ns/a", b.Digest); err != nil {
			t.Errorf("blob of ns/a:v1 at the mirror: %v", err)
		}
	}

	// Lost again, and the source is an archive without it.
	if err := dst.DeleteBlob("m/ns/a", baseDigest); err != nil {
		t.Fatal(err)
	}
	store, err := ocistore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if res := Copy(ctx, sets[2], NewUpstream(testOptions(t)), StoreDestination(store), Options{}); res.Err() != nil {
		t.Fatal(res.Err())
	}
	incremental := onlyManifests{store: store, has: map[digest.Digest]bool{imgs[2].Digest: true}}
	for _, b := range imgs[2].Blobs() {
		incremental.has[b.Digest] = b.Digest != baseDigest
	}
	mir2, err := NewMirror(dst.Host()+"/m", testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	mir2.KnownLocations(records)
	archived := &ArchiveSource{Archive: incremental, Name: "incremental"}
	mir2.ResendFrom(archived, nil)
	res = CopyPlanned(ctx, sets[2], archived, mir2, Options{Retries: -1})
	if len(res.Failed) != 1 || !strings.Contains(res.Err().Error(), "MANIFEST_BLOB_UNKNOWN") || !strings.Contains(res.Err().Error(), "not in the archive") {
		t.Fatalf("a lost blob the archive does not carry: %v; want the image failed, saying why", res.Err())
	}
	if _, err := dst.ManifestDigest("m/ns/a", "v2"); err == nil {
		t.Error("ns/a:v2 is at the mirror without its base layer")
	}
}
