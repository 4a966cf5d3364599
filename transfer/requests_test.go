package transfer

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
	"github.com/gapmirror/gapmirror/ocistore"
)

// TestPushRequestFloor: a first push sends the distribution API's minimum
// to the mirror, counted on the real registry: one /v2/ ping for the run,
// on a first push one reading of the registry's catalog (no existence
// check at all in a repository it does not list), later per repository
// new to the workspace one tag listing (in place of a manifest HEAD per
// image), per image one manifest PUT, per new blob a POST
// and a monolithic PUT, and per blob another repository of the run already
// holds one mount (POST ?mount=&from=, 201). No blob HEADs, no PATCHes. The same holds from the local store (disk-to-mirror's
// shape). Upstream, each manifest is read once (the tag resolution's GET
// serves the copy) and each blob once, after one ping. It holds for Copy
// and for CopyPlanned, the trips' way in, whose planning pass makes the
// existence checks: per image exactly one manifest PUT and its blobs, and
// no manifest HEAD in a repository the catalog or its tag list answers.
// A new tag in a repository the workspace's records know sends no blob
// HEAD for the blobs they place there (TestLostBlobIsSentAgain: when the
// registry lost one).
func TestPushRequestFloor(t *testing.T) {
	t.Run("Copy", func(t *testing.T) { pushRequestFloor(t, Copy) })
	t.Run("copyPlanned", func(t *testing.T) { pushRequestFloor(t, CopyPlanned) })
}

func pushRequestFloor(t *testing.T, copyAll func(context.Context, *imageset.Set, Source, Destination, Options) *Result) {
	ctx := context.Background()
	up := registrytest.Start(t, registrytest.Options{})
	const n, repos = 8, 4                       // two versions per repository, as bundles have
	base := imagebuilder.RandomLayer(1, 48<<10) // shared by every image, as operand layers are
	set := &imageset.Set{}
	for i := 0; i < n; i++ {
		img, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{base, imagebuilder.RandomLayer(uint64(200+i), 8<<10)}})
		if err != nil {
			t.Fatal(err)
		}
		repo, tag := fmt.Sprintf("ns/op-%d", i%repos), fmt.Sprintf("v%d", i/repos)
		if err := imagebuilder.Push(ctx, imagebuilder.Target{URL: up.URL()}, repo, tag, img); err != nil {
			t.Fatal(err)
		}
		set.Images = append(set.Images, imageset.Image{Source: up.Host() + "/" + repo + "@" + img.Digest.String(), Origin: up.Host() + "/" + repo + ":" + tag,
			Digest: img.Digest.String(), Destination: repo + ":" + tag, Kind: imageset.KindAdditional})
	}
	// Per image: a config and a layer of its own; one base for all,
	// mounted into the other repositories.
	newBlobs := 2*n + 1
	want := map[string]int{"GET ping": 1, "GET catalog": 1, "PUT manifest": n,
		"POST blob": newBlobs + repos - 1, "PUT blob": newBlobs}

	onUp := registrytest.NewRequestCounter()
	up.SetWrap(onUp.Wrap)
	src := NewUpstream(testOptions(t))
	for _, img := range set.Images { // what planning does
		named, err := reference.ParseNormalizedNamed(img.Origin)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := src.ResolveDigest(ctx, named); err != nil {
			t.Fatal(err)
		}
	}
	m2m := registrytest.Start(t, registrytest.Options{})
	onM2M := registrytest.NewRequestCounter()
	m2m.SetWrap(onM2M.Wrap)
	mir, err := NewMirror(m2m.Host()+"/m", testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	if res := copyAll(ctx, set, src, mir, Options{ParallelImages: 4}); res.Err() != nil || len(res.Copied) != n {
		t.Fatalf("mirror-to-mirror: %v, %d copied", res.Err(), len(res.Copied))
	}
	checkCounts(t, "mirror-to-mirror, at the mirror", onM2M, want)
	checkCounts(t, "mirror-to-mirror, upstream", onUp, map[string]int{"GET ping": 1, "GET manifest": n, "GET blob": newBlobs})
	for _, img := range set.Images {
		repo, tag, _ := strings.Cut(img.Destination, ":")
		if d, err := m2m.ManifestDigest("m/"+repo, tag); err != nil || d.String() != img.Digest {
			t.Errorf("%s at the mirror: %s, %v", img.Destination, d, err)
		}
	}

	// The local store as the source, as disk-to-mirror reads the archive.
	store, err := ocistore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if res := copyAll(ctx, set, NewUpstream(testOptions(t)), StoreDestination(store), Options{}); res.Err() != nil {
		t.Fatal(res.Err())
	}
	d2m := registrytest.Start(t, registrytest.Options{})
	onD2M := registrytest.NewRequestCounter()
	d2m.SetWrap(onD2M.Wrap)
	mir2, err := NewMirror(d2m.Host()+"/m", testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	if res := copyAll(ctx, set, &ArchiveSource{Archive: store, Name: "store", Mirror: mir2}, mir2, Options{ParallelImages: 4}); res.Err() != nil || len(res.Copied) != n {
		t.Fatalf("disk-to-mirror: %v", res.Err())
	}
	checkCounts(t, "disk-to-mirror, at the mirror", onD2M, want)

	// A later run with new images sharing those blobs, its locations from
	// the workspace's records: mounts only, no blob sent.
	again := &imageset.Set{}
	for _, img := range set.Images {
		img.Destination = strings.Replace(img.Destination, "ns/", "other/", 1)
		again.Images = append(again.Images, img)
	}
	mir3, err := NewMirror(d2m.Host()+"/m", testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	locs := map[digest.Digest]string{}
	for _, img := range set.Images {
		descs, err := StoreBlobs(store, img)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range descs[1:] {
			locs[d.Digest] = strings.Split(img.Destination, ":")[0]
		}
	}
	mir3.KnownLocations(locs)
	onD2M.N = map[string]int{}
	manifests := onlyManifests{store: store, has: map[digest.Digest]bool{}}
	for _, img := range set.Images {
		manifests.has[digest.Digest(img.Digest)] = true
	}
	if res := copyAll(ctx, again, &ArchiveSource{Archive: manifests, Name: "incremental"}, mir3, Options{ParallelImages: 4}); res.Err() != nil || res.Blobs != 0 {
		t.Fatalf("new tags of known blobs: %v, %d blobs sent", res.Err(), res.Blobs)
	}
	checkCounts(t, "new repositories of known blobs", onD2M, map[string]int{"GET ping": 1, "GET tags": repos, "PUT manifest": n, "POST blob": 2*n + repos})

	// The rerun of the first push: a HEAD per image in repositories the
	// workspace knows, nothing else.
	mir4, err := NewMirror(d2m.Host()+"/m", testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	mir4.KnownLocations(locs)
	onD2M.N = map[string]int{}
	if res := copyAll(ctx, set, &ArchiveSource{Archive: manifests, Name: "incremental"}, mir4, Options{ParallelImages: 4}); res.Err() != nil || len(res.Skipped) != n {
		t.Fatalf("rerun: %v, %d skipped", res.Err(), len(res.Skipped))
	}
	checkCounts(t, "no-change rerun", onD2M, map[string]int{"GET ping": 1, "HEAD manifest": n})

	// A new tag in a repository the records know, sharing the base layer
	// they place there: the records answer for the base (no blob HEAD; the
	// manifest PUT is the check), the new config and layer go up, and the
	// new tag costs its one manifest HEAD.
	newer, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{base, imagebuilder.RandomLayer(299, 8<<10)}})
	if err != nil {
		t.Fatal(err)
	}
	known := locs[newer.Layers[0].Digest]
	if known == "" {
		t.Fatal("the records place the base layer nowhere")
	}
	if err := imagebuilder.Push(ctx, imagebuilder.Target{URL: up.URL()}, known, "v9", newer); err != nil {
		t.Fatal(err)
	}
	added := imageset.Image{Source: up.Host() + "/" + known + "@" + newer.Digest.String(), Origin: up.Host() + "/" + known + ":v9",
		Digest: newer.Digest.String(), Destination: known + ":v9", Kind: imageset.KindAdditional}
	if res := copyAll(ctx, &imageset.Set{Images: []imageset.Image{added}}, NewUpstream(testOptions(t)), StoreDestination(store), Options{}); res.Err() != nil {
		t.Fatal(res.Err())
	}
	mir5, err := NewMirror(d2m.Host()+"/m", testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	mir5.KnownLocations(locs)
	src5 := &ArchiveSource{Archive: store, Name: "store", Mirror: mir5}
	mir5.ResendFrom(src5, nil)
	onD2M.N = map[string]int{}
	if res := copyAll(ctx, &imageset.Set{Images: []imageset.Image{added}}, src5, mir5, Options{}); res.Err() != nil || len(res.Copied) != 1 {
		t.Fatalf("a new tag in a known repository: %v", res.Err())
	}
	checkCounts(t, "a new tag in a known repository", onD2M, map[string]int{"GET ping": 1, "HEAD manifest": 1, "POST blob": 2, "PUT blob": 2, "PUT manifest": 1})
	if d, err := d2m.ManifestDigest("m/"+known, "v9"); err != nil || d != newer.Digest {
		t.Errorf("%s:v9 at the mirror: %s, %v", known, d, err)
	}
}

// onlyManifests is an incremental archive that carries the image manifests
// and none of their blobs.
type onlyManifests struct {
	store *ocistore.Store
	has   map[digest.Digest]bool
}

func (a onlyManifests) Has(d digest.Digest) bool { return a.has[d] }
func (a onlyManifests) Open(d digest.Digest) (io.ReadCloser, error) {
	if !a.has[d] {
		return nil, fmt.Errorf("blob %s is not in the archive", d)
	}
	return a.store.Open(d)
}

func checkCounts(t *testing.T, what string, c *registrytest.RequestCounter, want map[string]int) {
	t.Helper()
	c.Lock()
	defer c.Unlock()
	if fmt.Sprint(c.N) != fmt.Sprint(want) {
		t.Errorf("%s: requests %v, want %v", what, c.N, want)
	}
}

// TestPlannedCopyAsksForBlobsAnArchiveLeftOut: through CopyPlanned (the
// trips' way in) as through Copy, a small blob an incremental archive left
// out, which the mirror's repository holds though no record says so, is
// asked for (HEAD) and found, not reported missing.
func TestPlannedCopyAsksForBlobsAnArchiveLeftOut(t *testing.T) {
	ctx := context.Background()
	up := registrytest.Start(t, registrytest.Options{})
	dst := registrytest.Start(t, registrytest.Options{})
	shared := imagebuilder.RandomLayer(7, 4<<10)
	var set [2]*imageset.Set
	var second *imagebuilder.Image
	for i := range set {
		img, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{shared, imagebuilder.RandomLayer(uint64(70+i), 4<<10)}})
		if err != nil {
			t.Fatal(err)
		}
		tag := fmt.Sprintf("v%d", i)
		if err := imagebuilder.Push(ctx, imagebuilder.Target{URL: up.URL()}, "ns/a", tag, img); err != nil {
			t.Fatal(err)
		}
		set[i] = &imageset.Set{Images: []imageset.Image{{Source: up.Host() + "/ns/a@" + img.Digest.String(), Origin: up.Host() + "/ns/a:" + tag,
			Digest: img.Digest.String(), Destination: "ns/a:" + tag, Kind: imageset.KindAdditional}}}
		second = img
	}
	store, err := ocistore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range set {
		if res := Copy(ctx, s, NewUpstream(testOptions(t)), StoreDestination(store), Options{}); res.Err() != nil {
			t.Fatal(res.Err())
		}
	}
	first, err := NewMirror(dst.Host()+"/m", testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	if res := Copy(ctx, set[0], &ArchiveSource{Archive: store, Name: "full"}, first, Options{}); res.Err() != nil {
		t.Fatal(res.Err())
	}
	// The incremental archive: the second image without the shared layer.
	archive := onlyManifests{store: store, has: map[digest.Digest]bool{second.Digest: true}}
	for _, b := range second.Blobs() {
		archive.has[b.Digest] = true
	}
	delete(archive.has, second.Layers[0].Digest)
	mir, err := NewMirror(dst.Host()+"/m", testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	if res := CopyPlanned(ctx, set[1], &ArchiveSource{Archive: archive, Name: "incremental"}, mir, Options{}); res.Err() != nil || len(res.Copied) != 1 {
		t.Fatalf("incremental archive through copyPlanned: %v, %d copied", res.Err(), len(res.Copied))
	}
}

// TestFirstPushReadsTheCatalog: a first push reads the mirror's catalog
// once; images and large blobs of repositories it does not list get no
// existence check,
// those of a repository it lists are checked (and one already there is
// skipped). A registry that refuses its catalog is asked per repository,
// with the same result.
func TestFirstPushReadsTheCatalog(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		t.Run(fmt.Sprintf("refused=%t", refuse), func(t *testing.T) {
			ctx := context.Background()
			up := registrytest.Start(t, registrytest.Options{})
			dst := registrytest.Start(t, registrytest.Options{})
			set := &imageset.Set{}
			var first *imagebuilder.Image
			for i := 0; i < 6; i++ {
				size := int64(4 << 10)
				if i == 1 || i == 3 { // large: worth a HEAD where the repository exists
					size = headBlobLimit + 1000
				}
				img, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(uint64(300+i), size)}})
				if err != nil {
					t.Fatal(err)
				}
				repo, tag := fmt.Sprintf("ns/op-%d", i%3), fmt.Sprintf("v%d", i/3)
				if err := imagebuilder.Push(ctx, imagebuilder.Target{URL: up.URL()}, repo, tag, img); err != nil {
					t.Fatal(err)
				}
				if i == 0 {
					first = img
				}
				set.Images = append(set.Images, imageset.Image{Source: up.Host() + "/" + repo + "@" + img.Digest.String(), Origin: up.Host() + "/" + repo + ":" + tag,
					Digest: img.Digest.String(), Destination: repo + ":" + tag, Kind: imageset.KindAdditional})
			}
			// Someone pushed ns/op-0:v0 already; an unrelated repository sorts inside the root's range.
			if err := imagebuilder.Push(ctx, imagebuilder.Target{URL: dst.URL()}, "m/ns/op-0", "v0", first); err != nil {
				t.Fatal(err)
			}
			if err := imagebuilder.Push(ctx, imagebuilder.Target{URL: dst.URL()}, "mm/other", "v0", first); err != nil {
				t.Fatal(err)
			}
			count := registrytest.NewRequestCounter()
			dst.SetWrap(func(next http.Handler) http.Handler {
				counted := count.Wrap(next)
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if refuse && r.URL.Path == "/v2/_catalog" {
						count.Lock()
						count.N["GET catalog"]++
						count.Unlock()
						http.Error(w, `{"errors":[{"code":"DENIED","message":"catalog is for admins"}]}`, http.StatusForbidden)
						return
					}
					counted.ServeHTTP(w, r)
				})
			})
			mir, err := NewMirror(dst.Host()+"/m", testOptions(t))
			if err != nil {
				t.Fatal(err)
			}
			res := CopyPlanned(ctx, set, NewUpstream(testOptions(t)), mir, Options{ParallelImages: 4})
			if res.Err() != nil || len(res.Copied) != 5 || len(res.Skipped) != 1 || res.Skipped[0].Destination != "ns/op-0:v0" {
				t.Fatalf("first push: %v, %d copied, skipped %v", res.Err(), len(res.Copied), res.Skipped)
			}
			// The one image already there: its tag listed, its digest
			// confirmed by a HEAD. Of the two large layers, the one going
			// to the repository the catalog lists is asked for first.
			want := map[string]int{"GET ping": 1, "GET catalog": 1, "GET tags": 1, "HEAD manifest": 1, "HEAD blob": 1, "PUT manifest": 5, "POST blob": 10, "PUT blob": 10}
			if refuse {
				want["GET tags"], want["HEAD blob"] = 3, 2
			}
			checkCounts(t, "first push", count, want)
			for _, img := range set.Images {
				repo, tag, _ := strings.Cut(img.Destination, ":")
				if d, err := dst.ManifestDigest("m/"+repo, tag); err != nil || d.String() != img.Digest {
					t.Errorf("%s at the mirror: %s, %v", img.Destination, d, err)
				}
			}
		})
	}
}
