package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gapmirror/gapmirror/internal/registrytest"

	"github.com/gapmirror/gapmirror/internal/imagebuilder"
)

// manifestReads counts the GETs of manifests by digest an upstream serves,
// by digest (whatever the repository).
type manifestReads struct {
	mu sync.Mutex
	n  map[string]int
}

func (m *manifestReads) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ref, ok := strings.Cut(r.URL.Path, "/manifests/"); ok && r.Method == http.MethodGet && strings.HasPrefix(ref, "sha256:") {
			m.mu.Lock()
			m.n[ref]++
			m.mu.Unlock()
		}
		next.ServeHTTP(w, r)
	})
}

// readTwice lists the manifests read more than once, and how often.
func (m *manifestReads) readTwice() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for d, n := range m.n {
		if n > 1 {
			out = append(out, fmt.Sprintf("%s ×%d", d, n))
		}
	}
	return out
}

// TestEachManifestReadOnce: a first mirror-to-mirror, and a first
// mirror-to-disk, read every manifest upstream once, though the signature
// lookup needs the top manifest of each image to find its platform
// manifests, the copy's planning pass reads them all, the catalog and the
// graph image's base are copied while the set is resolved, and one manifest
// stands for several images: a multi-arch index under two names, release
// components of two payloads. What is mirrored is still every image by
// digest.
func TestEachManifestReadOnce(t *testing.T) {
	t.Parallel()
	w := newReleaseWorld(t, []string{"4.18.1", "4.18.2"}, 3, false)
	w.pushFleet(8, 16<<10)
	idx := w.images[3] // multi-arch
	ctx := context.Background()
	// The same index under a second name, as one image is often listed
	// twice (a catalog's related image and an additional image).
	copyRepo := "copies/app-03"
	idxSpec, err := imagebuilder.BuildIndex(imagebuilder.IndexSpec{Images: []imagebuilder.ImageSpec{
		{Platform: imagebuilder.Platform{OS: "linux", Architecture: "amd64"}, Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(5, 4<<10)}},
		{Platform: imagebuilder.Platform{OS: "linux", Architecture: "arm64"}, Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(6, 4<<10)}},
	}})
	must(t, err)
	must(t, imagebuilder.PushIndex(ctx, w.upTarget(), idx.Repo, "twin", idxSpec))
	must(t, imagebuilder.PushIndex(ctx, w.upTarget(), copyRepo, "twin", idxSpec))
	w.images = append(w.images,
		example{Ref: w.up.Host() + "/" + idx.Repo + ":twin", Repo: idx.Repo, Tag: "twin", Digest: idxSpec.Digest},
		example{Ref: w.up.Host() + "/" + copyRepo + ":twin", Repo: copyRepo, Tag: "twin", Digest: idxSpec.Digest})
	// Two payloads whose components are the same images, as z-stream
	// releases share most of theirs; the graph image and a catalog, each
	// copied into the store while the set is resolved.
	oc := w.pushCatalog("redhat/redhat-operator-index", "v4.18", catalogOptions{Spec: monthSpec})
	isc := w.isc("  platform:\n    graph: true\n    channels:\n    - name: stable-4.18\n      minVersion: 4.18.1\n      maxVersion: 4.18.2\n" +
		"  operators:\n  - catalog: " + oc.Ref + "\n    packages:\n    - name: operator-000\n")

	for _, trip := range []struct {
		name string
		args []string
	}{
		{"mirror-to-mirror", []string{"--workspace", "file://" + filepath.Join(w.dir, "ws"), "docker://" + w.dst.Host() + "/m"}},
		{"mirror-to-disk", []string{"--cache-dir", filepath.Join(w.dir, "cache-m2d"), "file://" + filepath.Join(w.dir, "archive")}},
	} {
		reads := &manifestReads{n: map[string]int{}}
		w.up.SetWrap(reads.wrap)
		code, _, _ := w.run(append([]string{"mirror", "-c", isc}, trip.args...)...)
		w.up.SetWrap(nil)
		if code != 0 {
			t.Fatalf("%s: exit %d", trip.name, code)
		}
		if len(reads.n) == 0 {
			t.Fatalf("%s: no manifest read by digest counted", trip.name)
		}
		if twice := reads.readTwice(); len(twice) > 0 {
			t.Errorf("%s: manifests read more than once upstream: %v", trip.name, twice)
		}
	}
	for _, ex := range w.images {
		path := "m/" + ex.Repo
		tag := ex.Tag
		if d, err := w.dst.ManifestDigest(path, tag); err != nil || d != ex.Digest {
			t.Errorf("%s:%s at the mirror: %s, %v (want %s)", path, tag, d, err, ex.Digest)
		}
	}
	for _, v := range []string{"4.18.1", "4.18.2"} {
		w.assertRelease("m", w.payloads[v], false)
	}
	w.applyArchive(filepath.Join(w.dir, "archive"))
}

// manifestAsks counts the manifest requests an upstream serves, as
// "METHOD tag", "METHOD digest" or "METHOD signature tag" (cosign's).
type manifestAsks struct {
	mu sync.Mutex
	n  map[string]int
}

func (m *manifestAsks) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ref, ok := strings.Cut(r.URL.Path, "/manifests/"); ok {
			by := "tag"
			switch {
			case strings.HasPrefix(ref, "sha256:"):
				by = "digest"
			case strings.HasSuffix(ref, ".sig"):
				by = "signature tag"
			case strings.HasPrefix(ref, "sha256-"):
				by = "referrers tag" // the referrers tag schema: distribution has no referrers API
			}
			m.mu.Lock()
			m.n[r.Method+" "+by]++
			m.mu.Unlock()
		}
		next.ServeHTTP(w, r)
	})
}

func (m *manifestAsks) get(k string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n[k]
}

// TestRerunResolvesTagsWithHead: a rerun of the workspace asks each tag
// with a HEAD and reads no manifest for tags that still name what earlier
// runs mirrored (on Docker Hub a HEAD does not count against the pull
// limit); a tag that moved is read once by digest and mirrored, by
// mirror-to-mirror and by mirror-to-disk alike.
func TestRerunResolvesTagsWithHead(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(6, 16<<10)
	isc := w.isc("")
	trips := []struct {
		name string
		args []string
	}{
		{"mirror-to-mirror", []string{"--workspace", "file://" + filepath.Join(w.dir, "ws"), "docker://" + w.dst.Host() + "/m"}},
		{"mirror-to-disk", []string{"file://" + filepath.Join(w.dir, "archive")}},
	}
	tags := 0
	for _, ex := range w.images {
		if !strings.Contains(ex.Ref, "@") {
			tags++
		}
	}
	for _, trip := range trips {
		if code, _, _ := w.gapmirror(append([]string{"mirror", "-c", isc}, trip.args...)...); code != 0 {
			t.Fatalf("first %s failed", trip.name)
		}
		asks := &manifestAsks{n: map[string]int{}}
		w.up.SetWrap(asks.wrap)
		code, _, _ := w.gapmirror(append([]string{"mirror", "-c", isc}, trip.args...)...)
		w.up.SetWrap(nil)
		if code != 0 {
			t.Fatalf("%s rerun failed", trip.name)
		}
		if asks.get("GET tag") != 0 || asks.get("GET digest") != 0 || asks.get("HEAD tag") != tags {
			t.Errorf("%s rerun, nothing changed: manifest requests upstream %v, want a HEAD for each of the %d tags and no GET", trip.name, asks.n, tags)
		}
	}

	// One tag moves.
	moved := w.images[0]
	img, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(4242, 8<<10)}})
	must(t, err)
	must(t, imagebuilder.Push(context.Background(), w.upTarget(), moved.Repo, moved.Tag, img))
	w.images[0].Digest = img.Digest
	for _, trip := range trips {
		asks := &manifestAsks{n: map[string]int{}}
		w.up.SetWrap(asks.wrap)
		code, _, _ := w.gapmirror(append([]string{"mirror", "-c", isc}, trip.args...)...)
		w.up.SetWrap(nil)
		if code != 0 {
			t.Fatalf("%s after a tag moved failed", trip.name)
		}
		if asks.get("GET tag") != 0 || asks.get("GET digest") != 1 || asks.get("HEAD tag") != tags {
			t.Errorf("%s after a tag moved: manifest requests upstream %v, want a HEAD per tag and one GET of the new manifest", trip.name, asks.n)
		}
	}
	w.assertMirrored(w.dst, "m")
	w.applyArchive(filepath.Join(w.dir, "archive"))
}

// signalHold holds requests until fire is called, 10 s at most each, and
// counts those it held and those whose wait ran out: what they waited for
// did not come.
type signalHold struct {
	once       sync.Once
	fired      chan struct{}
	mu         sync.Mutex
	held, late int
}

func newSignalHold() *signalHold { return &signalHold{fired: make(chan struct{})} }

// fire lets every held request go on, and the next ones through at once.
func (h *signalHold) fire() { h.once.Do(func() { close(h.fired) }) }

// hold waits for fire, 10 s at most.
func (h *signalHold) hold() {
	late := false
	select {
	case <-h.fired:
	case <-time.After(10 * time.Second):
		late = true
	}
	h.mu.Lock()
	if h.held++; late {
		h.late++
	}
	h.mu.Unlock()
}

// counts are the requests held so far and how many of them waited 10 s.
func (h *signalHold) counts() (held, late int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held, h.late
}

// gate holds the requests of a registry that match until want of them wait
// at once (or 2 s have passed), and tells how many waited at most.
type gate struct {
	mu             sync.Mutex
	inFlight, peak int
	enough         chan struct{}
	once           sync.Once
}

func holdUntilMany(reg *registrytest.Registry, want int, match func(*http.Request) bool) *gate {
	g := &gate{enough: make(chan struct{})}
	reg.SetWrap(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if !match(r) {
				next.ServeHTTP(rw, r)
				return
			}
			g.mu.Lock()
			g.inFlight++
			if g.peak = max(g.peak, g.inFlight); g.peak >= want {
				g.once.Do(func() { close(g.enough) })
			}
			g.mu.Unlock()
			select {
			case <-g.enough:
			case <-time.After(2 * time.Second):
			}
			next.ServeHTTP(rw, r)
			g.mu.Lock()
			g.inFlight--
			g.mu.Unlock()
		})
	})
	return g
}

// most is the most requests that waited at once.
func (g *gate) most() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.peak
}

// TestTagsPinnedManyAtOnce: resolution pins the configuration's tags as
// many at a time as the copy moves small blobs (32 by default), not
// --parallel-images (8): over a WAN each pin waits a round trip, and 100
// tags at 8 at a time took 0.6 s at 40 ms. The upstream holds every tag
// read until 24 are waiting at once (or 2 s have passed).
func TestTagsPinnedManyAtOnce(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(40, 4<<10)
	n := mostAtOnce(t, w, 24, func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/manifests/v1") })
	if n < 24 || n > 32 {
		t.Errorf("at most %d tags were read at once, want 24 to 32", n)
	}
}

// mostAtOnce runs a mirror-to-disk of w's configuration with the upstream
// requests that match held until want of them wait at once (see
// holdUntilMany), and returns how many waited at most.
func mostAtOnce(t *testing.T, w *world, want int, match func(*http.Request) bool) int {
	t.Helper()
	g := holdUntilMany(w.up, want, match)
	code, out, _ := w.gapmirror("mirror", "-c", w.isc(""), "file://"+filepath.Join(w.dir, "archive"))
	if code != 0 {
		t.Fatalf("mirror-to-disk: exit %d:\n%s", code, out)
	}
	return g.most()
}

// TestTopManifestsReadManyAtOnce: the top manifests of images named by
// digest, which the lookup of what is attached to them reads before the
// copy, are read as many at a time as its two lookups run together beside
// the copy (64 by default), not 32: at 32, the mixed workload's 525 took
// 0.8 s under a 40 ms WAN. The upstream holds every such read until 48
// are waiting at once (or 2 s have passed).
func TestTopManifestsReadManyAtOnce(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(72, 4<<10)
	for i := range w.images {
		w.images[i].Ref = w.up.Host() + "/" + w.images[i].Repo + "@" + w.images[i].Digest.String()
	}
	n := mostAtOnce(t, w, 48, func(r *http.Request) bool {
		return r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/manifests/sha256:")
	})
	if n < 48 || n > 64 {
		t.Errorf("at most %d manifests were read by digest at once, want 48 to 64", n)
	}
}

// TestCatalogFetchedBesideThePins: an operator catalog's image is pinned
// and copied into the store while the additional images' tags are pinned,
// not after (over a WAN both wait round trips), and the catalog is read
// once for it. The upstream holds every additional image's tag read until
// a blob of the catalog has been asked for (or 10 s have passed).
func TestCatalogFetchedBesideThePins(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(6, 4<<10)
	oc := w.pushCatalog("redhat/redhat-operator-index", "v4.18", catalogOptions{Spec: monthSpec})
	isc := w.isc("  operators:\n  - catalog: " + oc.Ref + "\n    packages:\n    - name: operator-000\n")
	pins := newSignalHold()
	var catalogTags atomic.Int32
	w.up.SetWrap(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			catalog := strings.HasPrefix(r.URL.Path, "/v2/redhat/redhat-operator-index/")
			switch {
			case catalog && strings.Contains(r.URL.Path, "/blobs/sha256:"):
				pins.fire()
			case catalog && strings.HasSuffix(r.URL.Path, "/manifests/v4.18"):
				catalogTags.Add(1)
			case strings.HasSuffix(r.URL.Path, "/manifests/v1"):
				pins.hold()
			}
			next.ServeHTTP(rw, r)
		})
	})
	code, out, _ := w.gapmirror("mirror", "-c", isc, "file://"+filepath.Join(w.dir, "archive"))
	if code != 0 {
		t.Fatalf("mirror-to-disk: exit %d:\n%s", code, out)
	}
	if held, heldTooLong := pins.counts(); held == 0 || heldTooLong > 0 {
		t.Errorf("%d tag reads, %d of them answered only after 10 s without the catalog read: the catalog waited for the pins", held, heldTooLong)
	}
	if n := catalogTags.Load(); n != 1 {
		t.Errorf("the catalog's tag was read %d times, want once", n)
	}
}
