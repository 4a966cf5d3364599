package transfer

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
	"github.com/gapmirror/gapmirror/ocistore"
)

// TestBlobLaneOrder: a free slot goes to the largest large blob waiting
// (half a MiB is large), but never to more large blobs at once than
// maxLarge while small blobs wait: the other slots stay for them, first
// come first served. When none waits, large blobs take every slot. A goroutine blocked in
// acquire goes before the transfers scheduled up front, and one whose
// context ends leaves the queue.
func TestBlobLaneOrder(t *testing.T) {
	const MiB = 1 << 20
	l := newBlobLane(4, 3)
	if l.maxLarge != 3 {
		t.Fatalf("a lane of 4 slots lets %d large blobs run at once, want 3", l.maxLarge)
	}
	started := make(chan string, 16)
	sizes := map[string]int64{}
	add := func(name string, size int64) {
		sizes[name] = size
		l.add(size, func() { started <- name })
	}
	next := func() string {
		t.Helper()
		select {
		case name := <-started:
			return name
		case <-time.After(10 * time.Second):
			t.Fatal("no transfer started")
			return ""
		}
	}
	quiet := func() {
		t.Helper()
		select {
		case name := <-started:
			t.Fatalf("%s started though no slot was free for it", name)
		case <-time.After(50 * time.Millisecond):
		}
	}
	done := func(name string) { l.release(sizes[name]) }

	add("s1", 10)
	add("L2", MiB/2)
	add("L5", 5*MiB)
	add("s2", 1000)
	add("L3", 3*MiB)
	add("L4", 4*MiB)
	add("s3", 5)
	quiet() // nothing runs before dispatch: the first slots go by size too
	l.dispatch()
	first := map[string]bool{}
	for range 4 {
		first[next()] = true
	}
	if !first["L5"] || !first["L4"] || !first["L3"] || !first["s1"] {
		t.Fatalf("the first four slots went to %v, want L5, L4, L3 (largest first, three at most) and s1", first)
	}
	quiet()
	done("s1") // three large blobs run: the slot stays with small blobs
	if got := next(); got != "s2" {
		t.Fatalf("a small blob's slot went to %s, want s2 (L2 waits: three large blobs run)", got)
	}
	done("s2")
	if got := next(); got != "s3" {
		t.Fatalf("slot went to %s, want s3", got)
	}
	done("s3") // no small blob waits: a fourth large blob may start
	if got := next(); got != "L2" {
		t.Fatalf("a small blob's slot went to %s, want L2 (no small blob waits)", got)
	}
	done("L5")
	quiet()

	// A goroutine blocked in acquire goes first; a cancelled one leaves.
	ctx := context.Background()
	if err := l.acquire(ctx, 1); err != nil { // the slot L5 left
		t.Fatal(err)
	}
	add("s4", 1)
	cancelled, cancel := context.WithCancel(ctx)
	gone := make(chan error)
	go func() { gone <- l.acquire(cancelled, 1) }()
	got := make(chan error)
	go func() { got <- l.acquire(ctx, 2) }()
	waitQueued(t, l, 3)
	cancel()
	if err := <-gone; err == nil {
		t.Fatal("a cancelled waiter got a slot")
	}
	done("L4") // a large blob's slot, and no large blob waits
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	quiet() // s4 still waits
	l.release(2)
	if got := next(); got != "s4" {
		t.Fatalf("slot went to %s, want s4", got)
	}
}

func waitQueued(t *testing.T, l *blobLane, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		l.mu.Lock()
		q := l.big.Len() + l.small.Len()
		l.mu.Unlock()
		if q == n {
			return
		}
	}
	t.Fatalf("%d entries never queued", n)
}

// TestPlannedCopySchedulesBlobsOfAllImages: in a planned copy the blobs
// of every image queue at once. With one image worker and two blob slots,
// of two images with a large layer, the last of the set starts its layer
// first (the largest), before all but at most one small blob (that one may
// race it to the registry); while it is held upstream, the small images
// behind the first large image in the set are copied whole, manifests
// included. A base layer shared by the small images is uploaded once and
// mounted into the other repositories, and the mirror sees the request
// floor: per blob a POST and a PUT, per mount a POST, per image a manifest
// PUT, no HEADs.
func TestPlannedCopySchedulesBlobsOfAllImages(t *testing.T) {
	ctx := context.Background()
	up := registrytest.Start(t, registrytest.Options{})
	dst := registrytest.Start(t, registrytest.Options{})
	const small = 12
	base := imagebuilder.RandomLayer(500, 8<<10)
	set := &imageset.Set{}
	large := map[digest.Digest]string{}
	add := func(repo string, layers ...imagebuilder.LayerSpec) *imagebuilder.Image {
		img, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: layers})
		if err != nil {
			t.Fatal(err)
		}
		if err := imagebuilder.Push(ctx, imagebuilder.Target{URL: up.URL()}, repo, "v1", img); err != nil {
			t.Fatal(err)
		}
		set.Images = append(set.Images, imageset.Image{Source: up.Host() + "/" + repo + "@" + img.Digest.String(), Origin: up.Host() + "/" + repo + ":v1",
			Digest: img.Digest.String(), Destination: repo + ":v1", Kind: imageset.KindAdditional})
		return img
	}
	first := add("ns/large-first", imagebuilder.RandomLayer(501, 2<<20))
	large[first.Layers[0].Descriptor().Digest] = "first"
	var baseDigest digest.Digest
	for i := range small {
		img := add(fmt.Sprintf("ns/small-%d", i), base, imagebuilder.RandomLayer(uint64(510+i), 8<<10))
		baseDigest = img.Layers[0].Descriptor().Digest
	}
	last := add("ns/large-last", imagebuilder.RandomLayer(502, 3<<20))
	large[last.Layers[0].Descriptor().Digest] = "last"

	// Upstream, large blobs are held until every small image's manifest
	// is at the mirror (or, if that never comes, long enough to tell).
	landed := make(chan struct{})
	var mu sync.Mutex
	var gets []string // blob GETs upstream, in order: "first", "last" or "small"
	var events []string
	heldTooLong, lastLate := false, false
	up.SetWrap(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, d, ok := registrytest.BlobPath(r.URL.Path); ok && r.Method == http.MethodGet {
				name, isLarge := large[d]
				if !isLarge {
					name = "small"
				}
				mu.Lock()
				gets = append(gets, name)
				if name == "last" {
					select {
					case <-landed:
						lastLate = true // started only after every small image was in
					default:
					}
				}
				mu.Unlock()
				if isLarge {
					select {
					case <-landed:
					case <-time.After(20 * time.Second):
						mu.Lock()
						heldTooLong = true
						mu.Unlock()
					}
				}
			}
			next.ServeHTTP(w, r)
		})
	})
	count := registrytest.NewRequestCounter()
	uploads := registrytest.NewUploads()
	manifests := 0
	dst.SetWrap(registrytest.Chain(count.Wrap, uploads.Wrap, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r)
			q := r.URL.Query()
			mu.Lock()
			defer mu.Unlock()
			switch {
			case r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/ns/small-") && registrytest.ContainsSegment(r.URL.Path, "manifests"):
				events = append(events, "small manifest")
				if manifests++; manifests == small {
					close(landed)
				}
			case r.Method == http.MethodPut && large[digest.Digest(q.Get("digest"))] != "":
				events = append(events, "large blob "+large[digest.Digest(q.Get("digest"))])
			}
		})
	}))

	mir, err := NewMirror(dst.Host()+"/m", testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	res := CopyPlanned(ctx, set, NewUpstream(testOptions(t)), mir, Options{ParallelImages: 1, ParallelBlobs: 2})
	if res.Err() != nil || len(res.Copied) != len(set.Images) {
		t.Fatalf("copy: %v, %d of %d copied", res.Err(), len(res.Copied), len(set.Images))
	}
	mu.Lock()
	defer mu.Unlock()
	if heldTooLong {
		t.Error("the small images' manifests did not reach the mirror while a large blob was on its way: they waited behind it")
	}
	for i, e := range events {
		if strings.HasPrefix(e, "large blob") && i < small {
			t.Errorf("mirror saw %v: a large blob was in before every small image's manifest", events)
			break
		}
	}
	// The largest blob gets the large slot first, and at once: its GET
	// comes while the small images are still copying through the other
	// slot (how many small GETs come before it depends on the machine's
	// load: its transfer first asks the mirror whether it has the blob).
	firstLarge := slices.IndexFunc(gets, func(g string) bool { return g != "small" })
	if firstLarge < 0 || gets[firstLarge] != "last" || lastLate {
		t.Errorf("blob GETs upstream: %v; want the largest blob (of the set's last image) first of the large ones, started before every small image was in", gets)
	}
	if i := slices.Index(gets, "first"); i < firstLarge {
		t.Errorf("blob GETs upstream: %v; the smaller large blob started before the larger", gets)
	}
	// Blobs: per small image a config and a layer, the shared base, per
	// large image a config and its layer.
	blobs := 2*small + 1 + 4
	checkCounts(t, "mirror", count, map[string]int{"GET ping": 1, "GET catalog": 1, "PUT manifest": len(set.Images),
		"POST blob": blobs + small - 1, "PUT blob": blobs})
	if n, m := uploads.Put(baseDigest), uploads.Mounted(baseDigest); n != 1 || m != small-1 {
		t.Errorf("shared base layer uploaded %d times and mounted %d times, want once and %d", n, m, small-1)
	}
	if d, n := uploads.MaxPut(); n > 1 {
		t.Errorf("blob %s uploaded %d times", d, n)
	}
	for _, img := range set.Images {
		repo, tag, _ := strings.Cut(img.Destination, ":")
		if d, err := dst.ManifestDigest("m/"+repo, tag); err != nil || d.String() != img.Digest {
			t.Errorf("%s at the mirror: %s, %v", img.Destination, d, err)
		}
	}
}

// TestScheduledTransferFailsItsOwnerOnly: in a planned copy, the shared
// layer's scheduled transfer fails for good (the source refuses it once):
// its image (the first of the set needing it) fails with that error, and
// the other images needing it get it on their own and are copied.
func TestScheduledTransferFailsItsOwnerOnly(t *testing.T) {
	ctx := context.Background()
	up := registrytest.Start(t, registrytest.Options{})
	base := imagebuilder.RandomLayer(600, 64<<10)
	set := &imageset.Set{}
	var baseDigest digest.Digest
	for i := range 3 {
		img, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{base, imagebuilder.RandomLayer(uint64(610+i), 8<<10)}})
		if err != nil {
			t.Fatal(err)
		}
		baseDigest = img.Layers[0].Descriptor().Digest
		repo := fmt.Sprintf("ns/app-%d", i)
		if err := imagebuilder.Push(ctx, imagebuilder.Target{URL: up.URL()}, repo, "v1", img); err != nil {
			t.Fatal(err)
		}
		set.Images = append(set.Images, imageset.Image{Source: up.Host() + "/" + repo + "@" + img.Digest.String(), Origin: up.Host() + "/" + repo + ":v1",
			Digest: img.Digest.String(), Destination: repo + ":v1", Kind: imageset.KindAdditional})
	}
	var mu sync.Mutex
	refused := false
	up.SetWrap(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, d, ok := registrytest.BlobPath(r.URL.Path); ok && d == baseDigest && r.Method == http.MethodGet {
				mu.Lock()
				first := !refused
				refused = true
				mu.Unlock()
				if first {
					http.Error(w, `{"errors":[{"code":"DENIED","message":"not now"}]}`, http.StatusForbidden)
					return
				}
			}
			next.ServeHTTP(w, r)
		})
	})
	store, err := ocistore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	res := CopyPlanned(ctx, set, NewUpstream(testOptions(t)), StoreDestination(store), Options{Retries: -1})
	if len(res.Failed) != 1 || res.Failed[0].Image.Destination != "ns/app-0:v1" || !strings.Contains(res.Failed[0].Err.Error(), baseDigest.String()) {
		t.Fatalf("failed: %v; want ns/app-0:v1 alone, for the shared layer", res.Failed)
	}
	if len(res.Copied) != 2 || !store.Has(baseDigest) {
		t.Fatalf("copied %v, shared layer stored: %t; want the other two and the layer", res.Copied, store.Has(baseDigest))
	}
}
