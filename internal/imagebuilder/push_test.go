package imagebuilder

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// counting counts requests by method and path kind.
type counting struct {
	uploads atomic.Int64 // blob upload PUTs
	mounts  atomic.Int64 // POSTs asking for a cross-repository mount
}

func (c *counting) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/blobs/uploads/") {
			c.uploads.Add(1)
		}
		if r.Method == http.MethodPost && r.URL.Query().Get("mount") != "" {
			c.mounts.Add(1)
		}
		next.ServeHTTP(w, r)
	})
}

func TestPushAndReadBack(t *testing.T) {
	ctx := context.Background()
	var count counting
	reg := registrytest.Start(t, registrytest.Options{Wrap: count.wrap})
	dst := Target{URL: reg.URL(), Client: reg.Client()}

	img, err := Build(ImageSpec{Layers: []LayerSpec{RandomLayer(1, 8<<10), RandomLayer(2, 1<<10)}})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if err := Push(ctx, dst, "example/single", "v1", img); err != nil {
		t.Fatalf("Push: %v", err)
	}
	if got, err := reg.ManifestDigest("example/single", "v1"); err != nil || got != img.Digest {
		t.Fatalf("registry has %s (%v), want %s", got, err, img.Digest)
	}
	for _, b := range img.Blobs() {
		data, err := reg.Blob("example/single", b.Digest)
		if err != nil || int64(len(data)) != b.Size {
			t.Errorf("blob %s: %d bytes (%v), want %d", b.Digest, len(data), err, b.Size)
		}
	}
	uploads := count.uploads.Load()
	if uploads != 3 {
		t.Errorf("%d blob uploads, want 3", uploads)
	}
	// A second push finds every blob and uploads nothing.
	if err := Push(ctx, dst, "example/single", "", img); err != nil {
		t.Fatalf("Push by digest: %v", err)
	}
	if count.uploads.Load() != uploads {
		t.Errorf("re-push uploaded %d blobs again", count.uploads.Load()-uploads)
	}

	for _, format := range []Format{FormatOCI, FormatDocker} {
		idx, err := BuildIndex(IndexSpec{Format: format, Images: []ImageSpec{
			{Layers: []LayerSpec{RandomLayer(1, 8<<10)}},
			{Platform: Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}, Layers: []LayerSpec{RandomLayer(3, 8<<10)}},
		}})
		if err != nil {
			t.Fatalf("BuildIndex: %v", err)
		}
		repo := "example/multi-" + format.String()
		if err := PushIndex(ctx, dst, repo, "v2", idx); err != nil {
			t.Fatalf("PushIndex %s: %v", format, err)
		}
		manifest, mediaType, err := reg.Manifest(repo, "v2")
		if err != nil || string(manifest) != string(idx.Manifest) || mediaType != idx.MediaType {
			t.Errorf("%s: registry serves %s %q (%v), want the index as built", repo, mediaType, manifest, err)
		}
		for _, child := range idx.Images {
			if got, err := reg.ManifestDigest(repo, child.Digest.String()); err != nil || got != child.Digest {
				t.Errorf("%s: child %s: %s (%v)", repo, child.Platform, got, err)
			}
		}
	}

	repos, err := reg.Catalog()
	if err != nil || strings.Join(repos, " ") != "example/multi-docker example/multi-oci example/single" {
		t.Errorf("catalog %v (%v)", repos, err)
	}
}

func TestPushFleetMountsSharedBlobs(t *testing.T) {
	var count counting
	reg := registrytest.Start(t, registrytest.Options{Wrap: count.wrap, Username: "u", Password: "p"})
	images, err := Fleet{Count: 4, BaseLayerSize: 32 << 10, MultiArchEvery: 4, Platforms: OpenShiftPlatforms[:2]}.Build()
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	dst := Target{URL: reg.Host(), Username: "u", Password: "p"}
	if err := PushFleet(context.Background(), dst, images); err != nil {
		t.Fatalf("PushFleet: %v", err)
	}
	for _, fi := range images {
		if got, err := reg.ManifestDigest(fi.Repo, fi.Tag); err != nil || got != fi.Digest() {
			t.Errorf("%s: %s (%v), want %s", fi.Repo, got, err, fi.Digest())
		}
	}
	// The amd64 base layer is uploaded once and mounted into the 3 other repositories.
	if count.mounts.Load() != 3 {
		t.Errorf("%d mount requests, want 3", count.mounts.Load())
	}
	// Without credentials the push fails and says what to set.
	err = Push(context.Background(), Target{URL: reg.Host()}, "x/y", "v1", images[0].Image)
	if err == nil || !strings.Contains(err.Error(), "Target.Username") {
		t.Errorf("push without credentials: %v", err)
	}
}

func TestTargetURL(t *testing.T) {
	for _, bad := range []string{"", "ftp://x:1", "http://", "::"} {
		if err := Push(context.Background(), Target{URL: bad}, "r", "t", &Image{}); err == nil || !strings.Contains(err.Error(), "Target.URL") {
			t.Errorf("URL %q: error %v", bad, err)
		}
	}
}
