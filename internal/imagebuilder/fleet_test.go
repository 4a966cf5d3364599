package imagebuilder

import (
	"strings"
	"testing"
)

func TestFleet(t *testing.T) {
	fleet := Fleet{Count: 12, Seed: 5, BaseLayerSize: 64 << 10, UniqueLayerSize: 2 << 10, MultiArchEvery: 4}
	images, err := fleet.Build()
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if len(images) != 12 {
		t.Fatalf("%d images, want 12", len(images))
	}
	var multi []string
	base := images[0].Image.Layers[0].Digest
	for i, fi := range images {
		if fi.Tag != "v1" || !strings.HasPrefix(fi.Repo, "example/app-") {
			t.Errorf("image %d named %s:%s", i, fi.Repo, fi.Tag)
		}
		if fi.Index != nil {
			multi = append(multi, fi.Repo)
			if len(fi.Index.Images) != len(OpenShiftPlatforms) {
				t.Errorf("%s: %d platforms, want %d", fi.Repo, len(fi.Index.Images), len(OpenShiftPlatforms))
			}
			if fi.Index.Images[0].Layers[0].Digest != base {
				t.Errorf("%s: amd64 base layer differs from the fleet's", fi.Repo)
			}
			if fi.Index.Images[1].Layers[0].Digest == base {
				t.Errorf("%s: arm64 shares the amd64 base layer", fi.Repo)
			}
			continue
		}
		if fi.Image.Layers[0].Digest != base {
			t.Errorf("%s: base layer %s, want shared %s", fi.Repo, fi.Image.Layers[0].Digest, base)
		}
		if i > 0 && fi.Image.Layers[1].Digest == images[0].Image.Layers[1].Digest {
			t.Errorf("%s: own layer equals app-00's", fi.Repo)
		}
	}
	if got := strings.Join(multi, " "); got != "example/app-03 example/app-07 example/app-11" {
		t.Errorf("multi-arch images %s", got)
	}

	again, err := fleet.Build()
	if err != nil {
		t.Fatalf("Build again: %v", err)
	}
	for i := range images {
		if again[i].Digest() != images[i].Digest() {
			t.Errorf("image %d: digest %s then %s", i, images[i].Digest(), again[i].Digest())
		}
	}
	// 9 single images: 9 configs + 9 own layers; 3 multi: 12 configs + 12 own
	// layers; 4 base layers (one per platform).
	var wantBytes int64
	seen := map[string]bool{}
	for _, fi := range images {
		for _, b := range fi.Blobs() {
			if !seen[b.Digest.String()] {
				seen[b.Digest.String()] = true
				wantBytes += b.Size
			}
		}
	}
	if len(seen) != 9+9+12+12+4 || DistinctBytes(images) != wantBytes {
		t.Errorf("%d distinct blobs (%d bytes), DistinctBytes %d", len(seen), wantBytes, DistinctBytes(images))
	}
}

func TestFleetNamesAndErrors(t *testing.T) {
	images, err := Fleet{Count: 101, RepoPrefix: "bench/img-", Tag: "1.0", Format: FormatDocker}.Build()
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if images[7].Repo != "bench/img-007" || images[100].Repo != "bench/img-100" || images[7].Tag != "1.0" {
		t.Errorf("names %s %s:%s", images[7].Repo, images[100].Repo, images[7].Tag)
	}
	if images[0].MediaType() != MediaTypeDockerManifest || images[0].Ref("r:5000") != "r:5000/bench/img-000:1.0" {
		t.Errorf("media type %s ref %s", images[0].MediaType(), images[0].Ref("r:5000"))
	}
	for name, f := range map[string]Fleet{
		"Fleet.Count":          {Count: -1},
		"Fleet.BaseLayerSize":  {Count: 1, BaseLayerSize: -1},
		"Fleet.MultiArchEvery": {Count: 1, MultiArchEvery: -2},
		"Fleet.Format":         {Count: 1, Format: 7},
	} {
		if _, err := f.Build(); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: error %v", name, err)
		}
	}
}

// BenchmarkRandomLayer measures random layer generation (digests included);
// about 0.5 GB/s per core on the development machine.
func BenchmarkRandomLayer(b *testing.B) {
	const size = 64 << 20
	b.SetBytes(size)
	for i := range b.N {
		if _, err := buildLayer(RandomLayer(uint64(i), size), FormatOCI); err != nil {
			b.Fatal(err)
		}
	}
}
