package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
	"github.com/gapmirror/gapmirror/prune"
)

// entry is one additionalImages item of a test ISC.
type entry struct{ name, targetRepo, targetTag string }

// iscOf writes an ImageSetConfiguration with exactly these entries.
func (w *world) iscOf(file string, entries ...entry) string {
	var b strings.Builder
	b.WriteString("kind: ImageSetConfiguration\napiVersion: mirror.openshift.io/v2alpha1\nmirror:\n  additionalImages:\n")
	for _, e := range entries {
		fmt.Fprintf(&b, "  - name: %s\n", e.name)
		if e.targetRepo != "" {
			fmt.Fprintf(&b, "    targetRepo: %s\n", e.targetRepo)
		}
		if e.targetTag != "" {
			fmt.Fprintf(&b, "    targetTag: %s\n", e.targetTag)
		}
	}
	return w.writeFile(file, b.String())
}

// childOf is the first platform manifest of an upstream index.
func (w *world) childOf(ex example) digest.Digest {
	data, _, err := w.up.Manifest(ex.Repo, ex.Digest.String())
	must(w.t, err)
	var idx struct {
		Manifests []struct {
			Digest digest.Digest `json:"digest"`
		} `json:"manifests"`
	}
	must(w.t, json.Unmarshal(data, &idx))
	if len(idx.Manifests) == 0 {
		w.t.Fatalf("%s is not an index", ex.Ref)
	}
	return idx.Manifests[0].Digest
}

// deletionRecord is a prune/delete record as a run writes it.
type deletionRecord struct {
	Kind    string         `json:"kind"`
	Plan    prune.Plan     `json:"plan"`
	Outcome *prune.Outcome `json:"outcome"`
}

// deletionFile reads the newest prune/delete record matching pattern.
func deletionFile(t *testing.T, pattern string) (string, deletionRecord) {
	t.Helper()
	var rec deletionRecord
	files, _ := filepath.Glob(pattern)
	if len(files) == 0 {
		t.Fatalf("no file %s", pattern)
	}
	sort.Strings(files)
	data, err := os.ReadFile(files[len(files)-1])
	must(t, err)
	must(t, json.Unmarshal(data, &rec))
	return files[len(files)-1], rec
}

// dryRunThenPrune runs mirror -c isc --prune into dst with the workspace at
// wsDir, first with --dry-run, with run (a world's gapmirror or a release
// world's run), and returns the dry run's preview and the real run's
// pruned record.
func dryRunThenPrune(t *testing.T, run func(args ...string) (int, string, string), isc, wsDir, dst string) (dry, pruned deletionRecord) {
	t.Helper()
	ws := "file://" + wsDir
	if code, _, _ := run("mirror", "-c", isc, "--workspace", ws, "--dry-run", "--prune", dst); code != 0 {
		t.Fatal("dry run failed")
	}
	_, dry = deletionFile(t, filepath.Join(wsDir, "working-dir", "dry-run", "prune-preview.json"))
	if code, _, _ := run("mirror", "-c", isc, "--workspace", ws, "--prune", dst); code != 0 {
		t.Fatal("--prune failed")
	}
	_, pruned = deletionFile(t, filepath.Join(wsDir, "working-dir", "prune", "*-pruned.json"))
	return dry, pruned
}

func actionKeys(list []prune.Action) []string {
	var out []string
	for _, a := range list {
		out = append(out, a.Key())
	}
	sort.Strings(out)
	return out
}

// gone checks that repo has neither the tag nor (when d is set) the manifest.
func (w *world) gone(reg *registrytest.Registry, repo, tag string, d digest.Digest) {
	w.t.Helper()
	if tag != "" {
		if got, err := reg.ManifestDigest(repo, tag); err == nil {
			w.t.Errorf("%s:%s still there (%s)", repo, tag, got)
		}
	}
	if d != "" {
		if _, err := reg.ManifestDigest(repo, d.String()); err == nil {
			w.t.Errorf("%s@%s still there", repo, d)
		}
	}
}

// present checks that repo:tag names d and is complete.
func (w *world) present(reg *registrytest.Registry, repo, tag string, d digest.Digest) {
	w.t.Helper()
	got, err := reg.ManifestDigest(repo, tag)
	if err != nil || got != d {
		w.t.Errorf("%s:%s: got %s, %v; want %s", repo, tag, got, err, d)
		return
	}
	w.assertComplete(reg, repo, d)
}

// TestPruneMirrorToMirror: images leaving the image set are listed by the
// next run and deleted with --prune, exactly as listed; content something
// kept still uses (same digest under a kept tag, a platform manifest of a
// kept index, a tag someone else added) and images gapmirror did not push
// stay.
func TestPruneMirrorToMirror(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(8, 16<<10)
	im := w.images
	// 0 app-00, 1 app-01, 2 tool-02, 3 app-03 (index), 4 app-04 (docker),
	// 5 tool-05, 6 app-06, 7 app-07 (index, by digest only).
	child := w.childOf(im[3])
	childRef := w.up.Host() + "/" + im[3].Repo + "@" + child.String()
	ws := "file://" + filepath.Join(w.dir, "ws")
	dst := "docker://" + w.dst.Host() + "/m2m"
	ctx := context.Background()

	// Someone else's images at the mirror: one gapmirror never mirrors,
	// and app-06, which another workspace mirrored before ours ran.
	other, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(77, 4<<10)}})
	must(t, err)
	must(t, imagebuilder.Push(ctx, imagebuilder.Target{URL: w.dst.URL()}, "m2m/apps/foreign", "v1", other))
	if code, _, _ := w.gapmirror("mirror", "-c", w.iscOf("other.yaml", entry{name: im[6].Ref}), "--workspace", "file://"+filepath.Join(w.dir, "other-ws"), dst); code != 0 {
		t.Fatal("the other workspace's mirror failed")
	}

	all := []entry{
		{name: im[0].Ref}, {name: im[0].Ref, targetTag: "stable"},
		{name: im[1].Ref}, {name: im[1].Ref, targetRepo: "copies/app-01"},
		{name: im[2].Ref}, {name: im[3].Ref}, {name: childRef},
		{name: im[4].Ref}, {name: im[5].Ref}, {name: im[6].Ref}, {name: im[7].Ref},
	}
	if code, stdout, _ := w.gapmirror("mirror", "-c", w.iscOf("all.yaml", all...), "--workspace", ws, dst); code != 0 || !strings.Contains(stdout, "prune: nothing to delete") {
		t.Fatalf("first m2m: exit %d", code)
	}
	// After the first run someone tags app-04's manifest for their own use.
	m4, mt4, err := w.dst.Manifest("m2m/"+im[4].Repo, "v1")
	must(t, err)
	must(t, imagebuilder.PushManifest(ctx, imagebuilder.Target{URL: w.dst.URL()}, "m2m/"+im[4].Repo, "pinned", mt4, m4))

	kept := []entry{{name: im[0].Ref}, {name: im[1].Ref}, {name: im[3].Ref}, {name: im[5].Ref}}
	isc2 := w.iscOf("kept.yaml", kept...)
	// --dry-run --prune previews and deletes nothing.
	code, stdout, _ := w.gapmirror("mirror", "-c", isc2, "--workspace", ws, "--dry-run", "--prune", dst)
	if code != 0 || !strings.Contains(stdout, "dry run") || !strings.Contains(stdout, "prune preview") {
		t.Fatalf("dry run: exit %d", code)
	}
	// Its preview is with its plan in dry-run/; prune/ holds what real runs did.
	_, dry := deletionFile(t, filepath.Join(w.dir, "ws", "working-dir", "dry-run", "prune-preview.json"))
	if dry.Kind != "prune-preview" {
		t.Errorf("the dry run's preview is a %q record", dry.Kind)
	}
	if previews, _ := filepath.Glob(filepath.Join(w.dir, "ws", "working-dir", "prune", "*")); len(previews) > 0 {
		t.Errorf("the dry run wrote into working-dir/prune: %v", previews)
	}
	w.present(w.dst, "m2m/"+im[2].Repo, "v1", im[2].Digest)
	code, stdout, _ = w.gapmirror("mirror", "-c", isc2, "--workspace", ws, dst)
	if code != 0 || !strings.Contains(stdout, "prune preview") || !strings.Contains(stdout, "--prune") {
		t.Fatalf("second m2m (preview): exit %d", code)
	}
	_, preview := deletionFile(t, filepath.Join(w.dir, "ws", "working-dir", "prune", "*-preview.json"))
	if a, b := actionKeys(dry.Plan.Actions), actionKeys(preview.Plan.Actions); strings.Join(a, "\n") != strings.Join(b, "\n") || len(a) != 8 {
		t.Errorf("dry-run preview\n%s\ndiffers from the run's preview\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
	}
	// Nothing deleted by a preview.
	w.present(w.dst, "m2m/"+im[2].Repo, "v1", im[2].Digest)
	w.present(w.dst, "m2m/apps/app-00", "stable", im[0].Digest)

	code, stdout, _ = w.gapmirror("mirror", "-c", isc2, "--workspace", ws, "--prune", dst)
	if code != 0 || !strings.Contains(stdout, "prune:") {
		t.Fatalf("third m2m (--prune): exit %d", code)
	}
	_, pruned := deletionFile(t, filepath.Join(w.dir, "ws", "working-dir", "prune", "*-pruned.json"))
	if pruned.Outcome == nil || len(pruned.Outcome.Failed) != 0 {
		t.Fatalf("prune outcome: %+v", pruned.Outcome)
	}
	if a, b := actionKeys(preview.Plan.Actions), actionKeys(pruned.Outcome.Done); strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Errorf("the preview listed\n%s\nbut --prune deleted\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
	}

	// Kept images are whole.
	for _, i := range []int{0, 1, 3, 5} {
		w.present(w.dst, "m2m/"+im[i].Repo, im[i].Tag, im[i].Digest)
	}
	// Same digest under a second tag: only the tag went.
	w.gone(w.dst, "m2m/apps/app-00", "stable", "")
	// Same digest in another repository: that repository's copy went, the kept one is whole (checked above).
	w.gone(w.dst, "m2m/copies/app-01", "v1", im[1].Digest)
	// Plainly removed.
	w.gone(w.dst, "m2m/"+im[2].Repo, "v1", im[2].Digest)
	// Platform manifest of a kept index: the tag went, the manifest stays.
	w.gone(w.dst, "m2m/"+im[3].Repo, "sha256-"+child.Encoded(), "")
	w.assertComplete(w.dst, "m2m/"+im[3].Repo, child)
	// Someone else's tag names app-04's manifest: our tag went, theirs is whole.
	w.gone(w.dst, "m2m/"+im[4].Repo, "v1", "")
	w.present(w.dst, "m2m/"+im[4].Repo, "pinned", im[4].Digest)
	// Found at the mirror, not pushed by this workspace: untouched.
	w.present(w.dst, "m2m/"+im[6].Repo, "v1", im[6].Digest)
	// Removed index: tag, index and its platform manifests gone.
	w.gone(w.dst, "m2m/"+im[7].Repo, im[7].Tag, im[7].Digest)
	data, _, err := w.up.Manifest(im[7].Repo, im[7].Digest.String())
	must(t, err)
	var idx struct {
		Manifests []struct {
			Digest digest.Digest `json:"digest"`
		} `json:"manifests"`
	}
	must(t, json.Unmarshal(data, &idx))
	for _, m := range idx.Manifests {
		w.gone(w.dst, "m2m/"+im[7].Repo, "", m.Digest)
	}
	// Never pushed by gapmirror.
	w.present(w.dst, "m2m/apps/foreign", "v1", other.Digest)

	// Everything pruned is forgotten: the next run has nothing to do.
	if code, stdout, _ := w.gapmirror("mirror", "-c", isc2, "--workspace", ws, "--prune", dst); code != 0 || !strings.Contains(stdout, "prune: nothing to delete") {
		t.Errorf("fourth m2m: exit %d", code)
	}
}

// corrupt makes upstream serve image i's own layer with wrong bytes.
func (w *world) corrupt(i int) {
	w.t.Helper()
	data, _, err := w.up.Manifest(w.images[i].Repo, w.images[i].Digest.String())
	must(w.t, err)
	all := layersOf(w.t, data)
	w.up.SetWrap(registrytest.NewBlobCorrupter(0, all[len(all)-1]).Wrap)
}

// TestPruneNotAfterFailure: a run in which an image failed does not prune
// (the run's exit code says why), and a later complete run does.
func TestPruneNotAfterFailure(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(4, 16<<10)
	im := w.images
	ws := "file://" + filepath.Join(w.dir, "ws")
	dst := "docker://" + w.dst.Host() + "/m"
	if code, _, _ := w.gapmirror("mirror", "-c", w.iscOf("a.yaml", entry{name: im[0].Ref}, entry{name: im[1].Ref}), "--workspace", ws, dst); code != 0 {
		t.Fatal("first m2m failed")
	}
	// app-01 leaves the set; app-02 joins it but cannot be copied.
	w.corrupt(2)
	isc := w.iscOf("b.yaml", entry{name: im[0].Ref}, entry{name: im[2].Ref})
	code, stdout, stderr := w.gapmirror("mirror", "-c", isc, "--workspace", ws, "--prune", "--retry-times", "1", dst)
	if code != 8 || !strings.Contains(stdout, "prune: skipped, nothing deleted: some images failed") {
		t.Errorf("failed run with --prune: exit %d (want 8)\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	w.present(w.dst, "m/"+im[1].Repo, "v1", im[1].Digest)
	if files, _ := filepath.Glob(filepath.Join(w.dir, "ws", "working-dir", "prune", "*")); len(files) != 0 {
		t.Errorf("a failed run wrote prune records: %v", files)
	}
	// --retry-failed copies part of the set: it does not prune either.
	failed, _ := filepath.Glob(filepath.Join(w.dir, "ws", "working-dir", "failed", "*.json"))
	w.up.SetWrap(nil)
	code, stdout, _ = w.gapmirror("mirror", "--retry-failed", failed[0], "--workspace", ws, "--prune", dst)
	if code != 1 || !strings.Contains(stdout, "--retry-failed run") {
		t.Errorf("--retry-failed with --prune: exit %d (want 1)", code)
	}
	w.present(w.dst, "m/"+im[1].Repo, "v1", im[1].Digest)
	// A complete run prunes.
	if code, _, _ := w.gapmirror("mirror", "-c", isc, "--workspace", ws, "--prune", dst); code != 0 {
		t.Fatalf("complete run: exit %d", code)
	}
	w.gone(w.dst, "m/"+im[1].Repo, "v1", im[1].Digest)
	w.present(w.dst, "m/"+im[2].Repo, "v1", im[2].Digest)
}

// TestPruneDiskToMirror: disk-to-mirror prunes what an earlier archive
// pushed and the new one's image set lacks, and refuses to prune with an
// archive mirror-to-disk could not fill completely.
func TestPruneDiskToMirror(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(6, 16<<10)
	im := w.images
	out := filepath.Join(w.dir, "out")
	airgap := filepath.Join(w.dir, "airgap")
	dst := "docker://" + w.dst.Host() + "/d"
	trip := func(isc string, wantM2D int) {
		t.Helper()
		if code, _, _ := w.gapmirror("mirror", "-c", isc, "--retry-times", "1", "file://"+out); code != wantM2D {
			t.Fatalf("m2d: exit %d, want %d", code, wantM2D)
		}
		moveChunks(t, out, airgap)
	}
	trip(w.iscOf("a.yaml", entry{name: im[0].Ref}, entry{name: im[1].Ref}, entry{name: im[2].Ref}), 0)
	if code, _, _ := w.gapmirror("mirror", "--from", "file://"+airgap, dst); code != 0 {
		t.Fatal("first d2m failed")
	}
	// An archive missing an image that failed upstream: no prune.
	w.corrupt(4)
	trip(w.iscOf("b.yaml", entry{name: im[0].Ref}, entry{name: im[4].Ref}), 8)
	code, stdout, _ := w.gapmirror("mirror", "--from", "file://"+airgap, "--prune", dst)
	if code != 1 || !strings.Contains(stdout, "the archive is partial") {
		t.Errorf("d2m --prune of a partial archive: exit %d (want 1)", code)
	}
	w.present(w.dst, "d/"+im[1].Repo, "v1", im[1].Digest)
	w.present(w.dst, "d/"+im[2].Repo, "v1", im[2].Digest)
	// The next archive is complete: its d2m prunes app-01 and tool-02.
	w.up.SetWrap(nil)
	trip(w.iscOf("b.yaml", entry{name: im[0].Ref}, entry{name: im[4].Ref}), 0)
	code, stdout, _ = w.gapmirror("mirror", "--from", "file://"+airgap, "--prune", dst)
	if code != 0 || !strings.Contains(stdout, "prune: 2 of 2 deletes done") {
		t.Fatalf("d2m --prune: exit %d", code)
	}
	w.gone(w.dst, "d/"+im[1].Repo, "v1", im[1].Digest)
	w.gone(w.dst, "d/"+im[2].Repo, "v1", im[2].Digest)
	w.present(w.dst, "d/"+im[0].Repo, "v1", im[0].Digest)
	w.present(w.dst, "d/"+im[4].Repo, "v1", im[4].Digest)
}

// TestPruneRegistryRefusesDelete: a registry with deletes disabled fails
// the prune with the registry's answer and what to change.
func TestPruneRegistryRefusesDelete(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(2, 16<<10)
	im := w.images
	locked := registrytest.Start(t, registrytest.Options{DisableDelete: true})
	ws := "file://" + filepath.Join(w.dir, "ws")
	dst := "docker://" + locked.Host() + "/m"
	if code, _, _ := w.gapmirror("mirror", "-c", w.iscOf("a.yaml", entry{name: im[0].Ref}, entry{name: im[1].Ref}), "--workspace", ws, dst); code != 0 {
		t.Fatal("first m2m failed")
	}
	code, _, stderr := w.gapmirror("mirror", "-c", w.iscOf("b.yaml", entry{name: im[0].Ref}), "--workspace", ws, "--prune", dst)
	if code != 1 || !strings.Contains(stderr, "UNSUPPORTED") || !strings.Contains(stderr, "storage.delete.enabled") || !strings.Contains(stderr, locked.Host()) {
		t.Errorf("exit %d (want 1), stderr:\n%s", code, stderr)
	}
	w.present(locked, "m/"+im[1].Repo, im[1].Tag, im[1].Digest)
	// Still listed for the next try.
	code, stdout, _ := w.gapmirror("mirror", "-c", w.iscOf("b.yaml", entry{name: im[0].Ref}), "--workspace", ws, dst)
	if code != 0 || !strings.Contains(stdout, "m/"+im[1].Repo+"@"+im[1].Digest.String()) {
		t.Errorf("preview after a refused prune: exit %d", code)
	}
}

// TestPruneMovedTag: when upstream moves a tag, the mirror gets the new
// image under it and prune deletes the old manifest, now untagged, and
// leaves the tag alone.
func TestPruneMovedTag(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(2, 16<<10)
	im := w.images
	ws := "file://" + filepath.Join(w.dir, "ws")
	dst := "docker://" + w.dst.Host() + "/m"
	isc := w.iscOf("a.yaml", entry{name: im[0].Ref})
	if code, _, _ := w.gapmirror("mirror", "-c", isc, "--workspace", ws, dst); code != 0 {
		t.Fatal("first m2m failed")
	}
	newer, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(4242, 8<<10)}})
	must(t, err)
	must(t, imagebuilder.Push(context.Background(), imagebuilder.Target{URL: w.up.URL()}, im[0].Repo, "v1", newer))
	code, stdout, _ := w.gapmirror("mirror", "-c", isc, "--workspace", ws, "--prune", dst)
	if code != 0 || !strings.Contains(stdout, "now names "+newer.Digest.String()) || !strings.Contains(stdout, "untagged") {
		t.Fatalf("second m2m: exit %d", code)
	}
	w.present(w.dst, "m/"+im[0].Repo, "v1", newer.Digest)
	w.gone(w.dst, "m/"+im[0].Repo, "", im[0].Digest)
}

// TestPruneIndexAndItsChild: an index and, separately, one of its platform
// manifests both leave the set: each manifest is deleted once, the
// platform manifest with its own tag.
func TestPruneIndexAndItsChild(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(5, 16<<10)
	im := w.images
	child := w.childOf(im[3])
	ws := "file://" + filepath.Join(w.dir, "ws")
	dst := "docker://" + w.dst.Host() + "/m"
	// The index is tagged "a1", which sorts before the child's sha256-… tag.
	all := w.iscOf("a.yaml", entry{name: im[0].Ref}, entry{name: im[3].Ref, targetTag: "a1"}, entry{name: w.up.Host() + "/" + im[3].Repo + "@" + child.String()})
	if code, _, _ := w.gapmirror("mirror", "-c", all, "--workspace", ws, dst); code != 0 {
		t.Fatal("first m2m failed")
	}
	if code, _, _ := w.gapmirror("mirror", "-c", w.iscOf("b.yaml", entry{name: im[0].Ref}), "--workspace", ws, "--prune", dst); code != 0 {
		t.Fatal("prune failed")
	}
	_, pruned := deletionFile(t, filepath.Join(w.dir, "ws", "working-dir", "prune", "*-pruned.json"))
	seen := map[string]int{}
	for _, a := range pruned.Outcome.Done {
		seen[a.Digest]++
		if a.Digest == child.String() && (len(a.Tags) != 1 || a.Tags[0] != "sha256-"+child.Encoded()) {
			t.Errorf("the platform manifest's delete does not name its tag: %+v", a)
		}
	}
	if len(pruned.Outcome.Done) != 3 || seen[im[3].Digest.String()] != 1 || seen[child.String()] != 1 {
		t.Errorf("deletes: %v", actionKeys(pruned.Outcome.Done))
	}
	w.gone(w.dst, "m/"+im[3].Repo, "a1", im[3].Digest)
	w.gone(w.dst, "m/"+im[3].Repo, "sha256-"+child.Encoded(), child)
	w.present(w.dst, "m/"+im[0].Repo, "v1", im[0].Digest)
}

// TestPruneDryRunAgrees: a --dry-run --prune preview, made before the copy
// it skips, lists exactly the deletes the real run then makes, when that
// copy moves content between tags: the same digest now under another tag
// (only the old tag goes), an index new to the set listing an image that
// leaves it (only that image's tag goes), an upstream tag that moved (the
// old manifest goes, untagged).
func TestPruneDryRunAgrees(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(5, 8<<10)
	im := w.images
	// 0 app-00, 1 app-01, 3 app-03 (index), 4 app-04 (by digest).
	child := w.childOf(im[3])
	childRef := w.up.Host() + "/" + im[3].Repo + "@" + child.String()
	ws := "file://" + filepath.Join(w.dir, "ws")
	dst := "docker://" + w.dst.Host() + "/m"
	if code, _, _ := w.gapmirror("mirror", "-c", w.iscOf("a.yaml", entry{name: im[0].Ref}, entry{name: im[1].Ref}, entry{name: childRef}, entry{name: im[4].Ref}), "--workspace", ws, dst); code != 0 {
		t.Fatal("first m2m failed")
	}
	newer, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(4343, 8<<10)}})
	must(t, err)
	must(t, imagebuilder.Push(context.Background(), imagebuilder.Target{URL: w.up.URL()}, im[1].Repo, "v1", newer))
	isc := w.iscOf("b.yaml", entry{name: im[0].Ref, targetTag: "v2"}, entry{name: im[1].Ref}, entry{name: im[3].Ref}, entry{name: im[4].Ref})
	dry, pruned := dryRunThenPrune(t, w.gapmirror, isc, filepath.Join(w.dir, "ws"), dst)
	if a, b := actionKeys(dry.Plan.Actions), actionKeys(pruned.Outcome.Done); strings.Join(a, "\n") != strings.Join(b, "\n") || len(b) != 3 {
		t.Errorf("the dry run's preview listed\n%s\nbut --prune deleted\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
	}
	w.present(w.dst, "m/"+im[0].Repo, "v2", im[0].Digest)
	w.gone(w.dst, "m/"+im[0].Repo, "v1", "")
	w.present(w.dst, "m/"+im[1].Repo, "v1", newer.Digest)
	w.gone(w.dst, "m/"+im[1].Repo, "", im[1].Digest)
	w.present(w.dst, "m/"+im[3].Repo, "v1", im[3].Digest)
	w.gone(w.dst, "m/"+im[3].Repo, "sha256-"+child.Encoded(), "")
	w.assertComplete(w.dst, "m/"+im[3].Repo, child)
	w.present(w.dst, "m/"+im[4].Repo, im[4].Tag, im[4].Digest)
}

// TestPruneSharedPlatformManifest: two indexes of one repository list the
// same platform manifest; when one leaves the set, it and its own platform
// manifest go, and the shared one stays for the other (complete, checked
// by present); the dry run's preview lists the same deletes.
func TestPruneSharedPlatformManifest(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	ctx := context.Background()
	amd := imagebuilder.ImageSpec{Platform: imagebuilder.Platform{OS: "linux", Architecture: "amd64"}, Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(11, 4<<10)}}
	armA := imagebuilder.ImageSpec{Platform: imagebuilder.Platform{OS: "linux", Architecture: "arm64"}, Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(12, 4<<10)}}
	armB := imagebuilder.ImageSpec{Platform: imagebuilder.Platform{OS: "linux", Architecture: "arm64"}, Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(13, 4<<10)}}
	a, err := imagebuilder.BuildIndex(imagebuilder.IndexSpec{Images: []imagebuilder.ImageSpec{amd, armA}})
	must(t, err)
	b, err := imagebuilder.BuildIndex(imagebuilder.IndexSpec{Images: []imagebuilder.ImageSpec{amd, armB}})
	must(t, err)
	if a.Images[0].Digest != b.Images[0].Digest {
		t.Fatal("the two indexes do not share their amd64 manifest")
	}
	up := imagebuilder.Target{URL: w.up.URL()}
	must(t, imagebuilder.PushIndex(ctx, up, "apps/multi", "a", a))
	must(t, imagebuilder.PushIndex(ctx, up, "apps/multi", "b", b))
	ws := "file://" + filepath.Join(w.dir, "ws")
	dst := "docker://" + w.dst.Host() + "/m"
	ref := w.up.Host() + "/apps/multi:"
	if code, _, _ := w.gapmirror("mirror", "-c", w.iscOf("1.yaml", entry{name: ref + "a"}, entry{name: ref + "b"}), "--workspace", ws, dst); code != 0 {
		t.Fatal("m2m failed")
	}
	isc := w.iscOf("2.yaml", entry{name: ref + "b"})
	w.gapmirror("mirror", "-c", isc, "--workspace", ws, "--dry-run", "--prune", dst)
	_, dry := deletionFile(t, filepath.Join(w.dir, "ws", "working-dir", "dry-run", "prune-preview.json"))
	if code, _, _ := w.gapmirror("mirror", "-c", isc, "--workspace", ws, "--prune", dst); code != 0 {
		t.Fatal("--prune failed")
	}
	_, pruned := deletionFile(t, filepath.Join(w.dir, "ws", "working-dir", "prune", "*-pruned.json"))
	if x, y := actionKeys(dry.Plan.Actions), actionKeys(pruned.Outcome.Done); strings.Join(x, "\n") != strings.Join(y, "\n") {
		t.Errorf("dry\n%s\nreal\n%s", strings.Join(x, "\n"), strings.Join(y, "\n"))
	}
	w.present(w.dst, "m/apps/multi", "b", b.Digest)
	w.gone(w.dst, "m/apps/multi", "a", a.Digest)
	w.gone(w.dst, "m/apps/multi", "", a.Images[1].Digest)
}

// TestPruneTwoMirrorsOneArchiveDir: one archive directory feeds two
// mirror roots; the records are per root, so --prune into one deletes
// there only, and the other is pruned by its own run.
func TestPruneTwoMirrorsOneArchiveDir(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(3, 16<<10)
	im := w.images
	out, airgap := filepath.Join(w.dir, "out"), filepath.Join(w.dir, "airgap")
	a, b := "docker://"+w.dst.Host()+"/a", "docker://"+w.dst.Host()+"/b"
	trip := func(isc string) {
		if code, _, _ := w.gapmirror("mirror", "-c", isc, "file://"+out); code != 0 {
			t.Fatal("m2d failed")
		}
		moveChunks(t, out, airgap)
	}
	trip(w.iscOf("1.yaml", entry{name: im[0].Ref}, entry{name: im[1].Ref}))
	for _, d := range []string{a, b} {
		if code, _, _ := w.gapmirror("mirror", "--from", "file://"+airgap, d); code != 0 {
			t.Fatal("d2m failed")
		}
	}
	trip(w.iscOf("2.yaml", entry{name: im[0].Ref}))
	if code, _, _ := w.gapmirror("mirror", "--from", "file://"+airgap, "--prune", a); code != 0 {
		t.Fatal("d2m --prune to a failed")
	}
	w.gone(w.dst, "a/"+im[1].Repo, "v1", im[1].Digest)
	w.present(w.dst, "b/"+im[1].Repo, "v1", im[1].Digest)
	w.present(w.dst, "a/"+im[0].Repo, "v1", im[0].Digest)
	code, stdout, _ := w.gapmirror("mirror", "--from", "file://"+airgap, "--prune", b)
	if code != 0 || !strings.Contains(stdout, "1 of 1 deletes done") {
		t.Fatalf("d2m --prune to b: exit %d", code)
	}
	w.gone(w.dst, "b/"+im[1].Repo, "v1", im[1].Digest)
	w.present(w.dst, "b/"+im[0].Repo, "v1", im[0].Digest)
}

// TestPruneNestedIndex: a kept index that lists another index protects
// the platform manifests of that nested index too: an image dropped from
// the set that is one of them loses only its tag.
func TestPruneNestedIndex(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	inner, outerDigest := w.pushNestedIndex(21)
	amd := inner.Images[0].Digest
	ws := "file://" + filepath.Join(w.dir, "ws")
	dst := "docker://" + w.dst.Host() + "/m"
	ref := w.up.Host() + "/apps/nested"
	if code, _, _ := w.gapmirror("mirror", "-c", w.iscOf("1.yaml", entry{name: ref + ":outer"}, entry{name: ref + "@" + amd.String()}), "--workspace", ws, dst); code != 0 {
		t.Fatal("m2m failed")
	}
	w.present(w.dst, "m/apps/nested", "outer", outerDigest)
	w.assertComplete(w.dst, "m/apps/nested", inner.Images[1].Digest)
	if code, _, _ := w.gapmirror("mirror", "-c", w.iscOf("2.yaml", entry{name: ref + ":outer"}), "--workspace", ws, "--prune", dst); code != 0 {
		t.Fatal("--prune failed")
	}
	w.assertNestedKept(inner, outerDigest)
}

// TestPruneDryRunNestedIndex: the --dry-run --prune preview, made before
// the copy it skips, knows that a new index nesting another index needs
// the platform manifests of the nested one: like the real run, it deletes
// only the tag of a platform manifest mirrored on its own before, not the
// manifest the new index needs.
func TestPruneDryRunNestedIndex(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	inner, outerDigest := w.pushNestedIndex(31)
	amd := inner.Images[0].Digest
	ws := "file://" + filepath.Join(w.dir, "ws")
	dst := "docker://" + w.dst.Host() + "/m"
	ref := w.up.Host() + "/apps/nested"
	// First the platform manifest alone; next week the index nesting it.
	if code, _, _ := w.gapmirror("mirror", "-c", w.iscOf("1.yaml", entry{name: ref + "@" + amd.String()}), "--workspace", ws, dst); code != 0 {
		t.Fatal("m2m failed")
	}
	isc := w.iscOf("2.yaml", entry{name: ref + ":outer"})
	dry, pruned := dryRunThenPrune(t, w.gapmirror, isc, filepath.Join(w.dir, "ws"), dst)
	want := []string{string(prune.DeleteTag) + " m/apps/nested@" + amd.String() + ":sha256-" + amd.Encoded()}
	if a, b := actionKeys(dry.Plan.Actions), actionKeys(pruned.Outcome.Done); strings.Join(a, "\n") != strings.Join(b, "\n") || strings.Join(b, "\n") != strings.Join(want, "\n") {
		t.Errorf("the dry run's preview listed\n%s\n--prune deleted\n%s\nwant\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"), strings.Join(want, "\n"))
	}
	w.assertNestedKept(inner, outerDigest)
}

// assertNestedKept checks, under the mirror's m/apps/nested, that the
// pushNestedIndex index (outer) is there with every platform manifest of
// inner complete, and that the amd64 one's own tag is gone.
func (w *world) assertNestedKept(inner *imagebuilder.Index, outer digest.Digest) {
	w.t.Helper()
	w.present(w.dst, "m/apps/nested", "outer", outer)
	for _, img := range inner.Images {
		w.assertComplete(w.dst, "m/apps/nested", img.Digest)
	}
	w.gone(w.dst, "m/apps/nested", "sha256-"+inner.Images[0].Digest.Encoded(), "")
}

// pushNestedIndex pushes upstream, as apps/nested:outer, an index whose
// only entry is a two-platform index (layers from seed and seed+1), and
// returns the inner index and the outer one's digest.
func (w *world) pushNestedIndex(seed uint64) (*imagebuilder.Index, digest.Digest) {
	t := w.t
	t.Helper()
	ctx := context.Background()
	inner, err := imagebuilder.BuildIndex(imagebuilder.IndexSpec{Images: []imagebuilder.ImageSpec{
		{Platform: imagebuilder.Platform{OS: "linux", Architecture: "amd64"}, Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(seed, 4<<10)}},
		{Platform: imagebuilder.Platform{OS: "linux", Architecture: "arm64"}, Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(seed+1, 4<<10)}},
	}})
	must(t, err)
	up := imagebuilder.Target{URL: w.up.URL()}
	must(t, imagebuilder.PushIndex(ctx, up, "apps/nested", "", inner))
	outer := fmt.Sprintf(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.index.v1+json","digest":"%s","size":%d}]}`,
		inner.Digest, len(inner.Manifest))
	must(t, imagebuilder.PushManifest(ctx, up, "apps/nested", "outer", "application/vnd.oci.image.index.v1+json", []byte(outer)))
	return inner, digest.FromString(outer)
}
