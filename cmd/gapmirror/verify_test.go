package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// verifyJSON is the part of verify's -o json report the tests read.
type verifyJSON struct {
	Checked struct {
		Images, Blobs, Requests int
		PlatformManifests       int `json:"platformManifests"`
		Catalogs                int `json:"catalogs"`
		CatalogImages           int `json:"catalogImages"`
		ReleaseSignatures       int `json:"releaseSignatureConfigMaps"`
	} `json:"checked"`
	Problems []struct {
		Kind  string `json:"kind"`
		Fix   string `json:"fix"`
		Items []struct {
			Image, Digest, Detail string
		} `json:"items"`
	} `json:"problems"`
	RetryFile string `json:"retryFile"`
}

// verifyFleet pushes a fleet of n images (every fourth multi-arch) through
// mirror-to-disk and disk-to-mirror under /d2m, and returns the archive
// directory and the mirror.
func verifyFleet(t *testing.T, n int) (*world, string, string) {
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(n, 32<<10)
	archiveDir := filepath.Join(w.dir, "archive")
	if code, _, _ := w.gapmirror("mirror", "-c", w.isc(""), "file://"+archiveDir); code != 0 {
		t.Fatalf("mirror-to-disk exit %d", code)
	}
	dst := "docker://" + w.dst.Host() + "/d2m"
	code, out, _ := w.gapmirror("mirror", "--from", "file://"+archiveDir, dst)
	if code != 0 {
		t.Fatalf("disk-to-mirror exit %d", code)
	}
	if !strings.Contains(out, "verified at the destination") {
		t.Errorf("the disk-to-mirror summary does not say what was verified at the destination:\n%s", out)
	}
	return w, archiveDir, dst
}

// verify runs gapmirror verify -o json and decodes the report.
func (w *world) verify(args ...string) (int, verifyJSON, string) {
	w.t.Helper()
	code, out, errOut := w.gapmirror(append([]string{"verify", "-o", "json"}, args...)...)
	var rep verifyJSON
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		w.t.Fatalf("verify -o json printed no report (%v):\n%s\n%s", err, out, errOut)
	}
	return code, rep, errOut
}

// problem returns the detail lines of the problems of kind k.
func (r verifyJSON) problem(k string) (details []string, fix string) {
	for _, g := range r.Problems {
		if g.Kind == k {
			for _, it := range g.Items {
				details = append(details, it.Image+": "+it.Detail)
			}
			return details, g.Fix
		}
	}
	return nil, ""
}

// TestVerifyCleanMirror: verify passes on a mirror disk-to-mirror just
// filled and on one mirror-to-mirror filled, asking one request per image
// and platform manifest plus one HEAD per blob; the text report says so.
func TestVerifyCleanMirror(t *testing.T) {
	t.Parallel()
	w, archiveDir, dst := verifyFleet(t, 8)
	code, rep, _ := w.verify("--from", "file://"+archiveDir, dst)
	if code != 0 || len(rep.Problems) != 0 {
		t.Fatalf("verify of a clean mirror: exit %d, problems %+v", code, rep.Problems)
	}
	if rep.Checked.Images != 8 || rep.Checked.PlatformManifests != 4 || rep.Checked.Blobs == 0 {
		t.Errorf("checked %+v: want 8 images, 2 indexes of 2 platforms", rep.Checked)
	}
	if want := rep.Checked.Images + rep.Checked.PlatformManifests + rep.Checked.Blobs; rep.Checked.Requests != want {
		t.Errorf("verify asked %d requests, want %d (one per image and platform manifest, one HEAD per blob)", rep.Checked.Requests, want)
	}
	code, out, _ := w.gapmirror("verify", "--from", "file://"+archiveDir, dst)
	if code != 0 || !strings.Contains(out, "verified: the mirror holds every image of the set whole") {
		t.Errorf("verify (text): exit %d\n%s", code, out)
	}
	code, out, _ = w.gapmirror("verify", "--deep", "--from", "file://"+archiveDir, dst)
	if code != 0 || !strings.Contains(out, "read and hashed") {
		t.Errorf("verify --deep: exit %d\n%s", code, out)
	}

	ws := filepath.Join(w.dir, "ws")
	m2m := "docker://" + w.dst.Host() + "/m2m"
	code, out, _ = w.gapmirror("mirror", "-c", w.isc(""), "--workspace", "file://"+ws, m2m)
	if code != 0 || !strings.Contains(out, "verified at the destination") {
		t.Fatalf("mirror-to-mirror: exit %d\n%s", code, out)
	}
	if code, rep, _ := w.verify("--workspace", "file://"+ws, m2m); code != 0 || len(rep.Problems) != 0 {
		t.Errorf("verify of a clean mirror-to-mirror: exit %d, problems %+v", code, rep.Problems)
	}
	// Records of another mirror root are no measure of this one.
	if code, _, errOut := w.gapmirror("verify", "--workspace", "file://"+ws, dst); code != 1 || !strings.Contains(errOut, "no record of a run that pushed to "+w.dst.Host()+"/d2m") {
		t.Errorf("verify of a root the workspace never pushed to: exit %d\n%s", code, errOut)
	}
}

// TestVerifyFindsDeletedBlob: a layer deleted from a repository behind the
// registry's back is found, with the image it breaks and the fix (the
// archive pushed again with --force, since the tag is still right).
func TestVerifyFindsDeletedBlob(t *testing.T) {
	t.Parallel()
	w, archiveDir, dst := verifyFleet(t, 3)
	ex := w.images[0]
	data, _, err := w.dst.Manifest("d2m/"+ex.Repo, ex.Digest.String())
	must(t, err)
	layer := manifestRefs(t, data).Layers[1].Digest
	must(t, w.dst.DeleteBlob("d2m/"+ex.Repo, layer))

	code, rep, _ := w.verify("--from", "file://"+archiveDir, dst)
	details, fix := rep.problem("missing-blob")
	if code != 8 || len(details) != 1 || !strings.Contains(details[0], layer.String()) || !strings.Contains(details[0], ex.Repo) {
		t.Fatalf("verify after a blob was deleted: exit %d, missing-blob %v, all %+v", code, details, rep.Problems)
	}
	if !strings.Contains(fix, "gapmirror mirror --from file://"+archiveDir+" --force "+dst) {
		t.Errorf("fix %q does not push the archive again with --force", fix)
	}
	// The fix it gives mends the mirror.
	if code, _, _ := w.gapmirror("mirror", "--from", "file://"+archiveDir, "--force", dst); code != 0 {
		t.Fatalf("the fix failed: exit %d", code)
	}
	if code, rep, _ := w.verify("--from", "file://"+archiveDir, dst); code != 0 {
		t.Errorf("verify after the fix: exit %d, %+v", code, rep.Problems)
	}
}

// TestVerifyFindsMovedTag: a tag of the set moved to another image at the
// mirror (someone pushed over it) is found, naming both digests.
func TestVerifyFindsMovedTag(t *testing.T) {
	t.Parallel()
	w, archiveDir, dst := verifyFleet(t, 3)
	ex := w.images[1]
	other, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(4242, 4<<10)}})
	must(t, err)
	must(t, imagebuilder.Push(context.Background(), imagebuilder.Target{URL: w.dst.URL()}, "d2m/"+ex.Repo, ex.Tag, other))

	code, rep, _ := w.verify("--from", "file://"+archiveDir, dst)
	details, fix := rep.problem("tag-moved")
	if code != 8 || len(details) != 1 || !strings.Contains(details[0], other.Digest.String()) || !strings.Contains(details[0], ex.Digest.String()) {
		t.Fatalf("verify after a tag moved: exit %d, tag-moved %v, all %+v", code, details, rep.Problems)
	}
	if strings.Contains(fix, "--force") || !strings.Contains(fix, "--from file://"+archiveDir) {
		t.Errorf("fix %q: pushing the archive again moves the tag back", fix)
	}
	if code, _, _ := w.gapmirror("mirror", "--from", "file://"+archiveDir, dst); code != 0 {
		t.Fatalf("the fix failed: exit %d", code)
	}
	if code, rep, _ := w.verify("--from", "file://"+archiveDir, dst); code != 0 {
		t.Errorf("verify after the fix: exit %d, %+v", code, rep.Problems)
	}
}

// TestVerifyFindsMissingPlatformManifest: a platform manifest deleted from
// a multi-arch image's repository (its index still tagged) is found, in a
// mirror-to-mirror workspace, whose fix is --retry-failed with the file
// verify wrote.
func TestVerifyFindsMissingPlatformManifest(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(4, 16<<10) // the fourth is multi-arch
	ex := w.images[3]
	ws := filepath.Join(w.dir, "ws")
	dst := "docker://" + w.dst.Host() + "/m2m"
	isc := w.isc("")
	if code, _, _ := w.gapmirror("mirror", "-c", isc, "--workspace", "file://"+ws, dst); code != 0 {
		t.Fatalf("mirror-to-mirror exit %d", code)
	}
	data, _, err := w.dst.Manifest("m2m/"+ex.Repo, ex.Digest.String())
	must(t, err)
	arm := manifestRefs(t, data).Manifests[1].Digest
	must(t, w.dst.DeleteManifest("m2m/"+ex.Repo, arm))

	code, rep, _ := w.verify("--workspace", "file://"+ws, dst)
	details, fix := rep.problem("missing-platform-manifest")
	if code != 8 || len(details) != 1 || !strings.Contains(details[0], arm.String()) || !strings.Contains(details[0], "linux/arm64") {
		t.Fatalf("verify after a platform manifest was deleted: exit %d, %v, all %+v", code, details, rep.Problems)
	}
	if rep.RetryFile == "" || !strings.Contains(fix, "--retry-failed "+rep.RetryFile+" --force") {
		t.Fatalf("fix %q does not retry the file verify wrote (%q)", fix, rep.RetryFile)
	}
	if code, _, _ := w.gapmirror("mirror", "--workspace", "file://"+ws, "--retry-failed", rep.RetryFile, "--force", dst); code != 0 {
		t.Fatalf("the fix failed: exit %d", code)
	}
	if code, rep, _ := w.verify("--workspace", "file://"+ws, dst); code != 0 {
		t.Errorf("verify after the fix: exit %d, %+v", code, rep.Problems)
	}
}

// TestVerifyFindsBundleMissing: a bundle image the rebuilt catalog names,
// deleted from the mirror, is found as missing and as named by the catalog
// (read from the mirror), with the operator exit code.
func TestVerifyFindsBundleMissing(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	oc := w.pushCatalog("catalogs/test-index", "v1", catalogOptions{Spec: opSpec})
	isc := w.writeISC("isc.yaml", "  operators:\n  - catalog: "+oc.Ref+"\n    packages:\n    - name: operator-001\n")
	archiveDir := filepath.Join(w.dir, "archive")
	if code, _, _ := w.gapmirror("mirror", "-c", isc, "file://"+archiveDir); code != 0 {
		t.Fatalf("mirror-to-disk exit %d", code)
	}
	dst := "docker://" + w.dst.Host() + "/d2m"
	if code, _, _ := w.gapmirror("mirror", "--from", "file://"+archiveDir, dst); code != 0 {
		t.Fatalf("disk-to-mirror exit %d", code)
	}
	code, rep, _ := w.verify("--from", "file://"+archiveDir, dst)
	if code != 0 || rep.Checked.Catalogs != 1 || rep.Checked.CatalogImages == 0 {
		t.Fatalf("verify of the clean mirror: exit %d, checked %+v, problems %+v", code, rep.Checked, rep.Problems)
	}
	bundle, repo, d := keptBundle(t, filepath.Join(archiveDir, "working-dir"))
	repo = "d2m/" + repo
	must(t, w.dst.DeleteManifest(repo, d))

	code, rep, _ = w.verify("--from", "file://"+archiveDir, dst)
	missing, _ := rep.problem("missing-image")
	named, _ := rep.problem("catalog-image-missing")
	if code != 4 || len(missing) != 1 || !strings.Contains(missing[0], repo) || len(named) != 1 || !strings.Contains(named[0], bundle) || !strings.Contains(named[0], "bundle image") {
		t.Fatalf("verify after a bundle image was deleted: exit %d\nmissing %v\ncatalog %v\nall %+v", code, missing, named, rep.Problems)
	}
}

// TestVerifyFindsForeignSignatureConfigMap: a release signature ConfigMap
// rewritten for another digest (its name and keys) is found, and so is the
// payload left without one; exit code 2 (release).
func TestVerifyFindsForeignSignatureConfigMap(t *testing.T) {
	t.Parallel()
	w := newReleaseWorld(t, []string{"4.18.1"}, 3, false)
	isc := w.releaseISC("isc", "    channels:\n    - name: stable-4.18\n      minVersion: 4.18.1\n      maxVersion: 4.18.1\n")
	ws := filepath.Join(w.dir, "ws")
	dst := "docker://" + w.dst.Host() + "/m2m"
	if code, _, _ := w.run("mirror", "-c", isc, "--workspace", "file://"+ws, dst); code != 0 {
		t.Fatalf("mirror-to-mirror exit %d", code)
	}
	code, rep, _ := w.verify("--workspace", "file://"+ws, dst)
	if code != 0 || rep.Checked.ReleaseSignatures != 1 {
		t.Fatalf("verify of the clean mirror: exit %d, checked %+v, problems %+v", code, rep.Checked, rep.Problems)
	}
	payload := w.payloads["4.18.1"].Digest
	other := digest.FromString("another release")
	cms := filepath.Join(ws, "working-dir", "cluster-resources", "signature-configmap.json")
	data, err := os.ReadFile(cms)
	must(t, err)
	rewritten := strings.ReplaceAll(string(data), "sha256-"+payload.Encoded(), "sha256-"+other.Encoded())
	if rewritten == string(data) {
		t.Fatalf("%s does not name the payload %s:\n%s", cms, payload, data)
	}
	must(t, os.WriteFile(cms, []byte(rewritten), 0o644))

	code, rep, _ = w.verify("--workspace", "file://"+ws, dst)
	details, _ := rep.problem("release-signature")
	joined := strings.Join(details, "\n")
	if code != 2 || len(details) != 2 || !strings.Contains(joined, other.String()+", which is no release payload") || !strings.Contains(joined, "no ConfigMap for this payload") {
		t.Fatalf("verify after the ConfigMap was rewritten: exit %d\n%s\nall %+v", code, joined, rep.Problems)
	}
}

// keptBundle is a bundle image of the set the latest run in the working-dir
// ws recorded: its origin, destination repository and digest.
func keptBundle(t *testing.T, ws string) (origin, repo string, d digest.Digest) {
	t.Helper()
	runs, _ := filepath.Glob(filepath.Join(ws, "runs", "*.json"))
	if len(runs) == 0 {
		t.Fatalf("no run record in %s", ws)
	}
	var rec struct {
		Set struct {
			Images []struct{ Origin, Destination, Digest, Kind string }
		}
	}
	data, err := os.ReadFile(runs[len(runs)-1])
	must(t, err)
	must(t, json.Unmarshal(data, &rec))
	for _, img := range rec.Set.Images {
		if img.Kind == "operator-bundle" {
			repo, _, _ := strings.Cut(img.Destination, ":")
			return img.Origin, repo, digest.Digest(img.Digest)
		}
	}
	t.Fatalf("%s records no bundle image", runs[len(runs)-1])
	return "", "", ""
}

// TestVerifyMirrorDown: a mirror that answers nothing is said once, with
// the registry's answer, as an error of the run (exit 1), not as every
// image missing.
func TestVerifyMirrorDown(t *testing.T) {
	t.Parallel()
	w, archiveDir, dst := verifyFleet(t, 2)
	must(t, w.dst.Close())
	code, out, errOut := w.gapmirror("verify", "--from", "file://"+archiveDir, dst)
	if code != 1 || !strings.Contains(errOut, "answered no image check") || strings.Contains(out, "PROBLEM") {
		t.Errorf("verify of a mirror that is down: exit %d\n%s\n%s", code, out, errOut)
	}
}
