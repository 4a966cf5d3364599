package imagebuilder

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// readIndexJSON reads a layout's index.json.
func readIndexJSON(t *testing.T, dir string) ocispec.Index {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatalf("reading index.json: %v", err)
	}
	var idx ocispec.Index
	if err := json.Unmarshal(data, &idx); err != nil {
		t.Fatalf("index.json: %v", err)
	}
	return idx
}

// checkLayoutBlob checks that the layout holds d with matching content.
func checkLayoutBlob(t *testing.T, dir string, d digest.Digest) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "blobs", "sha256", d.Encoded()))
	if err != nil {
		t.Fatalf("blob %s: %v", d, err)
	}
	if got := digest.SHA256.FromBytes(data); got != d {
		t.Fatalf("blob file %s hashes to %s", d, got)
	}
}

func TestWriteLayout(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "layout")
	img, err := Build(ImageSpec{Layers: []LayerSpec{FileLayer(map[string][]byte{"configs/a/catalog.json": []byte("{}")})}})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	idx, err := BuildIndex(IndexSpec{Images: []ImageSpec{
		{Layers: []LayerSpec{RandomLayer(1, 2048)}},
		{Platform: Platform{OS: "linux", Architecture: "s390x"}, Layers: []LayerSpec{RandomLayer(2, 2048)}},
	}})
	if err != nil {
		t.Fatalf("BuildIndex: %v", err)
	}
	if err := WriteLayout(dir, "catalog:v1", img); err != nil {
		t.Fatalf("WriteLayout: %v", err)
	}
	if err := WriteIndexLayout(dir, "multi", idx); err != nil {
		t.Fatalf("WriteIndexLayout: %v", err)
	}

	layout, err := os.ReadFile(filepath.Join(dir, "oci-layout"))
	if err != nil || string(layout) != `{"imageLayoutVersion":"1.0.0"}` {
		t.Fatalf("oci-layout = %q (%v)", layout, err)
	}
	index := readIndexJSON(t, dir)
	if len(index.Manifests) != 2 {
		t.Fatalf("index.json has %d entries, want 2", len(index.Manifests))
	}
	wants := []struct {
		name      string
		digest    digest.Digest
		mediaType string
	}{
		{"catalog:v1", img.Digest, ocispec.MediaTypeImageManifest},
		{"multi", idx.Digest, ocispec.MediaTypeImageIndex},
	}
	for i, want := range wants {
		got := index.Manifests[i]
		if got.Annotations[ocispec.AnnotationRefName] != want.name || got.Digest != want.digest || got.MediaType != want.mediaType {
			t.Errorf("index.json entry %d = %+v, want %s %s", i, got, want.name, want.digest)
		}
		checkLayoutBlob(t, dir, want.digest)
	}
	for _, b := range append(img.Blobs(), idx.Blobs()...) {
		checkLayoutBlob(t, dir, b.Digest)
	}
	for _, child := range idx.Images {
		checkLayoutBlob(t, dir, child.Digest)
	}

	// Writing another image under an existing name replaces the entry.
	other, err := Build(ImageSpec{Layers: []LayerSpec{RandomLayer(3, 100)}})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if err := WriteLayout(dir, "catalog:v1", other); err != nil {
		t.Fatalf("WriteLayout again: %v", err)
	}
	index = readIndexJSON(t, dir)
	if len(index.Manifests) != 2 || index.Manifests[1].Digest != other.Digest || index.Manifests[0].Digest != idx.Digest {
		t.Errorf("after replacing catalog:v1, index.json = %+v", index.Manifests)
	}
}

func TestWriteLayoutRejectsBadIndex(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "index.json"), []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	img, err := Build(ImageSpec{})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if err := WriteLayout(dir, "x", img); err == nil {
		t.Fatal("WriteLayout over a broken index.json succeeded, want an error")
	}
}
