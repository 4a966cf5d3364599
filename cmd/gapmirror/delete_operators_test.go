package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/imageset/catalog"
	"github.com/gapmirror/gapmirror/imageset/fbc"
	"github.com/gapmirror/gapmirror/internal/fixtures"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// opDeleteWorld is a catalog of three packages mirrored mirror-to-mirror
// with two of them (every bundle); every bundle of the second package also
// names one related image of the first (shared).
type opDeleteWorld struct {
	*world
	oc         *opCatalog
	ws, root   string
	pkgA, pkgB string
	shared     string
}

func newOpDeleteWorld(t *testing.T) *opDeleteWorld {
	w := &opDeleteWorld{world: newWorld(t, registrytest.Options{})}
	w.pkgA, w.pkgB = catalog.GenPackageName(0), catalog.GenPackageName(1)
	w.oc = w.pushCatalog("catalogs/test-index", "v1", catalogOptions{
		Spec: catalog.GenSpec{Seed: 9, Packages: 3, Bundles: 4, RelatedImages: 1, DependencyRatio: -1},
		Mutate: func(c *fbc.Catalog) {
			a := c.Package(w.pkgA).Bundles[0]
			for _, ri := range a.RelatedImages {
				if ri.Image != a.Image {
					w.shared = ri.Image
					break
				}
			}
			for _, b := range c.Package(w.pkgB).Bundles {
				b.RelatedImages = append(b.RelatedImages, fbc.RelatedImage{Name: "shared", Image: w.shared})
			}
		},
	})
	if w.shared == "" {
		t.Fatal("the generated catalog gave the first package no related image to share")
	}
	w.ws = filepath.Join(w.dir, "ws")
	w.root = w.dst.Host() + "/m2m"
	isc := w.writeISC("isc.yaml", "  operators:\n  - catalog: "+w.oc.Ref+"\n    full: true\n    packages:\n    - name: "+w.pkgA+"\n    - name: "+w.pkgB+"\n")
	if code, _, _ := w.gapmirror("mirror", "-c", isc, "--workspace", "file://"+w.ws, "docker://"+w.root); code != 0 {
		t.Fatal("mirror-to-mirror failed")
	}
	return w
}

// at is where a catalog's image reference is mirrored, and its digest.
func (w *opDeleteWorld) at(ref string) (string, digest.Digest) {
	named, err := reference.ParseNormalizedNamed(ref)
	must(w.t, err)
	return "m2m/" + reference.Path(named), named.(reference.Canonical).Digest()
}

// imagesOf lists the bundle and related images of a package.
func (w *opDeleteWorld) imagesOf(pkg string) []string {
	var out []string
	for _, b := range w.oc.Cat.Package(pkg).Bundles {
		out = append(out, append([]string{b.Image}, fixtures.RelatedOf(b)...)...)
	}
	return out
}

// TestDeleteOperatorPackage: delete.operators naming one of the two
// mirrored packages, generated (without the local store: the catalog is
// read from the mirror by its recorded digest), previewed and executed,
// deletes that package's bundle and related images and nothing else: the
// other package's images, the related image both use, and the catalog
// image stay. The deletion is recorded and the images forgotten.
func TestDeleteOperatorPackage(t *testing.T) {
	t.Parallel()
	w := newOpDeleteWorld(t)
	catDigest, err := w.dst.ManifestDigest("m2m/catalogs/test-index", "v1")
	must(t, err)
	// No local store: delete must read the catalog from the mirror.
	must(t, os.RemoveAll(filepath.Join(w.dir, "cache")))

	disc := w.disc("disc.yaml", "  operators:\n  - catalog: "+w.oc.Ref+"\n    full: true\n    packages:\n    - name: "+w.pkgA+"\n")
	dst := "docker://" + w.root
	code, stdout, _ := w.gapmirror("delete", "-c", disc, "--generate", "--workspace", "file://"+w.ws, dst)
	if code != 0 {
		t.Fatalf("generate: exit %d", code)
	}
	sharedRepo, sharedDigest := w.at(w.shared)
	if !strings.Contains(stdout, "still used by operator catalog "+w.oc.Ref+": package "+w.pkgB) || !strings.Contains(stdout, sharedRepo) {
		t.Errorf("the preview does not say the shared image %s stays for %s:\n%s", w.shared, w.pkgB, stdout)
	}
	plan := filepath.Join(w.ws, "working-dir", "delete", "delete-images.yaml")
	data, err := os.ReadFile(plan)
	must(t, err)
	if !strings.Contains(string(data), "delete.operators[0] (package "+w.pkgA) || strings.Contains(string(data), "imageReference: docker://"+w.root+"/catalogs/") {
		t.Errorf("the plan does not list %s's images by delete.operators[0], or names the catalog image:\n%s", w.pkgA, data)
	}
	// Nothing deleted yet.
	for _, ref := range w.imagesOf(w.pkgA) {
		repo, d := w.at(ref)
		if _, err := w.dst.ManifestDigest(repo, d.String()); err != nil {
			t.Fatalf("generate deleted %s: %v", ref, err)
		}
	}
	if code, stdout, _ := w.gapmirror("delete", "--delete-yaml-file", plan, "--dry-run", dst); code != 0 || !strings.Contains(stdout, "dry run") {
		t.Errorf("dry run: exit %d", code)
	}
	if code, _, _ := w.gapmirror("delete", "--delete-yaml-file", plan, dst); code != 0 {
		t.Fatalf("execute: exit %d", code)
	}

	gone := 0
	for _, ref := range w.imagesOf(w.pkgA) {
		if ref == w.shared {
			continue
		}
		repo, d := w.at(ref)
		w.gone(w.dst, repo, imageset.DigestTag(d), d)
		gone++
	}
	if gone < 8 {
		t.Errorf("only %d images of %s checked gone: the catalog is too small to mean anything", gone, w.pkgA)
	}
	w.present(w.dst, sharedRepo, imageset.DigestTag(sharedDigest), sharedDigest)
	for _, ref := range w.imagesOf(w.pkgB) {
		repo, d := w.at(ref)
		w.present(w.dst, repo, imageset.DigestTag(d), d)
	}
	w.present(w.dst, "m2m/catalogs/test-index", "v1", catDigest)

	if files, _ := filepath.Glob(filepath.Join(w.ws, "working-dir", "delete", "*-deleted.json")); len(files) != 1 {
		t.Errorf("deletion records: %v", files)
	}
	rec := readFile(t, filepath.Join(w.ws, "working-dir", "mirrors", strings.NewReplacer("/", "_", ":", "_").Replace(w.root)+".json"))
	a0, _ := w.at(w.oc.Cat.Package(w.pkgA).Bundles[0].Image)
	if strings.Contains(rec, strings.TrimPrefix(a0, "m2m/")+":") {
		t.Errorf("the mirror record still lists deleted bundle images of %s", w.pkgA)
	}
	// Asked again, only the shared image is left, and it stays.
	code, _, stderr := w.gapmirror("delete", "-c", disc, "--generate", "--workspace", "file://"+w.ws, dst)
	if code != 1 || !strings.Contains(stderr, "nothing to delete") || !strings.Contains(stderr, "still used by") || !strings.Contains(stderr, sharedRepo[len("m2m/"):]) {
		t.Errorf("generate for a deleted package: exit %d\n%s", code, stderr)
	}
}

// TestDeleteOperatorBadInput: a package the catalog lacks, one it has but
// this workspace did not mirror, a catalog the workspace never mirrored and
// a version range selecting nothing are refused naming the field, and
// nothing is deleted. (Here the mirrored catalog is read from the store.)
func TestDeleteOperatorBadInput(t *testing.T) {
	t.Parallel()
	w := newOpDeleteWorld(t)
	dst := "docker://" + w.root
	cases := []struct {
		name, body string
		want       []string
	}{
		{"unknown package", "  - catalog: " + w.oc.Ref + "\n    packages:\n    - name: " + w.pkgA + "\n    - name: no-such-operator\n",
			[]string{"delete.operators[0].packages[1]", "no-such-operator", "not in the catalog"}},
		{"unmirrored package", "  - catalog: " + w.oc.Ref + "\n    packages:\n    - name: " + catalog.GenPackageName(2) + "\n",
			[]string{"delete.operators[0].packages[0]", catalog.GenPackageName(2)}},
		{"unknown catalog", "  - catalog: " + w.up.Host() + "/catalogs/other-index:v1\n",
			[]string{"delete.operators[0].catalog", "other-index:v1", "was not mirrored to " + w.root, "catalogs it mirrored there: " + w.oc.Ref}},
		{"empty range", "  - catalog: " + w.oc.Ref + "\n    packages:\n    - name: " + w.pkgA + "\n      minVersion: 99.0.0\n",
			[]string{"delete.operators[0].packages[0]", "selects no bundle"}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			disc := w.disc("bad"+string(rune('0'+i))+".yaml", "  operators:\n"+c.body)
			code, _, stderr := w.gapmirror("delete", "-c", disc, "--generate", "--workspace", "file://"+w.ws, dst)
			if code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			for _, s := range c.want {
				if !strings.Contains(stderr, s) {
					t.Errorf("error does not mention %q:\n%s", s, stderr)
				}
			}
			if strings.Contains(stderr, "panic") {
				t.Errorf("panic:\n%s", stderr)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(w.ws, "working-dir", "delete", "delete-images.yaml")); err == nil {
		t.Errorf("a plan was written for a refused configuration")
	}
	for _, ref := range w.imagesOf(w.pkgA) {
		repo, d := w.at(ref)
		w.present(w.dst, repo, imageset.DigestTag(d), d)
	}
}
