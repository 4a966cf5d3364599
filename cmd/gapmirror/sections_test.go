package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/distribution/reference"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/imageset/catalog"
	"github.com/gapmirror/gapmirror/internal/registrytest"
	"github.com/gapmirror/gapmirror/internal/releasetest"
)

// sharedOperand pushes a one-package catalog and returns it with the
// reference (by digest) of an operand image its bundles need.
func (w *world) sharedOperand() (*opCatalog, string) {
	w.t.Helper()
	oc := w.pushCatalog("catalogs/shared-index", "v1", catalogOptions{Spec: catalog.GenSpec{Seed: 8, Packages: 1, Bundles: 2, Channels: 1, RelatedImages: 1,
		SkipRatio: -1, SkipRangeRatio: -1, PrereleaseRatio: -1, DependencyRatio: -1}})
	for _, b := range oc.Cat.Package("operator-000").Bundles {
		for _, ri := range b.RelatedImages {
			if ri.Name == "operand-0" {
				return oc, ri.Image
			}
		}
	}
	w.t.Fatal("generated catalog has no operand image")
	return nil, ""
}

// TestSharedImageFailure: an image both an operator catalog and
// additionalImages need fails to copy: the exit code has the operator and
// the additional-images bits, and the failure names the bundle needing it.
func TestSharedImageFailure(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	oc, shared := w.sharedOperand()
	named, err := reference.ParseNormalizedNamed(shared)
	must(t, err)
	data, _, err := w.up.Manifest(reference.Path(named), named.(reference.Canonical).Digest().String())
	must(t, err)
	var m ocispec.Manifest
	must(t, json.Unmarshal(data, &m))
	// Its own layer (the base layer is shared with every other image).
	w.up.SetWrap(registrytest.NewBlobCorrupter(0, m.Layers[len(m.Layers)-1].Digest).Wrap)

	isc := w.writeISC("isc.yaml", "  additionalImages:\n  - name: "+shared+"\n  operators:\n  - catalog: "+oc.Ref+"\n    full: true\n    packages:\n    - name: operator-000\n")
	code, stdout, _ := w.gapmirror("mirror", "-c", isc, "--workspace", "file://"+filepath.Join(w.dir, "ws"), "--retry-times", "1", "docker://"+w.dst.Host()+"/m")
	if code != 4|8 {
		t.Errorf("exit %d, want 12 (operator 4 | additional images 8)", code)
	}
	if !strings.Contains(stdout, "FAILED") || !strings.Contains(stdout, "needed by") || !strings.Contains(stdout, "mirror.additionalImages[0]") || !strings.Contains(stdout, "package operator-000 bundle") {
		t.Errorf("the failure does not say both sections need the image:\n%s", stdout)
	}
	if strings.Count(stdout, "FAILED") != 1 {
		t.Errorf("one image failed, reported %d times:\n%s", strings.Count(stdout, "FAILED"), stdout)
	}
}

// TestBlockedAcrossSections: one blockedImages list keeps the matching
// images of every section out (a catalog operand, release components); the
// summary says so; disk-to-mirror writes the same IDMS as mirror-to-mirror,
// with no entry covering a blocked image.
func TestBlockedAcrossSections(t *testing.T) {
	t.Parallel()
	w := newReleaseWorld(t, []string{"4.18.1", "4.18.2"}, 3, false)
	oc, operand := w.sharedOperand()
	isc := w.writeISC("isc.yaml", "  operators:\n  - catalog: "+oc.Ref+"\n    packages:\n    - name: operator-000\n"+
		"  platform:\n    channels:\n    - name: stable-4.18\n      minVersion: 4.18.1\n  blockedImages:\n  - name: operand-0\n  - name: "+releasetest.ComponentRepo+"\n")
	out := filepath.Join(w.dir, "out")
	code, m2dOut, _ := w.run("mirror", "-c", isc, "file://"+out)
	if code != 0 {
		t.Fatalf("mirror-to-disk exit %d", code)
	}
	code, d2mOut, _ := w.run("mirror", "--from", "file://"+out, "docker://"+w.dst.Host()+"/d2m")
	if code != 0 {
		t.Fatalf("disk-to-mirror exit %d", code)
	}
	code, m2mOut, _ := w.run("mirror", "-c", isc, "--workspace", "file://"+filepath.Join(w.dir, "ws"), "docker://"+w.dst.Host()+"/m2m")
	if code != 0 {
		t.Fatalf("mirror-to-mirror exit %d", code)
	}
	// 4 distinct components (two are the same image in both releases) and the operand.
	for _, stdout := range []string{m2dOut, d2mOut, m2mOut} {
		if !strings.Contains(stdout, "5 images left out by mirror.blockedImages") {
			t.Errorf("the summary does not say what was blocked:\n%s", stdout)
		}
	}
	if _, desc, _ := w.gapmirror("describe", "--quick", "file://"+out); !strings.Contains(desc, "blocked: 5 images kept out by mirror.blockedImages") {
		t.Errorf("describe does not say what was blocked:\n%s", desc)
	}
	named, err := reference.ParseNormalizedNamed(operand)
	must(t, err)
	for _, prefix := range []string{"d2m", "m2m"} {
		if _, err := w.dst.ManifestDigest(prefix+"/"+reference.Path(named), named.(reference.Canonical).Digest().String()); err == nil {
			t.Errorf("%s: blocked %s was mirrored", prefix, operand)
		}
		if tags, _ := w.dst.Tags(prefix + "/openshift/release"); len(tags) != 0 {
			t.Errorf("%s: blocked release components were mirrored: %v", prefix, tags)
		}
		for _, v := range []string{"4.18.1", "4.18.2"} {
			p := w.payloads[v]
			w.present(w.dst, prefix+"/openshift/release-images", p.Tag, p.Digest)
		}
	}
	idms := func(dir string) string {
		return resourceFile(t, filepath.Join(dir, "working-dir", "cluster-resources", "idms-gapmirror.yaml"))
	}
	d2m, m2m := idms(out), idms(filepath.Join(w.dir, "ws"))
	if strings.ReplaceAll(d2m, "/d2m", "/X") != strings.ReplaceAll(m2m, "/m2m", "/X") {
		t.Errorf("disk-to-mirror and mirror-to-mirror IDMS differ:\n%s\n---\n%s", d2m, m2m)
	}
	for _, entry := range []string{"source: " + named.Name() + "\n", "source: " + w.up.Host() + "/operator-000\n", releasetest.ComponentRepo} {
		if strings.Contains(d2m, entry) {
			t.Errorf("disk-to-mirror IDMS has an entry covering a blocked image (%q):\n%s", entry, d2m)
		}
	}
}

// TestMixedFailures: a release refused for its signature, a catalog's image
// missing upstream and an additional image that does not exist: each is
// reported once, the rest is mirrored, and the exit code has the release,
// operator and additional-images bits.
func TestMixedFailures(t *testing.T) {
	t.Parallel()
	w := newReleaseWorld(t, []string{"4.18.1", "4.18.2"}, 2, false)
	w.sigs.Put(w.payloads["4.18.2"].Digest.String())
	oc := w.pushCatalog("catalogs/mixed-index", "v1", catalogOptions{Spec: smallSpec, Skip: func(i int, ref string) bool { return i == 0 }})
	w.pushFleet(2, 4<<10)
	isc := w.writeISC("isc.yaml", "  additionalImages:\n  - name: "+w.images[0].Ref+"\n  - name: "+w.up.Host()+"/apps/nowhere:v1\n"+
		"  operators:\n  - catalog: "+oc.Ref+"\n    full: true\n"+
		"  platform:\n    channels:\n    - name: stable-4.18\n      minVersion: 4.18.1\n")
	out := filepath.Join(w.dir, "out")
	for _, c := range []struct {
		name string
		args []string
	}{
		{"mirror-to-disk", []string{"-c", isc, "file://" + out}},
		{"mirror-to-mirror", []string{"-c", isc, "--workspace", "file://" + filepath.Join(w.dir, "ws"), "docker://" + w.dst.Host() + "/m2m"}},
	} {
		code, stdout, _ := w.run(append([]string{"mirror"}, c.args...)...)
		if code != 2|4|8 {
			t.Errorf("%s: exit %d, want 14 (release 2 | operator 4 | additional images 8)", c.name, code)
		}
		for _, want := range []string{c.name + ": ", "3 failed", w.up.Host() + "/apps/nowhere:v1 (mirror.additionalImages[1])",
			"release 4.18.2 (arch amd64", "(needed by operator catalog " + oc.Ref + ": package operator-000 bundle ", "1 release(s) refused for their signatures"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("%s: the summary does not say %q:\n%s", c.name, want, stdout)
			}
		}
		// Each cause once: the release's and the two missing images'
		// (one registry, one answer) may share a line.
		if n := strings.Count(stdout, "FAILED "); n < 2 || n > 3 {
			t.Errorf("%s: %d FAILED lines for 3 failures", c.name, n)
		}
	}
	w.present(w.dst, "m2m/"+w.images[0].Repo, w.images[0].Tag, w.images[0].Digest)
	if _, desc, _ := w.gapmirror("describe", "--quick", "file://"+out); !strings.Contains(desc, "partial: mirror-to-disk left out 3 images") {
		t.Errorf("describe does not say the archive is partial:\n%s", desc)
	}
	// Disk-to-mirror pushes what the archive has and says what it lacks.
	code, stdout, _ := w.run("mirror", "--from", "file://"+out, "docker://"+w.dst.Host()+"/d2m")
	if code != 0 || !strings.Contains(stdout, "the archive is partial: mirror-to-disk left out 3 images") || !strings.Contains(stdout, "apps/nowhere:v1") {
		t.Errorf("disk-to-mirror of a partial archive: exit %d, summary:\n%s", code, stdout)
	}
	w.present(w.dst, "d2m/openshift/release-images", w.payloads["4.18.1"].Tag, w.payloads["4.18.1"].Digest)
}

// TestPruneKeepsWhatAnotherSectionNeeds: an operand mirrored both under an
// additional image's tag and as the catalog's digest tag; when the
// additional image leaves the set, --prune removes only its tag, and the
// image the catalog still needs stays, complete.
func TestPruneKeepsWhatAnotherSectionNeeds(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	oc, operand := w.sharedOperand()
	named, err := reference.ParseNormalizedNamed(operand)
	must(t, err)
	d := named.(reference.Canonical).Digest()
	catalogOnly := "  operators:\n  - catalog: " + oc.Ref + "\n    full: true\n    packages:\n    - name: operator-000\n"
	both := w.writeISC("both.yaml", "  additionalImages:\n  - name: "+operand+"\n    targetTag: pinned\n"+catalogOnly)
	ws, dst := "file://"+filepath.Join(w.dir, "ws"), "docker://"+w.dst.Host()+"/m"
	if code, _, _ := w.gapmirror("mirror", "-c", both, "--workspace", ws, dst); code != 0 {
		t.Fatalf("first mirror-to-mirror exit %d", code)
	}
	repo := "m/" + reference.Path(named)
	w.present(w.dst, repo, "pinned", d)
	w.present(w.dst, repo, imageset.DigestTag(d), d)
	code, stdout, _ := w.gapmirror("mirror", "-c", w.writeISC("catalog.yaml", catalogOnly), "--workspace", ws, "--prune", dst)
	if code != 0 {
		t.Fatalf("mirror-to-mirror --prune exit %d", code)
	}
	w.present(w.dst, repo, imageset.DigestTag(d), d)
	if got, err := w.dst.ManifestDigest(repo, "pinned"); err == nil {
		t.Errorf("%s:pinned still names %s after the additional image left the set", repo, got)
	}
	if !strings.Contains(stdout, "delete tag") {
		t.Errorf("the prune did not delete just the tag:\n%s", stdout)
	}
}

// TestDeleteKeepsWhatAnotherSectionNeeds: delete.additionalImages naming an
// image the operator catalog also needs (the same destination: the catalog
// names it by digest too) keeps it, saying which bundle uses it; an image
// only the additional images of the latest run list is deleted, with a note
// that the configuration still lists it. Checked at the registry.
func TestDeleteKeepsWhatAnotherSectionNeeds(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	oc, operand := w.sharedOperand()
	w.pushFleet(1, 8<<10)
	other := w.images[0]
	named, err := reference.ParseNormalizedNamed(operand)
	must(t, err)
	d := named.(reference.Canonical).Digest()
	repo := "m/" + reference.Path(named)
	isc := w.writeISC("both.yaml", "  additionalImages:\n  - name: "+operand+"\n  - name: "+other.Ref+
		"\n  operators:\n  - catalog: "+oc.Ref+"\n    full: true\n    packages:\n    - name: operator-000\n")
	ws, dst := filepath.Join(w.dir, "ws"), "docker://"+w.dst.Host()+"/m"
	if code, _, _ := w.gapmirror("mirror", "-c", isc, "--workspace", "file://"+ws, dst); code != 0 {
		t.Fatalf("mirror-to-mirror exit %d", code)
	}
	w.present(w.dst, repo, imageset.DigestTag(d), d)

	// Only the shared operand: nothing to delete, said so.
	code, _, stderr := w.gapmirror("delete", "-c", w.disc("operand.yaml", "  additionalImages:\n  - name: "+operand+"\n"), "--generate", "--workspace", "file://"+ws, dst)
	if code != 1 || !strings.Contains(stderr, "nothing to delete") || !strings.Contains(stderr, "package operator-000") {
		t.Errorf("generate for the shared operand alone: exit %d (want 1)\n%s", code, stderr)
	}
	disc := w.disc("both.yaml", "  additionalImages:\n  - name: "+operand+"\n  - name: "+other.Ref+"\n")
	code, stdout, _ := w.gapmirror("delete", "-c", disc, "--generate", "--workspace", "file://"+ws, dst)
	if code != 0 || !strings.Contains(stdout, "delete plan: 1 images") {
		t.Fatalf("generate: exit %d", code)
	}
	for _, want := range []string{"keep            " + reference.Path(named) + ":" + imageset.DigestTag(d), "still used by operator catalog " + oc.Ref + ": package operator-000",
		"note: " + other.Repo + ":" + other.Tag + "@" + other.Digest.String() + " (delete.additionalImages[1]) is still mirror.additionalImages[1] of the latest run's ImageSetConfiguration"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the plan does not say %q:\n%s", want, stdout)
		}
	}
	if code, _, _ := w.gapmirror("delete", "--delete-yaml-file", filepath.Join(ws, "working-dir", "delete", "delete-images.yaml"), dst); code != 0 {
		t.Fatalf("delete: exit %d", code)
	}
	w.present(w.dst, repo, imageset.DigestTag(d), d)
	w.gone(w.dst, "m/"+other.Repo, other.Tag, other.Digest)
}
