package mirror

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// requestCounter counts the requests a registry serves, by "METHOD kind"
// where kind is ping, manifest, blob or other.
type requestCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *requestCounter) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kind := "other"
		switch {
		case r.URL.Path == "/v2/" || r.URL.Path == "/v2":
			kind = "ping"
		case containsSegment(r.URL.Path, "manifests"):
			kind = "manifest"
		case containsSegment(r.URL.Path, "blobs"):
			kind = "blob"
		}
		c.mu.Lock()
		c.n[r.Method+" "+kind]++
		c.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

func containsSegment(path, seg string) bool {
	return strings.Contains(path+"/", "/"+seg+"/")
}

func (c *requestCounter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.n {
		n += v
	}
	return n
}

// TestNoChangeChecksShareOneClient: on a no-change rerun, the mirror's
// existence checks, the upstream signature lookups and tag resolutions cost
// one request per image each, not a ping (GET /v2/) and a HEAD per image as a
// containers/image client per lookup did; and they still tell present
// from absent (a changed tag is copied, a missing signature is none).
func TestNoChangeChecksShareOneClient(t *testing.T) {
	ctx := context.Background()
	up := registrytest.Start(t, registrytest.Options{})
	dst := registrytest.Start(t, registrytest.Options{})
	set := &imageset.Set{}
	const n = 12
	for i := 0; i < n; i++ {
		img, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(uint64(100+i), 4<<10)}})
		if err != nil {
			t.Fatal(err)
		}
		repo := fmt.Sprintf("ns/app-%d", i)
		if err := imagebuilder.Push(ctx, imagebuilder.Target{URL: up.URL()}, repo, "v1", img); err != nil {
			t.Fatal(err)
		}
		set.Images = append(set.Images, imageset.Image{Source: up.Host() + "/" + repo + "@" + img.Digest.String(), Origin: up.Host() + "/" + repo + ":v1",
			Digest: img.Digest.String(), Destination: repo + ":v1", Kind: imageset.KindAdditional})
	}
	src := NewUpstream(testOptions(t))
	mir, err := NewMirror(dst.Host()+"/m", testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	if res := Copy(ctx, set, src, mir, Options{ParallelImages: 4}); res.Err() != nil {
		t.Fatal(res.Err())
	}

	// The rerun, with fresh clients as a new process has.
	src = NewUpstream(testOptions(t))
	mir, err = NewMirror(dst.Host()+"/m", testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	onDst := &requestCounter{n: map[string]int{}}
	dst.SetWrap(onDst.wrap)
	res := Copy(ctx, set, src, mir, Options{ParallelImages: 4})
	if res.Err() != nil {
		t.Fatal(res.Err())
	}
	if len(res.Skipped) != n {
		t.Errorf("rerun skipped %d images, want %d", len(res.Skipped), n)
	}
	if got := onDst.n["HEAD manifest"]; got != n {
		t.Errorf("rerun: %d manifest HEADs on the mirror, want %d (%v)", got, n, onDst.n)
	}
	if got := onDst.total(); got != n {
		t.Errorf("rerun: %d requests on the mirror, want %d, one per image (%v)", got, n, onDst.n)
	}

	onUp := &requestCounter{n: map[string]int{}}
	up.SetWrap(onUp.wrap)
	for _, img := range set.Images {
		named, err := reference.ParseNormalizedNamed(img.Source)
		if err != nil {
			t.Fatal(err)
		}
		sig, err := src.signature(ctx, signatureLookup{repo: named.Name(), manifest: digest.Digest(img.Digest)})
		if err != nil || sig != "" {
			t.Fatalf("signature of %s: %q, %v; want none", img.Source, sig, err)
		}
	}
	if got := onUp.total(); got != n {
		t.Errorf("%d signature lookups cost %d requests upstream, want %d (%v)", n, got, n, onUp.n)
	}

	// Resolving a tag upstream: one GET, and the digest it names.
	onUp.n = map[string]int{}
	for _, img := range set.Images {
		named, err := reference.ParseNormalizedNamed(img.Origin)
		if err != nil {
			t.Fatal(err)
		}
		if d, err := src.ResolveDigest(ctx, named); err != nil || d.String() != img.Digest {
			t.Fatalf("ResolveDigest(%s) = %s, %v; want %s", named, d, err, img.Digest)
		}
	}
	if got := onUp.total(); got != n {
		t.Errorf("resolving %d tags cost %d requests upstream, want %d (%v)", n, got, n, onUp.n)
	}

	// A tag that now names something else is not taken for present.
	moved := set.Images[0]
	moved.Digest = set.Images[1].Digest
	if has, err := mir.HasManifest(ctx, moved, digest.Digest(moved.Digest)); err != nil || has {
		t.Errorf("HasManifest of a moved tag: %v, %v; want false", has, err)
	}
	missing := set.Images[0]
	missing.Destination = "ns/never-copied:v1"
	if has, err := mir.HasManifest(ctx, missing, digest.Digest(missing.Digest)); err != nil || has {
		t.Errorf("HasManifest of a repository never copied: %v, %v; want false", has, err)
	}
}
