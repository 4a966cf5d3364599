package imagebuilder

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// tarFile is one entry read back from a layer.
type tarFile struct {
	name string
	dir  bool
	data []byte
}

// readLayer decompresses (if needed) and untars a layer blob, checking its
// digest and diff ID on the way.
func readLayer(t *testing.T, b Blob) []tarFile {
	t.Helper()
	data, err := b.Bytes()
	if err != nil {
		t.Fatalf("reading layer %s: %v", b.Digest, err)
	}
	if got := digest.SHA256.FromBytes(data); got != b.Digest || int64(len(data)) != b.Size {
		t.Fatalf("layer digest %s size %d, content hashes to %s (%d bytes)", b.Digest, b.Size, got, len(data))
	}
	var raw []byte
	switch b.MediaType {
	case ocispec.MediaTypeImageLayerGzip, MediaTypeDockerLayerGzip:
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("layer %s is not gzip: %v", b.Digest, err)
		}
		if raw, err = io.ReadAll(zr); err != nil {
			t.Fatalf("gunzip layer %s: %v", b.Digest, err)
		}
	case ocispec.MediaTypeImageLayer, mediaTypeDockerLayer:
		raw = data
	default:
		t.Fatalf("unexpected layer media type %q", b.MediaType)
	}
	if got := digest.SHA256.FromBytes(raw); got != b.DiffID {
		t.Fatalf("layer diff ID %s, tar hashes to %s", b.DiffID, got)
	}
	var files []tarFile
	tr := tar.NewReader(bytes.NewReader(raw))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("reading tar of %s: %v", b.Digest, err)
		}
		if !hdr.ModTime.Equal(Epoch) || hdr.Uid != 0 || hdr.Gid != 0 {
			t.Errorf("entry %s: mtime %v uid %d gid %d, want fixed values", hdr.Name, hdr.ModTime, hdr.Uid, hdr.Gid)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("reading %s: %v", hdr.Name, err)
		}
		files = append(files, tarFile{name: hdr.Name, dir: hdr.Typeflag == tar.TypeDir, data: data})
	}
	return files
}

func TestRandomLayerIsDeterministic(t *testing.T) {
	build := func(seed uint64, size int64, uncompressed bool) Blob {
		t.Helper()
		b, err := buildLayer(LayerSpec{Seed: seed, Size: size, Uncompressed: uncompressed}, FormatOCI)
		if err != nil {
			t.Fatalf("buildLayer: %v", err)
		}
		return b
	}
	a, again := build(7, 300<<10, false), build(7, 300<<10, false)
	if a.Digest != again.Digest || a.DiffID != again.DiffID {
		t.Fatalf("same seed and size gave %s and %s", a.Digest, again.Digest)
	}
	for name, other := range map[string]Blob{
		"other seed":   build(8, 300<<10, false),
		"other size":   build(7, 300<<10+1, false),
		"uncompressed": build(7, 300<<10, true),
	} {
		if other.Digest == a.Digest {
			t.Errorf("%s: digest unchanged %s", name, a.Digest)
		}
	}
	if u := build(7, 300<<10, true); u.DiffID != a.DiffID || u.Digest != u.DiffID {
		t.Errorf("uncompressed layer: digest %s diffID %s, want both %s", u.Digest, u.DiffID, a.DiffID)
	}
}

func TestRandomLayerContent(t *testing.T) {
	tests := []struct {
		name         string
		size         int64
		uncompressed bool
		wantFiles    int
		wantType     string
	}{
		{"empty", 0, false, 1, ocispec.MediaTypeImageLayerGzip},
		{"small", 1000, false, 1, ocispec.MediaTypeImageLayerGzip},
		{"split", 1<<20 + 3, false, 4, ocispec.MediaTypeImageLayerGzip},
		{"plain tar", 100 << 10, true, 4, ocispec.MediaTypeImageLayer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := buildLayer(LayerSpec{Seed: 42, Size: tt.size, Uncompressed: tt.uncompressed}, FormatOCI)
			if err != nil {
				t.Fatalf("buildLayer: %v", err)
			}
			if b.MediaType != tt.wantType {
				t.Errorf("media type %q, want %q", b.MediaType, tt.wantType)
			}
			var regular int
			var total int64
			for _, f := range readLayer(t, b) {
				if !f.dir {
					regular++
					total += int64(len(f.data))
				}
			}
			if regular != tt.wantFiles || total != tt.size {
				t.Errorf("%d files with %d bytes, want %d files with %d bytes", regular, total, tt.wantFiles, tt.size)
			}
		})
	}
}

func TestFileLayer(t *testing.T) {
	files := map[string][]byte{
		"/configs/foo/catalog.json":          []byte(`{"schema":"olm.package","name":"foo"}`),
		"configs/bar/catalog.json":           []byte(`{"schema":"olm.package","name":"bar"}`),
		"release-manifests/image-references": []byte("{}"),
		"empty":                              nil,
	}
	b, err := buildLayer(FileLayer(files), FormatOCI)
	if err != nil {
		t.Fatalf("buildLayer: %v", err)
	}
	var names []string
	for _, f := range readLayer(t, b) {
		names = append(names, f.name)
		if want, ok := files[f.name]; ok && !bytes.Equal(f.data, want) {
			t.Errorf("%s: content %q, want %q", f.name, f.data, want)
		}
	}
	want := "configs/ configs/bar/ configs/bar/catalog.json configs/foo/ configs/foo/catalog.json empty release-manifests/ release-manifests/image-references"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("entries\n got %s\nwant %s", got, want)
	}
	again, err := buildLayer(FileLayer(files), FormatOCI)
	if err != nil || again.Digest != b.Digest {
		t.Errorf("rebuilding the same tree gave %s (%v), want %s", again.Digest, err, b.Digest)
	}
}

func TestLayerSpecErrors(t *testing.T) {
	tests := []struct {
		name string
		spec LayerSpec
		want string
	}{
		{"negative size", LayerSpec{Size: -1}, "LayerSpec.Size"},
		{"dot dot", FileLayer(map[string][]byte{"../etc/passwd": nil}), `"../etc/passwd"`},
		{"unclean", FileLayer(map[string][]byte{"a//b": nil}), `"a//b"`},
		{"directory path", FileLayer(map[string][]byte{"a/": nil}), `"a/"`},
		{"empty", FileLayer(map[string][]byte{"": nil}), `""`},
		{"same file twice", FileLayer(map[string][]byte{"a": nil, "/a": nil}), "same file"},
		{"file and directory", FileLayer(map[string][]byte{"a": nil, "a/b": nil}), "also a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Build(ImageSpec{Layers: []LayerSpec{tt.spec}})
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "ImageSpec.Layers[0]") {
				t.Fatalf("error %v, want one naming ImageSpec.Layers[0] and %s", err, tt.want)
			}
		})
	}
}

func TestBuildImage(t *testing.T) {
	tests := []struct {
		name                        string
		format                      Format
		wantManifest, wantConfig    string
		wantLayerGzip, wantLayerTar string
	}{
		{"oci", FormatOCI, ocispec.MediaTypeImageManifest, ocispec.MediaTypeImageConfig, ocispec.MediaTypeImageLayerGzip, ocispec.MediaTypeImageLayer},
		{"docker", FormatDocker, MediaTypeDockerManifest, mediaTypeDockerConfig, MediaTypeDockerLayerGzip, mediaTypeDockerLayer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := ImageSpec{
				Format:   tt.format,
				Platform: Platform{OS: "linux", Architecture: "arm64", Variant: "v8"},
				Layers: []LayerSpec{
					RandomLayer(1, 10<<10),
					{Seed: 2, Size: 5 << 10, Uncompressed: true},
					FileLayer(map[string][]byte{"configs/x.json": []byte("{}")}),
				},
				Labels:     map[string]string{"operators.operatorframework.io.index.configs.v1": "/configs"},
				Entrypoint: []string{"/bin/opm"},
				Cmd:        []string{"serve", "/configs"},
			}
			img, err := Build(spec)
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			if img.MediaType != tt.wantManifest || img.Digest != digest.SHA256.FromBytes(img.Manifest) {
				t.Errorf("manifest %s %s, want media type %s and the digest of its bytes", img.MediaType, img.Digest, tt.wantManifest)
			}
			var m ocispec.Manifest
			if err := json.Unmarshal(img.Manifest, &m); err != nil {
				t.Fatalf("manifest JSON: %v", err)
			}
			if m.SchemaVersion != 2 || m.MediaType != tt.wantManifest || m.Config.MediaType != tt.wantConfig || m.Config.Digest != img.Config.Digest {
				t.Errorf("manifest header %+v / config %+v", m.Versioned, m.Config)
			}
			wantTypes := []string{tt.wantLayerGzip, tt.wantLayerTar, tt.wantLayerGzip}
			if len(m.Layers) != 3 {
				t.Fatalf("manifest has %d layers, want 3", len(m.Layers))
			}
			for i, l := range m.Layers {
				if l.MediaType != wantTypes[i] || l.Digest != img.Layers[i].Digest || l.Size != img.Layers[i].Size {
					t.Errorf("layer %d descriptor %+v, want type %s and blob %s", i, l, wantTypes[i], img.Layers[i].Digest)
				}
			}
			var cfg ocispec.Image
			if err := json.Unmarshal(mustBytes(t, img.Config), &cfg); err != nil {
				t.Fatalf("config JSON: %v", err)
			}
			if cfg.OS != "linux" || cfg.Architecture != "arm64" || cfg.Variant != "v8" {
				t.Errorf("config platform %s/%s/%s", cfg.OS, cfg.Architecture, cfg.Variant)
			}
			if cfg.Config.Labels["operators.operatorframework.io.index.configs.v1"] != "/configs" ||
				strings.Join(cfg.Config.Cmd, " ") != "serve /configs" || strings.Join(cfg.Config.Entrypoint, " ") != "/bin/opm" {
				t.Errorf("config %+v", cfg.Config)
			}
			if cfg.RootFS.Type != "layers" || len(cfg.RootFS.DiffIDs) != 3 || len(cfg.History) != 3 {
				t.Fatalf("rootfs %+v, %d history entries", cfg.RootFS, len(cfg.History))
			}
			for i, l := range img.Layers {
				readLayer(t, l) // checks DiffID against the tar
				if cfg.RootFS.DiffIDs[i] != l.DiffID {
					t.Errorf("diff_ids[%d] = %s, want %s", i, cfg.RootFS.DiffIDs[i], l.DiffID)
				}
			}
			again, err := Build(spec)
			if err != nil || again.Digest != img.Digest {
				t.Errorf("rebuilding gave %s (%v), want %s", again.Digest, err, img.Digest)
			}
		})
	}
}

func TestBuildErrors(t *testing.T) {
	tests := []struct {
		name string
		run  func() error
		want string
	}{
		{"bad format", func() error { _, err := Build(ImageSpec{Format: 9}); return err }, "ImageSpec.Format"},
		{"docker annotations", func() error {
			_, err := Build(ImageSpec{Format: FormatDocker, Annotations: map[string]string{"a": "b"}})
			return err
		}, "ImageSpec.Annotations"},
		{"empty index", func() error { _, err := BuildIndex(IndexSpec{}); return err }, "IndexSpec.Images is empty"},
		{"duplicate platform", func() error {
			_, err := BuildIndex(IndexSpec{Images: []ImageSpec{{}, {Platform: Platform{OS: "linux", Architecture: "amd64"}}}})
			return err
		}, "IndexSpec.Images[1]: platform linux/amd64 already used"},
		{"bad child", func() error {
			_, err := BuildIndex(IndexSpec{Images: []ImageSpec{{Layers: []LayerSpec{{Size: -5}}}}})
			return err
		}, "IndexSpec.Images[0] (linux/amd64): ImageSpec.Layers[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.run()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestBuildIndex(t *testing.T) {
	tests := []struct {
		name      string
		format    Format
		wantIndex string
		wantChild string
	}{
		{"oci index", FormatOCI, ocispec.MediaTypeImageIndex, ocispec.MediaTypeImageManifest},
		{"docker list", FormatDocker, mediaTypeDockerManifestList, MediaTypeDockerManifest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var specs []ImageSpec
			for i, p := range OpenShiftPlatforms {
				specs = append(specs, ImageSpec{Platform: p, Layers: []LayerSpec{RandomLayer(100, 4<<10), RandomLayer(uint64(i), 1<<10)}})
			}
			idx, err := BuildIndex(IndexSpec{Format: tt.format, Images: specs})
			if err != nil {
				t.Fatalf("BuildIndex: %v", err)
			}
			var parsed ocispec.Index
			if err := json.Unmarshal(idx.Manifest, &parsed); err != nil {
				t.Fatalf("index JSON: %v", err)
			}
			if idx.MediaType != tt.wantIndex || parsed.MediaType != tt.wantIndex || idx.Digest != digest.SHA256.FromBytes(idx.Manifest) {
				t.Errorf("index media type %s / %s, digest %s", idx.MediaType, parsed.MediaType, idx.Digest)
			}
			if len(parsed.Manifests) != len(OpenShiftPlatforms) {
				t.Fatalf("%d manifests, want %d", len(parsed.Manifests), len(OpenShiftPlatforms))
			}
			for i, d := range parsed.Manifests {
				img := idx.Images[i]
				p := OpenShiftPlatforms[i]
				if d.Digest != img.Digest || d.MediaType != tt.wantChild || d.Platform == nil ||
					d.Platform.Architecture != p.Architecture || d.Platform.Variant != p.Variant {
					t.Errorf("manifests[%d] = %+v, want %s for %s", i, d, img.Digest, p)
				}
			}
			// Shared base layer: once in Blobs; 4 configs + 1 base + 4 own layers.
			if n := len(idx.Blobs()); n != 9 {
				t.Errorf("Blobs() has %d distinct blobs, want 9", n)
			}
		})
	}
}

// mustBytes is the content of an in-memory blob.
func mustBytes(t *testing.T, b Blob) []byte {
	t.Helper()
	data, err := b.Bytes()
	if err != nil {
		t.Fatalf("blob %s: %v", b.Digest, err)
	}
	return data
}
