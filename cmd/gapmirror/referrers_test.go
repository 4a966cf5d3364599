package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/image/v5/types"

	"github.com/gapmirror/gapmirror/internal/cosigntest"
	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
	"github.com/gapmirror/gapmirror/registryapi"
	"github.com/gapmirror/gapmirror/workspace"
)

// referrersHost is a registry a referrers test mirrors from or to:
// distribution (no referrers API: the tag schema) or go-containerregistry's
// registry (the API).
type referrersHost interface {
	Host() string
	URL() string
}

func referrersRegistry(t *testing.T, api bool) referrersHost {
	if api {
		return registrytest.StartReferrersAPI(t)
	}
	return registrytest.Start(t, registrytest.Options{})
}

// referredWorld is three images upstream with referrers attached as cosign
// v3, oras and notation attach them (internal/cosigntest: real keys, real
// signatures): app (one manifest) with a cosign signature bundle, a SLSA
// attestation bundle, an SPDX SBOM, a Notation signature and a cosign
// signature of the SBOM; multi (an index) with a signature of the index and
// an attestation of its first platform manifest; pinned (named by digest)
// with a signature.
type referredWorld struct {
	*world
	src, dst referrersHost
	images   map[string]example
	// refs: subject (repo@digest) → referrers upstream, by kind.
	refs map[string]map[digest.Digest]string
}

func newReferredWorld(t *testing.T, srcAPI, dstAPI bool) *referredWorld {
	w := &referredWorld{world: newWorld(t, registrytest.Options{}), src: referrersRegistry(t, srcAPI), dst: referrersRegistry(t, dstAPI),
		images: map[string]example{}, refs: map[string]map[digest.Digest]string{}}
	ctx := context.Background()
	target := imagebuilder.Target{URL: w.src.URL()}
	_, tagSchema := w.src.(*registrytest.Registry)
	key := cosigntest.NewKey("referrers")
	attach := func(repo, kind string, r *cosigntest.Referrer, err error) *cosigntest.Referrer {
		t.Helper()
		must(t, err)
		must(t, cosigntest.Push(ctx, target, repo, r, tagSchema))
		k := repo + "@" + r.Subject.Digest.String()
		if w.refs[k] == nil {
			w.refs[k] = map[digest.Digest]string{}
		}
		w.refs[k][r.Digest] = kind
		return r
	}
	desc := func(img *imagebuilder.Image) ocispec.Descriptor {
		return ocispec.Descriptor{MediaType: img.MediaType, Digest: img.Digest, Size: int64(len(img.Manifest))}
	}
	app, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(11, 4096)}})
	must(t, err)
	must(t, imagebuilder.Push(ctx, target, "apps/app", "v1", app))
	w.images["app"] = example{Ref: w.src.Host() + "/apps/app:v1", Repo: "apps/app", Tag: "v1", Digest: app.Digest}
	all, err := cosigntest.All(key, desc(app)) // signature, attestation, SBOM, Notation, signature of the SBOM
	must(t, err)
	for i, kind := range []string{"signatures", "attestations", "sbom", "notation", "signatures"} {
		attach("apps/app", kind, all[i], nil)
	}

	multi, err := imagebuilder.BuildIndex(imagebuilder.IndexSpec{Images: []imagebuilder.ImageSpec{
		{Platform: imagebuilder.Platform{OS: "linux", Architecture: "amd64"}, Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(12, 4096)}},
		{Platform: imagebuilder.Platform{OS: "linux", Architecture: "arm64"}, Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(13, 4096)}},
	}})
	must(t, err)
	must(t, imagebuilder.PushIndex(ctx, target, "apps/multi", "v1", multi))
	w.images["multi"] = example{Ref: w.src.Host() + "/apps/multi:v1", Repo: "apps/multi", Tag: "v1", Digest: multi.Digest}
	r, err := cosigntest.Signature(key, multi.Descriptor())
	attach("apps/multi", "signatures", r, err)
	r, err = cosigntest.Attestation(key, multi.Images[0].Descriptor(), "https://gapmirror.example/amd64")
	attach("apps/multi", "attestations", r, err)

	pinned, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(14, 4096)}})
	must(t, err)
	must(t, imagebuilder.Push(ctx, target, "tools/pinned", "v1", pinned))
	w.images["pinned"] = example{Ref: w.src.Host() + "/tools/pinned@" + pinned.Digest.String(), Repo: "tools/pinned", Tag: "sha256-" + pinned.Digest.Encoded(), Digest: pinned.Digest}
	r, err = cosigntest.Signature(key, desc(pinned))
	attach("tools/pinned", "signatures", r, err)
	return w
}

func (w *referredWorld) referredISC() string {
	var b strings.Builder
	b.WriteString("kind: ImageSetConfiguration\napiVersion: mirror.openshift.io/v2alpha1\nmirror:\n  additionalImages:\n")
	for _, k := range []string{"app", "multi", "pinned"} {
		if ex, ok := w.images[k]; ok {
			fmt.Fprintf(&b, "  - name: %s\n", ex.Ref)
		}
	}
	path := filepath.Join(w.dir, "referred.yaml")
	must(w.t, os.WriteFile(path, []byte(b.String()), 0o644))
	return path
}

// assertReferrers checks, through the referrers API or the tag schema as
// the mirror offers, that every subject under prefix lists exactly the
// referrers of the kinds wanted, each whole at the mirror by digest.
func (w *referredWorld) assertReferrers(prefix string, kinds ...string) {
	t := w.t
	t.Helper()
	ctx := context.Background()
	c, err := registryapi.NewClient(w.dst.Host(), &types.SystemContext{DockerInsecureSkipTLSVerify: types.OptionalBoolTrue, AuthFilePath: w.authFile})
	must(t, err)
	kindOf := map[digest.Digest]string{}
	for _, refs := range w.refs {
		for r, kind := range refs {
			kindOf[r] = kind
		}
	}
	for subject, refs := range w.refs {
		repo, d, _ := strings.Cut(subject, "@")
		if kind, ok := kindOf[digest.Digest(d)]; ok && !slices.Contains(kinds, kind) {
			continue // a referrer not mirrored: nor are its referrers
		}
		var want []string
		for r, kind := range refs {
			if slices.Contains(kinds, kind) {
				want = append(want, r.String())
			}
		}
		listed, fallback, err := c.Referrers(ctx, prefix+"/"+repo, digest.Digest(d), "")
		must(t, err)
		var got []string
		for _, l := range listed {
			got = append(got, l.Digest.String())
		}
		if fallback && digest.Digest(d) == w.images["pinned"].Digest {
			// The image is tagged sha256-<hex> there: its referrers are
			// copied, not listed.
			got = want
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("referrers of %s/%s@%s at the mirror (tag schema %v): %v, want %v", prefix, repo, d, fallback, got, want)
		}
		for _, r := range want {
			data, _, err := c.Manifest(ctx, prefix+"/"+repo, r)
			if err != nil || digest.FromBytes(data).String() != r {
				t.Errorf("referrer %s/%s@%s not whole at the mirror: %v", prefix, repo, r, err)
			}
		}
	}
}

// TestReferrersThreeTrips: OCI 1.1 referrers (cosign v3 bundles, in-toto
// attestations, an SPDX SBOM, a Notation signature of the SBOM) travel
// with their images through mirror-to-disk, disk-to-mirror and
// mirror-to-mirror, from a source with and without the referrers API to a
// destination with and without it (where the tag schema index is
// written); --referrers chooses the kinds (signatures and attestations by
// default; on disk-to-mirror, of what the archive carries),
// --remove-signatures takes the signatures out, the summary and
// the dry run count them by kind, and a no-change rerun copies nothing.
func TestReferrersThreeTrips(t *testing.T) {
	for _, c := range []struct{ src, dst bool }{{false, false}, {true, true}, {false, true}, {true, false}} {
		t.Run(fmt.Sprintf("srcAPI=%v,dstAPI=%v", c.src, c.dst), func(t *testing.T) {
			t.Parallel()
			w := newReferredWorld(t, c.src, c.dst)
			isc := w.referredISC()
			all := []string{"signatures", "attestations", "sbom", "notation"}

			code, out, _ := w.gapmirror("mirror", "-c", isc, "--dry-run", "--referrers=all", "--workspace", "file://"+filepath.Join(w.dir, "dry"), "docker://"+w.dst.Host()+"/dry")
			if code != 0 || !strings.Contains(out, "3 images and referrers (4 signatures, 2 attestations, 1 sbom, 1 notation) planned") {
				t.Fatalf("dry run: exit %d:\n%s", code, out)
			}
			archiveDir := filepath.Join(w.dir, "archive")
			code, out, _ = w.gapmirror("mirror", "-c", isc, "--referrers=all", "file://"+archiveDir)
			if code != 0 || !strings.Contains(out, "signatures and referrers (4 signatures, 2 attestations, 1 sbom, 1 notation): 8 copied") {
				t.Fatalf("mirror-to-disk: exit %d:\n%s", code, out)
			}
			code, out, _ = w.gapmirror("mirror", "--from", "file://"+archiveDir, "docker://"+w.dst.Host()+"/d2m")
			if code != 0 || !strings.Contains(out, "8 copied") {
				t.Fatalf("disk-to-mirror: exit %d:\n%s", code, out)
			}
			w.assertReferrers("d2m", all...)
			if !c.src && !c.dst {
				// --referrers narrows what disk-to-mirror pushes of an
				// archive; a referrer of one left out goes with it (the
				// signature of the SBOM).
				code, out, _ = w.gapmirror("mirror", "--from", "file://"+archiveDir, "--referrers=signatures", "docker://"+w.dst.Host()+"/d2m-sigs")
				if code != 0 || !strings.Contains(out, "signatures and referrers (3 signatures): 3 copied") {
					t.Fatalf("disk-to-mirror --referrers=signatures: exit %d:\n%s", code, out)
				}
				code, out, _ = w.gapmirror("mirror", "--from", "file://"+archiveDir, "--referrers=sbom", "docker://"+w.dst.Host()+"/d2m-sbom")
				if code != 0 || !strings.Contains(out, "signatures and referrers (1 sbom): 1 copied") {
					t.Fatalf("disk-to-mirror --referrers=sbom: exit %d:\n%s", code, out)
				}
			}

			ws := "file://" + filepath.Join(w.dir, "ws")
			code, out, _ = w.gapmirror("mirror", "-c", isc, "--workspace", ws, "docker://"+w.dst.Host()+"/m2m")
			if code != 0 || !strings.Contains(out, "signatures and referrers (3 signatures, 2 attestations): 5 copied") {
				t.Fatalf("mirror-to-mirror: exit %d:\n%s", code, out)
			}
			w.assertReferrers("m2m", "signatures", "attestations")
			// verify asks the mirror for each referrer by digest, as for
			// the images by tag.
			if code, out, _ := w.gapmirror("verify", "--workspace", ws, "docker://"+w.dst.Host()+"/m2m"); code != 0 {
				t.Errorf("verify of a mirror with referrers: exit %d:\n%s", code, out)
			}
			code, out, _ = w.gapmirror("mirror", "-c", isc, "--workspace", ws, "docker://"+w.dst.Host()+"/m2m")
			if code != 0 || !strings.Contains(out, "0 copied, 3 already at the destination") || !strings.Contains(out, "0 copied, 5 already at the destination") {
				t.Errorf("no-change rerun: exit %d:\n%s", code, out)
			}
			code, out, _ = w.gapmirror("mirror", "-c", isc, "--referrers=sbom,notation", "--remove-signatures", "--workspace", "file://"+filepath.Join(w.dir, "ws2"), "docker://"+w.dst.Host()+"/nosig")
			if code != 0 || !strings.Contains(out, "signatures and referrers (1 sbom): 1 copied") {
				t.Errorf("--remove-signatures: exit %d:\n%s", code, out)
			}
		})
	}
}

// present reports whether the mirror has manifest repo@d.
func (w *referredWorld) present(repo string, d digest.Digest) bool {
	c, err := registryapi.NewClient(w.dst.Host(), &types.SystemContext{DockerInsecureSkipTLSVerify: types.OptionalBoolTrue, AuthFilePath: w.authFile})
	must(w.t, err)
	_, _, err = c.Head(context.Background(), repo, d.String())
	if err != nil && !registryapi.IsNotFound(err) {
		w.t.Fatal(err)
	}
	return err == nil
}

// TestReferrersPruneAndDelete: pruning an image prunes its referrers (and
// their referrers, and its referrers tag schema index where the mirror has
// no referrers API); delete removes those of the images it deletes; the
// referrers of images that stay, stay.
func TestReferrersPruneAndDelete(t *testing.T) {
	for _, dstAPI := range []bool{false, true} {
		t.Run(fmt.Sprintf("dstAPI=%v", dstAPI), func(t *testing.T) {
			t.Parallel()
			w := newReferredWorld(t, false, dstAPI)
			ws := "file://" + filepath.Join(w.dir, "ws")
			root := "docker://" + w.dst.Host() + "/m2m"
			if code, _, _ := w.gapmirror("mirror", "-c", w.referredISC(), "--referrers=all", "--workspace", ws, root); code != 0 {
				t.Fatalf("first run exit %d", code)
			}
			all := []string{"signatures", "attestations", "sbom", "notation"}
			app := w.images["app"]
			appRefs := map[digest.Digest]bool{}
			for subject, refs := range w.refs {
				if strings.HasPrefix(subject, "apps/app@") {
					for r := range refs {
						appRefs[r] = true
					}
					delete(w.refs, subject)
				}
			}
			delete(w.images, "app")
			code, out, _ := w.gapmirror("mirror", "-c", w.referredISC(), "--referrers=all", "--prune", "--workspace", ws, root)
			if code != 0 {
				t.Fatalf("prune run exit %d:\n%s", code, out)
			}
			for r := range appRefs {
				if w.present("m2m/apps/app", r) {
					t.Errorf("referrer %s of the pruned image is still at the mirror", r)
				}
			}
			if w.present("m2m/apps/app", app.Digest) {
				t.Errorf("pruned image still at the mirror")
			}
			if !dstAPI {
				if d, err := w.dst.(*registrytest.Registry).ManifestDigest("m2m/apps/app", "sha256-"+app.Digest.Encoded()); err == nil {
					t.Errorf("the referrers index of the pruned image is still tagged at the mirror: %s", d)
				}
			}
			w.assertReferrers("m2m", all...)

			multi := w.images["multi"]
			disc := filepath.Join(w.dir, "disc.yaml")
			must(t, os.WriteFile(disc, []byte("kind: DeleteImageSetConfiguration\napiVersion: mirror.openshift.io/v2alpha1\ndelete:\n  additionalImages:\n  - name: "+multi.Ref+"\n"), 0o644))
			code, out, _ = w.gapmirror("delete", "-c", disc, "--generate", "--workspace", ws, root)
			if code != 0 || !strings.Contains(out, "delete plan: 1 images and 2 referrers") {
				t.Fatalf("delete --generate: exit %d:\n%s", code, out)
			}
			if code, _, _ = w.gapmirror("delete", "--delete-yaml-file", filepath.Join(w.dir, "ws", "working-dir", "delete", "delete-images.yaml"), root); code != 0 {
				t.Fatalf("delete exit %d", code)
			}
			for subject, refs := range w.refs {
				if strings.HasPrefix(subject, "apps/multi@") {
					for r := range refs {
						if w.present("m2m/apps/multi", r) {
							t.Errorf("referrer %s of the deleted image is still at the mirror", r)
						}
					}
					delete(w.refs, subject)
				}
			}
			w.assertReferrers("m2m", all...)
		})
	}
}

// TestReferrersIncrementalArchive: an attestation attached upstream to an
// image an earlier archive carried travels in the next incremental archive
// without the image's blobs, and disk-to-mirror lists it at the mirror.
func TestReferrersIncrementalArchive(t *testing.T) {
	t.Parallel()
	w := newReferredWorld(t, false, false)
	isc := w.referredISC()
	carry := func(name string) string { return filepath.Join(w.dir, name) }
	if code, _, _ := w.gapmirror("mirror", "-c", isc, "file://"+carry("out")); code != 0 {
		t.Fatal("first mirror-to-disk failed")
	}
	idx1 := archiveOf(t, carry("out"))
	must(t, os.Rename(carry("out"), carry("trip1")))
	must(t, os.MkdirAll(carry("out"), 0o755))
	must(t, os.Rename(filepath.Join(carry("trip1"), "working-dir"), filepath.Join(carry("out"), "working-dir")))

	app := w.images["app"]
	data, _, err := w.src.(*registrytest.Registry).Manifest(app.Repo, app.Digest.String())
	must(t, err)
	subject := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: app.Digest, Size: int64(len(data))}
	late, err := cosigntest.Attestation(cosigntest.NewKey("late"), subject, "https://gapmirror.example/late-builder")
	must(t, err)
	must(t, cosigntest.Push(context.Background(), imagebuilder.Target{URL: w.src.URL()}, app.Repo, late, true))
	w.refs[app.Repo+"@"+app.Digest.String()][late.Digest] = "attestations"

	code, out, _ := w.gapmirror("mirror", "-c", isc, "file://"+carry("out"))
	if code != 0 || !strings.Contains(out, "1 copied, 5 already at the destination") {
		t.Fatalf("second mirror-to-disk: exit %d:\n%s", code, out)
	}
	idx2 := archiveOf(t, carry("out"))
	if idx2.BasedOn != idx1.ID {
		t.Errorf("second archive builds on %q, want %q", idx2.BasedOn, idx1.ID)
	}
	carried := map[digest.Digest]bool{}
	for _, b := range idx2.Blobs {
		carried[digest.Digest(b.Digest)] = true
	}
	for _, b := range late.Blobs[1:] {
		if !carried[b.Digest] {
			t.Errorf("the new attestation's blob %s is not in the incremental archive", b.Digest)
		}
	}
	for _, b := range manifestRefs(t, data).Layers {
		if carried[b.Digest] {
			t.Errorf("the unchanged image's layer %s is carried again", b.Digest)
		}
	}
	airgap := carry("airgap")
	for _, trip := range []string{"trip1", "out"} {
		moveChunks(t, carry(trip), airgap)
		if code, _, _ := w.gapmirror("mirror", "--from", "file://"+airgap, "docker://"+w.dst.Host()+"/d2m"); code != 0 {
			t.Fatalf("disk-to-mirror of %s failed", trip)
		}
	}
	w.assertReferrers("d2m", "signatures", "attestations")
}

// TestReferrersLookupCost measures what referrers add to no-change
// mirror-to-mirror reruns of 3 images (4 manifests, 5 referrers of the
// default kinds), from a source without the referrers API (the tag schema)
// and one with it (go-containerregistry's, which lists a bundle's config
// type as its artifactType, so each is read once for its true type):
// requests upstream with --referrers=none and with the default, and at the
// mirror, where a rerun asks nothing more than without referrers.
func TestReferrersLookupCost(t *testing.T) {
	for _, srcAPI := range []bool{false, true} {
		t.Run(fmt.Sprintf("srcAPI=%v", srcAPI), func(t *testing.T) {
			t.Parallel()
			w := newReferredWorld(t, srcAPI, false)
			up, down := registrytest.NewRequestCounter(), registrytest.NewRequestCounter()
			w.src.(interface {
				SetWrap(func(http.Handler) http.Handler)
			}).SetWrap(up.Wrap)
			w.dst.(*registrytest.Registry).SetWrap(down.Wrap)
			isc := w.referredISC()
			count := func(name string, args ...string) (int, int) {
				up.Lock()
				clear(up.N)
				up.Unlock()
				down.Lock()
				clear(down.N)
				down.Unlock()
				full := append([]string{"mirror", "-c", isc, "--workspace", "file://" + filepath.Join(w.dir, "ws-"+name)}, args...)
				if code, _, _ := w.gapmirror(append(full, "docker://"+w.dst.Host()+"/"+name)...); code != 0 {
					t.Fatalf("%s: exit %d", name, code)
				}
				return up.Total(), down.Total()
			}
			count("plain", "--referrers=none")
			plainUp, plainDown := count("plain", "--referrers=none")
			count("referred")
			refUp, refDown := count("referred")
			t.Logf("no-change rerun of 3 images, source with the referrers API %v: upstream %d requests without referrers, %d with (+%.2f per image); at the mirror %d without, %d with 5 referrers (%.2f per entry)",
				srcAPI, plainUp, refUp, float64(refUp-plainUp)/3, plainDown, refDown, float64(refDown)/8)
			// One list per manifest (4) and per referrer found (5); on a
			// registry without the API each is a HEAD of the tag schema
			// tag and a GET where it exists, after the 404s of the
			// lookups sent before the first came back.
			if refUp-plainUp > 3*(4+5) {
				t.Errorf("referrers lookups cost %d requests upstream on a rerun of 3 images", refUp-plainUp)
			}
			// At the mirror: nothing. The records place every referrer
			// there, listed by the run that last saw its image, and the
			// HEAD of each image (which a rerun makes anyway) finds it.
			if refDown != plainDown {
				t.Errorf("referrers cost %d requests at the mirror on a no-change rerun (%d without them)", refDown-plainDown, plainDown)
			}
		})
	}
}

// TestReferrersUnlistedFoundByVerify: a rerun takes a referrer its
// records place at the mirror, listed, to be there while its image is
// (no request of its own); a listing lost afterwards (another tool
// rewrote the tag schema index without it) is what `gapmirror verify`
// finds, and its fix lists it again. A referrer the records do not show
// listed by the run that last saw its image (a run stopped or failed
// between its PUT and its index's) is asked about and copied again.
func TestReferrersUnlistedFoundByVerify(t *testing.T) {
	t.Parallel()
	w := newReferredWorld(t, false, false)
	wsDir := filepath.Join(w.dir, "ws")
	ws := "file://" + wsDir
	root := "docker://" + w.dst.Host() + "/m2m"
	if code, _, _ := w.gapmirror("mirror", "-c", w.referredISC(), "--workspace", ws, root); code != 0 {
		t.Fatal("first run failed")
	}
	multi := w.images["multi"]
	empty := `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}`
	clobber := func() {
		t.Helper()
		must(t, imagebuilder.PushManifest(context.Background(), imagebuilder.Target{URL: w.dst.URL()}, "m2m/"+multi.Repo, "sha256-"+multi.Digest.Encoded(), ocispec.MediaTypeImageIndex, []byte(empty)))
	}
	clobber()
	code, out, _ := w.gapmirror("mirror", "-c", w.referredISC(), "--workspace", ws, root)
	if code != 0 || !strings.Contains(out, "0 copied, 5 already at the destination") || !strings.Contains(out, "3 found under their tags with the expected digest, 5 referrers of those taken to be there, listed, from the workspace's records") {
		t.Fatalf("rerun: exit %d:\n%s", code, out)
	}

	code, out, _ = w.gapmirror("verify", "-o", "json", "--workspace", ws, root)
	var rep struct {
		OK        bool   `json:"ok"`
		RetryFile string `json:"retryFile"`
		Groups    []struct {
			Kind  string `json:"kind"`
			Fix   string `json:"fix"`
			Items []struct {
				Image, Digest, Detail string
			} `json:"items"`
		} `json:"problems"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("verify -o json: exit %d: %v\n%s", code, err, out)
	}
	sig := ""
	for r, kind := range w.refs["apps/multi@"+multi.Digest.String()] {
		if kind == "signatures" {
			sig = r.String()
		}
	}
	if code == 0 || len(rep.Groups) != 1 || rep.Groups[0].Kind != "referrer-unlisted" || len(rep.Groups[0].Items) != 1 ||
		rep.Groups[0].Items[0].Digest != sig || !strings.Contains(rep.Groups[0].Items[0].Detail, "sha256-"+multi.Digest.Encoded()+" does not list it") ||
		!strings.Contains(rep.Groups[0].Fix, "--retry-failed "+rep.RetryFile+" --force") {
		t.Fatalf("verify of a clobbered referrers index: exit %d:\n%s", code, out)
	}
	code, out, _ = w.gapmirror("mirror", "--workspace", ws, "--retry-failed", rep.RetryFile, "--force", root)
	// Only the failed referrer: --retry-failed to a mirror copied the
	// whole set again (with --force, every image).
	if code != 0 || !strings.Contains(out, "3 images: 0 copied, 3 already at the destination") || !strings.Contains(out, "1 copied, 4 already at the destination") {
		t.Fatalf("the fix verify gave: exit %d:\n%s", code, out)
	}
	w.assertReferrers("m2m", "signatures", "attestations")
	if code, out, _ := w.gapmirror("verify", "--workspace", ws, root); code != 0 {
		t.Fatalf("verify after the fix: exit %d:\n%s", code, out)
	}

	// As a run that could not list the signature leaves the record: its
	// date older than its image's.
	wsp := workspace.Workspace{Dir: filepath.Join(wsDir, "working-dir")}
	rec, err := wsp.Location(w.dst.Host() + "/m2m")
	must(t, err)
	aged := 0
	for i, m := range rec.Images {
		if m.Digest == sig {
			rec.Images[i].LastSeen = m.LastSeen.Add(-time.Hour)
			aged++
		}
	}
	if aged != 1 {
		t.Fatalf("the record holds the signature %d times", aged)
	}
	must(t, wsp.SaveLocation(rec))
	clobber()
	code, out, _ = w.gapmirror("mirror", "-c", w.referredISC(), "--workspace", ws, root)
	if code != 0 || !strings.Contains(out, "1 copied, 4 already at the destination") || !strings.Contains(out, "4 referrers of those taken to be there") {
		t.Fatalf("rerun after a run that did not list a referrer: exit %d:\n%s", code, out)
	}
	w.assertReferrers("m2m", "signatures", "attestations")
}

// TestReferrersOfSparseImages: a sparse copy of a multi-arch image (only
// linux/arm64) takes the referrers of its index and of the platform
// manifests it copies, not those of the platforms it leaves out (the
// attestation of the amd64 manifest would have no subject at the mirror).
func TestReferrersOfSparseImages(t *testing.T) {
	t.Parallel()
	w := newReferredWorld(t, false, false)
	w.dst = registrytest.Start(t, registrytest.Options{SparseIndexes: true})
	isc := filepath.Join(w.dir, "sparse.yaml")
	must(t, os.WriteFile(isc, []byte("kind: ImageSetConfiguration\napiVersion: mirror.openshift.io/v2alpha1\nmirror:\n  additionalImages:\n  - name: "+
		w.images["multi"].Ref+"\n    platforms:\n    - os: linux\n      architecture: arm64\n"), 0o644))
	code, out, _ := w.gapmirror("mirror", "-c", isc, "--workspace", "file://"+filepath.Join(w.dir, "ws"), "docker://"+w.dst.Host()+"/sparse")
	if code != 0 || !strings.Contains(out, "signatures and referrers (1 signatures): 1 copied") {
		t.Fatalf("sparse mirror-to-mirror: exit %d:\n%s", code, out)
	}
	code, out, _ = w.gapmirror("mirror", "-c", isc, "--workspace", "file://"+filepath.Join(w.dir, "ws2"), "--referrers=all", "docker://"+w.dst.Host()+"/whole-index-sigs")
	if code != 0 || strings.Contains(out, "attestations") {
		t.Fatalf("sparse mirror-to-mirror, --referrers=all: exit %d:\n%s", code, out)
	}
}

// TestLookupsBesideTheCopy: the signature tag lookups do not hold up the
// copy: with each signature tag HEAD upstream held until a blob is asked
// for (up to 10 s), mirror-to-disk asks for blobs while the lookups are
// still waiting, and still mirrors every signature and referrer.
func TestLookupsBesideTheCopy(t *testing.T) {
	t.Parallel()
	w := newReferredWorld(t, false, false)
	lookups := newSignalHold()
	w.src.(*registrytest.Registry).SetWrap(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			switch {
			case r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/sha256:"):
				lookups.fire()
			case r.Method == http.MethodHead && strings.HasSuffix(r.URL.Path, ".sig"):
				lookups.hold()
			}
			next.ServeHTTP(rw, r)
		})
	})
	code, out, _ := w.gapmirror("mirror", "-c", w.referredISC(), "--cache-dir", filepath.Join(w.dir, "cache"), "file://"+filepath.Join(w.dir, "archive"))
	if code != 0 || !strings.Contains(out, "signatures and referrers (") {
		t.Fatalf("mirror-to-disk: exit %d:\n%s", code, out)
	}
	if held, heldTooLong := lookups.counts(); held == 0 || heldTooLong > 0 {
		t.Errorf("%d signature tag lookups, %d of them answered only after 10 s without a blob asked for: the copy waited for the lookups", held, heldTooLong)
	}
}
