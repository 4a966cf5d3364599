package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/gapmirror/gapmirror/imageset/catalog"
)

// TestMain lets the test binary play the launcher and the filter child, as
// the bench binary does, so the smoke test below measures real processes.
func TestMain(m *testing.M) {
	if os.Getenv(launchEnv) != "" {
		os.Exit(runLauncher())
	}
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	os.Exit(m.Run())
}

// TestCatalogScenarioSmoke runs scenario C on a tiny generated catalog: the
// child filters it, the launcher reports its time and peak RSS.
func TestCatalogScenarioSmoke(t *testing.T) {
	b := &bench{dir: t.TempDir()}
	var err error
	if b.log, err = os.Create(filepath.Join(b.dir, "gapmirror.log")); err != nil {
		t.Fatal(err)
	}
	defer b.log.Close()
	c, err := catalog.Generate(catalog.GenSpec{Seed: 1, Packages: 3, Bundles: 20})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(b.dir, "catalog")
	if err := c.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	r, err := b.measure(context.Background(), "smoke", mustExecutable(t), nil, []string{childEnv + "=gen-select", childDirEnv + "=" + dir})
	if err != nil {
		t.Fatal(err)
	}
	if r.wall <= 0 || r.maxRSS < 1<<20 || r.phases["bundles"] != 60 || r.phases["kept"] <= 0 || r.phases["kept"] >= 60 {
		t.Errorf("child run: wall %v, max RSS %d, phases %v", r.wall, r.maxRSS, r.phases)
	}
	if _, err := b.measure(context.Background(), "smoke", mustExecutable(t), nil, []string{childEnv + "=gen-select", childDirEnv + "=" + filepath.Join(b.dir, "missing")}); err == nil {
		t.Error("a failing child is not reported")
	}
	// The whole scenario, without real catalogs, on 200 generated bundles.
	if err := b.catalogScenario(context.Background(), filepath.Join(b.dir, "no-real-catalogs"), 200, 1); err != nil {
		t.Fatal(err)
	}
}

func mustExecutable(t *testing.T) string {
	t.Helper()
	p, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSmallImagesAreSmallAndDistinct(t *testing.T) {
	images := smallImages(500)
	seen := map[string]bool{}
	for _, si := range images {
		if si.size < 20<<10 || si.size > 100<<10 {
			t.Errorf("%s:%s has %d bytes, want 20–100 KiB", si.repo, si.tag, si.size)
		}
		ref := si.repo + ":" + si.tag
		if seen[ref] {
			t.Errorf("%s appears twice", ref)
		}
		seen[ref] = true
	}
}

func TestPlainCopy(t *testing.T) {
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "copy")
	files := map[string]string{"sha256/aa": "first", "sha256/bb": "second blob"}
	for name, data := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(src, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, n, err := plainCopy(src, dst, true)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(len("first")+len("second blob")) {
		t.Errorf("copied %d bytes, want %d", n, len("first")+len("second blob"))
	}
	for name, data := range files {
		got, err := os.ReadFile(filepath.Join(dst, name))
		if err != nil || string(got) != data {
			t.Errorf("%s: got %q, %v; want %q", name, got, err, data)
		}
	}
}

func TestTail(t *testing.T) {
	if got := tail("a\nb\nc\n", 2); got != "b\nc" {
		t.Errorf("tail = %q, want %q", got, "b\nc")
	}
	if got := tail("a", 5); got != "a" {
		t.Errorf("tail = %q, want %q", got, "a")
	}
}
