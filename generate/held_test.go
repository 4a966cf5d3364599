package generate

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/gapmirror/gapmirror/imageset"
)

// TestHoldMirrorSets: a run whose images failed replaces the IDMS/ITMS of
// an earlier run only when the failures change nothing in them; else the
// earlier files stay (WriteKeeping) and the failed images are named.
func TestHoldMirrorSets(t *testing.T) {
	dir := t.TempDir()
	a := img(kAdd, "quay.io/team/a@"+dg("a"), "team/a:sha256-"+dg("a")[7:])
	b := img(kAdd, "quay.io/team/b@"+dg("b"), "team/b:sha256-"+dg("b")[7:])
	other := img(kAdd, "docker.io/org/c@"+dg("c"), "org/c:sha256-"+dg("c")[7:])
	build := func(done []imageset.Image, failed ...imageset.Image) (Files, Input) {
		in := Input{Set: &imageset.Set{Images: done}, MirrorRoot: testRoot, Meta: testMeta}
		for _, f := range failed {
			in.NotMirrored = append(in.NotMirrored, f.Origin)
		}
		files, err := Manifests(in)
		if err != nil {
			t.Fatal(err)
		}
		return files, in
	}

	// No earlier files: a first run writes what it has.
	files, in := build([]imageset.Image{a, other}, b)
	keep, held, err := HoldMirrorSets(files, dir, in, []imageset.Image{b})
	if err != nil || keep != nil || held != nil || files[fileIDMS] == nil {
		t.Fatalf("first run: keep %v held %v err %v", keep, held, err)
	}
	must(t, files.Write(dir))
	before, err := os.ReadFile(filepath.Join(dir, fileIDMS))
	must(t, err)

	// b fails now: the IDMS would lose quay.io/team/b, so it stays as it was.
	files, in = build([]imageset.Image{a, other}, b)
	keep, held, err = HoldMirrorSets(files, dir, in, []imageset.Image{b})
	if err != nil || !reflect.DeepEqual(keep, []string{fileIDMS}) || !reflect.DeepEqual(held, []string{b.Origin}) {
		t.Fatalf("b failed: keep %v held %v err %v", keep, held, err)
	}
	if _, ok := files[fileIDMS]; ok {
		t.Error("the held IDMS is still in the files to write")
	}
	must(t, files.WriteKeeping(dir, keep...))
	after, err := os.ReadFile(filepath.Join(dir, fileIDMS))
	must(t, err)
	if string(after) != string(before) {
		t.Errorf("IDMS rewritten by a run whose referenced image failed:\n%s", after)
	}

	// A failure the mirror sets do not reference (a catalog image, which
	// has no entry, in a namespace of its own): they are written as usual.
	cat := img(imageset.KindOperatorCatalog, "quay.io/catalogs/index@"+dg("d"), "catalogs/index:v1")
	files, in = build([]imageset.Image{a, b, other}, cat)
	keep, held, err = HoldMirrorSets(files, dir, in, []imageset.Image{cat})
	if err != nil || keep != nil || held != nil {
		t.Errorf("unreferenced failure: keep %v held %v err %v", keep, held, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
