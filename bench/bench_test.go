package main

import (
	"os"
	"path/filepath"
	"testing"
)

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
	_, n, err := plainCopy(src, dst)
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
