package catalogimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/image/v5/pkg/compression"
	"go.podman.io/storage/pkg/archive"

	"github.com/gapmirror/gapmirror/imageset/catalog"
	"github.com/gapmirror/gapmirror/imageset/fbc"
	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/opmtest"
)

// ---------------------------------------------------------------------------
// Test fixtures: an in-memory blob store and hand-made layers and images.

// memBlobs is a Blobs over a map that verifies every Put.
type memBlobs struct {
	mu sync.Mutex
	m  map[digest.Digest][]byte
}

func newMemBlobs() *memBlobs { return &memBlobs{m: map[digest.Digest][]byte{}} }

func (s *memBlobs) Has(d digest.Digest) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[d]
	return ok
}

func (s *memBlobs) Open(d digest.Digest) (io.ReadCloser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	data, ok := s.m[d]
	if !ok {
		return nil, fmt.Errorf("blob %s: %w", d, fs.ErrNotExist)
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

func (s *memBlobs) Put(d digest.Digest, size int64, r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if got := digest.FromBytes(data); got != d {
		return fmt.Errorf("put %s: content has digest %s", d, got)
	}
	if size >= 0 && int64(len(data)) != size {
		return fmt.Errorf("put %s: %d bytes, want %d", d, len(data), size)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[d] = data
	return nil
}

func (s *memBlobs) read(t *testing.T, d digest.Digest) []byte {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	data, ok := s.m[d]
	if !ok {
		t.Fatalf("blob %s is not in the store", d)
	}
	return data
}

func (s *memBlobs) add(t *testing.T, data []byte) digest.Digest {
	t.Helper()
	d := digest.FromBytes(data)
	if err := s.Put(d, int64(len(data)), bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	return d
}

func (s *memBlobs) addImage(t *testing.T, img *imagebuilder.Image) digest.Digest {
	t.Helper()
	for _, b := range img.Blobs() {
		data, err := b.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		s.add(t, data)
	}
	return s.add(t, img.Manifest)
}

func (s *memBlobs) addIndex(t *testing.T, idx *imagebuilder.Index) digest.Digest {
	t.Helper()
	for _, img := range idx.Images {
		s.addImage(t, img)
	}
	return s.add(t, idx.Manifest)
}

// entry is one tar entry of a hand-made layer.
type entry struct {
	name string
	typ  byte
	mode int64
	body string
	link string
}

func file(name, body string) entry {
	return entry{name: name, typ: tar.TypeReg, mode: 0o644, body: body}
}
func dir(name string, mode int64) entry { return entry{name: name, typ: tar.TypeDir, mode: mode} }
func whiteout(name string) entry        { return file(name, "") }
func symlink(name, target string) entry {
	return entry{name: name, typ: tar.TypeSymlink, mode: 0o777, link: target}
}
func hardlink(name, target string) entry {
	return entry{name: name, typ: tar.TypeLink, mode: 0o644, link: target}
}

// testLayer is a hand-made layer blob.
type testLayer struct {
	mediaType string
	data      []byte
	diffID    digest.Digest
}

// rawLayer makes a layer holding entries in the given order, compressed
// with algo ("gzip", "zstd" or "" for none).
func rawLayer(t *testing.T, algo string, entries ...entry) testLayer {
	t.Helper()
	var plain bytes.Buffer
	tw := tar.NewWriter(&plain)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Linkname: e.link, ModTime: imagebuilder.Epoch}
		if e.typ == tar.TypeReg {
			hdr.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, e.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	data := plain.Bytes()
	mediaType := ocispec.MediaTypeImageLayer
	if algo != "" {
		alg, err := compression.AlgorithmByName(algo)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		w, err := compression.CompressStream(&out, alg, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		data = out.Bytes()
		mediaType += "+" + algo
	}
	return testLayer{mediaType: mediaType, data: data, diffID: digest.FromBytes(plain.Bytes())}
}

// rawImage stores an OCI image of layers with the given labels and command.
func rawImage(t *testing.T, s *memBlobs, labels map[string]string, cmd []string, layers ...testLayer) digest.Digest {
	t.Helper()
	cfg := ocispec.Image{
		Created:  &imagebuilder.Epoch,
		Platform: ocispec.Platform{OS: "linux", Architecture: "amd64"},
		Config:   ocispec.ImageConfig{Labels: labels, Entrypoint: []string{"/bin/opm"}, Cmd: cmd},
		RootFS:   ocispec.RootFS{Type: "layers"},
	}
	m := ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest}
	for _, l := range layers {
		cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, l.diffID)
		m.Layers = append(m.Layers, ocispec.Descriptor{MediaType: l.mediaType, Digest: s.add(t, l.data), Size: int64(len(l.data))})
	}
	cfgData, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m.Config = ocispec.Descriptor{MediaType: ocispec.MediaTypeImageConfig, Digest: s.add(t, cfgData), Size: int64(len(cfgData))}
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return s.add(t, data)
}

var catalogLabels = map[string]string{ConfigsLabel: "/configs"}

// readTree is every file and directory under root: path → content, "<dir>"
// for directories.
func readTree(t *testing.T, root string) map[string]string {
	t.Helper()
	tree := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case d.IsDir():
			tree[filepath.ToSlash(rel)] = "<dir>"
		case d.Type().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			tree[filepath.ToSlash(rel)] = string(data)
		default:
			tree[filepath.ToSlash(rel)] = "<" + d.Type().String() + ">"
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

func assertTree(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[k]; !ok {
			t.Errorf("%s: missing %s", what, k)
		} else if g != want[k] {
			t.Errorf("%s: %s = %q, want %q", what, k, g, want[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: unexpected %s = %q", what, k, got[k])
		}
	}
}

func extractTree(t *testing.T, s Blobs, d digest.Digest) map[string]string {
	t.Helper()
	dest := filepath.Join(t.TempDir(), "fbc")
	if err := ExtractFBC(s, d, dest); err != nil {
		t.Fatalf("ExtractFBC: %v", err)
	}
	return readTree(t, dest)
}

// ---------------------------------------------------------------------------
// ConfigsDir

func TestConfigsDir(t *testing.T) {
	s := newMemBlobs()
	layer := rawLayer(t, "gzip", file("configs/foo/catalog.json", "{}"))
	image := func(labels map[string]string) digest.Digest {
		return rawImage(t, s, labels, nil, layer)
	}
	noLabel := image(map[string]string{"vendor": "Red Hat"})
	tests := []struct {
		name    string
		image   digest.Digest
		want    string
		wantErr []string
	}{
		{"label", image(catalogLabels), "/configs", nil},
		{"trailing slash and relative", image(map[string]string{ConfigsLabel: "configs/"}), "/configs", nil},
		{"nested", image(map[string]string{ConfigsLabel: "/opt/catalog/"}), "/opt/catalog", nil},
		{"no label", noLabel, "", []string{"catalog image " + noLabel.String(), "has no label operators.operatorframework.io.index.configs.v1", "sqlite catalogs are not supported"}},
		{"root", image(map[string]string{ConfigsLabel: "/"}), "", []string{"must name a directory below /"}},
		{"parent", image(map[string]string{ConfigsLabel: "/configs/../etc"}), "", []string{"must name a directory below /"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ConfigsDir(s, tt.image)
			if tt.wantErr == nil {
				if err != nil || got != tt.want {
					t.Fatalf("ConfigsDir = %q, %v; want %q", got, err, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("ConfigsDir = %q, want an error", got)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestConfigsDirIndexPicksLinuxAMD64(t *testing.T) {
	spec := func(p imagebuilder.Platform, label string) imagebuilder.ImageSpec {
		return imagebuilder.ImageSpec{
			Platform: p,
			Layers:   []imagebuilder.LayerSpec{imagebuilder.FileLayer(map[string][]byte{label + "/catalog.json": []byte("{}")})},
			Labels:   map[string]string{ConfigsLabel: "/" + label},
		}
	}
	arm := imagebuilder.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}
	amd := imagebuilder.Platform{OS: "linux", Architecture: "amd64"}
	ppc := imagebuilder.Platform{OS: "linux", Architecture: "ppc64le"}
	tests := []struct {
		name   string
		images []imagebuilder.ImageSpec
		want   string
	}{
		{"amd64 not first", []imagebuilder.ImageSpec{spec(arm, "arm"), spec(amd, "amd")}, "/amd"},
		{"no amd64: first", []imagebuilder.ImageSpec{spec(ppc, "ppc"), spec(arm, "arm")}, "/ppc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, format := range []imagebuilder.Format{imagebuilder.FormatOCI, imagebuilder.FormatDocker} {
				idx, err := imagebuilder.BuildIndex(imagebuilder.IndexSpec{Format: format, Images: tt.images})
				if err != nil {
					t.Fatal(err)
				}
				s := newMemBlobs()
				got, err := ConfigsDir(s, s.addIndex(t, idx))
				if err != nil || got != tt.want {
					t.Fatalf("%v: ConfigsDir = %q, %v; want %q", format, got, err, tt.want)
				}
			}
		})
	}
}

// ---------------------------------------------------------------------------
// ExtractFBC

func TestExtractFBCAppliesLayersAndWhiteouts(t *testing.T) {
	tests := []struct {
		name   string
		layers func(t *testing.T) []testLayer
		want   map[string]string
	}{
		{
			name: "overwrite, whiteout, opaque dir, hard link, three compressions",
			layers: func(t *testing.T) []testLayer {
				return []testLayer{
					rawLayer(t, "gzip",
						dir("configs/", 0o755), dir("configs/a/", 0o755),
						file("configs/a/catalog.json", "A1"),
						file("configs/b/catalog.json", "B1"),
						file("configs/c/x.json", "X"), file("configs/c/y.json", "Y"),
						file("etc/os-release", "ubi"), file("tmp/cache/db", "stale")),
					rawLayer(t, "",
						file("configs/a/catalog.json", "A2"),
						whiteout("configs/.wh.b"),
						file("configs/c/z.json", "Z"),
						whiteout("configs/c/.wh..wh..opq"), // after z.json: z.json is of this layer and stays
						hardlink("configs/d/copy.json", "configs/a/catalog.json"),
						file("outside/file", "ignored")),
					rawLayer(t, "zstd", file("./configs/e.json", "E"), whiteout("configs/.wh..wh.plnk")),
				}
			},
			want: map[string]string{
				"a": "<dir>", "a/catalog.json": "A2",
				"c": "<dir>", "c/z.json": "Z",
				"d": "<dir>", "d/copy.json": "A2",
				"e.json": "E",
			},
		},
		{
			name: "oc-mirror rebuild: .wh.configs, then a new configs layer",
			layers: func(t *testing.T) []testLayer {
				return []testLayer{
					rawLayer(t, "gzip", file("configs/old/catalog.json", "old")),
					rawLayer(t, "gzip", whiteout(".wh.configs")),
					rawLayer(t, "gzip", dir("configs/", 0o755), file("configs/new/catalog.json", "new")),
				}
			},
			want: map[string]string{"new": "<dir>", "new/catalog.json": "new"},
		},
		{
			name: "opaque root in the same layer as the new configs",
			layers: func(t *testing.T) []testLayer {
				return []testLayer{
					rawLayer(t, "gzip", file("configs/old.json", "old"), file("configs/keep.json", "lower")),
					rawLayer(t, "gzip", file("configs/keep.json", "upper"), whiteout(".wh..wh..opq")),
				}
			},
			want: map[string]string{"keep.json": "upper"},
		},
		{
			name: "file replaced by a directory and back",
			layers: func(t *testing.T) []testLayer {
				return []testLayer{
					rawLayer(t, "gzip", file("configs/x", "file"), file("configs/y/inner.json", "inner")),
					rawLayer(t, "gzip", dir("configs/x/", 0o755), file("configs/x/nested.json", "n"), file("configs/y", "now a file")),
					rawLayer(t, "gzip", whiteout("configs/y/.wh.inner.json")), // below a file: nothing to hide
				}
			},
			want: map[string]string{"x": "<dir>", "x/nested.json": "n", "y": "now a file"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newMemBlobs()
			d := rawImage(t, s, catalogLabels, nil, tt.layers(t)...)
			assertTree(t, "extracted FBC", extractTree(t, s, d), tt.want)
		})
	}
}

func TestExtractFBCErrors(t *testing.T) {
	tests := []struct {
		name    string
		labels  map[string]string
		layers  []entry
		wantErr string
	}{
		{"no label", map[string]string{}, []entry{file("configs/a.json", "{}")}, "is not a file-based catalog (sqlite catalogs are not supported)"},
		{"no configs dir", catalogLabels, []entry{file("database/index.db", "sqlite")}, "no layer holds that directory"},
		{"parent traversal", catalogLabels, []entry{file("configs/../../etc/passwd", "root::0:0")}, `"configs/../../etc/passwd" has a ".." component`},
		{"absolute name", catalogLabels, []entry{file("/configs/evil.json", "{}")}, `"/configs/evil.json" has an absolute name`},
		{"absolute name outside configs", catalogLabels, []entry{file("configs/a.json", "{}"), file("/etc/passwd", "x")}, "absolute name"},
		{"escaping symlink", catalogLabels, []entry{symlink("configs/passwd", "../../../../etc/passwd")}, `/configs/passwd is a symbolic link to "../../../../etc/passwd"`},
		{"inner symlink", catalogLabels, []entry{file("configs/a.json", "{}"), symlink("configs/b.json", "a.json")}, "does not follow links"},
		{"symlinked configs dir", catalogLabels, []entry{symlink("configs", "/etc")}, "makes the configs directory /configs a symbolic link"},
		{"symlinked parent", map[string]string{ConfigsLabel: "/opt/configs"}, []entry{symlink("opt", "/etc"), file("opt/configs/a.json", "{}")}, `entry "opt" is a symbolic link, not a directory`},
		{"hard link outside", catalogLabels, []entry{file("etc/passwd", "x"), hardlink("configs/passwd", "etc/passwd")}, "outside the configs directory"},
		{"hard link escaping", catalogLabels, []entry{hardlink("configs/passwd", "../etc/passwd")}, `".." component`},
		{"device", catalogLabels, []entry{{name: "configs/null", typ: tar.TypeChar, mode: 0o666}}, "is a character device"},
		{"configs is a file", catalogLabels, []entry{file("configs", "x")}, "a file-based catalog is a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newMemBlobs()
			d := rawImage(t, s, tt.labels, nil, rawLayer(t, "gzip", tt.layers...))
			base := t.TempDir()
			dest := filepath.Join(base, "a", "b", "fbc")
			err := ExtractFBC(s, d, dest)
			if err == nil {
				t.Fatalf("ExtractFBC succeeded, want an error containing %q", tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not contain %q", err, tt.wantErr)
			}
			if strings.Contains(tt.name, "label") {
				return
			}
			if !strings.Contains(err.Error(), d.String()) {
				t.Errorf("error %q does not name the image %s", err, d)
			}
			// Nothing may land outside dest.
			for p, v := range readTree(t, base) {
				if !strings.HasPrefix(p, "a/b/fbc") && v != "<dir>" {
					t.Errorf("extraction wrote %s outside dest", p)
				}
			}
		})
	}
}

func TestExtractFBCNeedsEmptyDest(t *testing.T) {
	s := newMemBlobs()
	d := rawImage(t, s, catalogLabels, nil, rawLayer(t, "gzip", file("configs/a.json", "{}")))
	dest := t.TempDir()
	if err := os.WriteFile(filepath.Join(dest, "left-over.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := ExtractFBC(s, d, dest)
	if err == nil || !strings.Contains(err.Error(), "is not empty") {
		t.Fatalf("ExtractFBC into a non-empty dir: %v, want an error saying it is not empty", err)
	}
}

func TestExtractFBCDetectsDamagedLayer(t *testing.T) {
	s := newMemBlobs()
	layer := rawLayer(t, "gzip", file("configs/a.json", "{}"))
	d := rawImage(t, s, catalogLabels, nil, layer)
	damaged := rawLayer(t, "gzip", file("configs/a.json", "{\"evil\":1}"))
	s.mu.Lock()
	s.m[digest.FromBytes(layer.data)] = damaged.data
	s.mu.Unlock()
	err := ExtractFBC(s, d, filepath.Join(t.TempDir(), "fbc"))
	if err == nil || !strings.Contains(err.Error(), "does not match its digest") {
		t.Fatalf("ExtractFBC of a damaged layer: %v, want a digest error", err)
	}
}

// ---------------------------------------------------------------------------
// Rebuild

// fbcFixture is a small valid FBC: two packages, one in a nested directory.
var fbcFixture = map[string]string{
	"foo/catalog.json": `{"schema":"olm.package","name":"foo","defaultChannel":"stable"}
{"schema":"olm.channel","name":"stable","package":"foo","entries":[{"name":"foo.v1.0.0"}]}
{"schema":"olm.bundle","name":"foo.v1.0.0","package":"foo","image":"quay.io/example/foo-bundle@sha256:1111111111111111111111111111111111111111111111111111111111111111","properties":[{"type":"olm.package","value":{"packageName":"foo","version":"1.0.0"}}]}
`,
	"deep/bar/catalog.json": `{"schema":"olm.package","name":"bar","defaultChannel":"alpha"}
{"schema":"olm.channel","name":"alpha","package":"bar","entries":[{"name":"bar.v0.1.0"}]}
{"schema":"olm.bundle","name":"bar.v0.1.0","package":"bar","image":"quay.io/example/bar-bundle@sha256:2222222222222222222222222222222222222222222222222222222222222222","properties":[{"type":"olm.package","value":{"packageName":"bar","version":"0.1.0"}}]}
`,
}

// writeFBC writes fbcFixture into a new directory and returns it with its
// expected tree (as readTree reports it).
func writeFBC(t *testing.T) (string, map[string]string) {
	t.Helper()
	root := filepath.Join(t.TempDir(), "filtered")
	want := map[string]string{}
	for name, body := range fbcFixture {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		want[name] = body
		for d := filepath.ToSlash(filepath.Dir(name)); d != "."; d = filepath.ToSlash(filepath.Dir(d)) {
			want[d] = "<dir>"
		}
	}
	return root, want
}

// catalogSpec is a catalog image as opm generate dockerfile makes it: a base,
// the configs layer, and the pre-built serve cache under /tmp/cache.
func catalogSpec(platform imagebuilder.Platform) imagebuilder.ImageSpec {
	return imagebuilder.ImageSpec{
		Platform: platform,
		Layers: []imagebuilder.LayerSpec{
			imagebuilder.RandomLayer(1, 2048),
			imagebuilder.FileLayer(map[string][]byte{
				"configs/foo/catalog.json":     []byte(`{"schema":"olm.package","name":"foo"}`),
				"configs/old/catalog.json":     []byte(`{"schema":"olm.package","name":"old"}`),
				"configs/old/more/bundle.json": []byte(`{}`),
			}),
			imagebuilder.FileLayer(map[string][]byte{
				"tmp/cache/digest":          []byte("abc"),
				"tmp/cache/pogreb.00000":    []byte("stale"),
				"tmp/cache/packages.json":   []byte("{}"),
				"tmp/unrelated/keep-me.txt": []byte("keep"),
			}),
		},
		Labels: map[string]string{
			ConfigsLabel:                    "/configs",
			"io.openshift.build.commit.url": "https://example.com/commit/1",
		},
		Env:        []string{"PATH=/usr/bin:/bin", "HOME=/"},
		Entrypoint: []string{"/bin/opm"},
		Cmd:        []string{"serve", "/configs", "--cache-dir=/tmp/cache"},
		WorkingDir: "/",
	}
}

// platformImages lists the platform images of d: d itself or its entries.
func platformImages(t *testing.T, s *memBlobs, d digest.Digest) []digest.Digest {
	t.Helper()
	var probe struct {
		Manifests []ocispec.Descriptor `json:"manifests"`
	}
	if err := json.Unmarshal(s.read(t, d), &probe); err != nil {
		t.Fatal(err)
	}
	if probe.Manifests == nil {
		return []digest.Digest{d}
	}
	var out []digest.Digest
	for _, m := range probe.Manifests {
		out = append(out, m.Digest)
	}
	return out
}

// decodeImage reads a platform image's manifest and config.
func decodeImage(t *testing.T, s *memBlobs, d digest.Digest) (ocispec.Manifest, ocispec.Image) {
	t.Helper()
	var m ocispec.Manifest
	if err := json.Unmarshal(s.read(t, d), &m); err != nil {
		t.Fatal(err)
	}
	var cfg ocispec.Image
	if err := json.Unmarshal(s.read(t, m.Config.Digest), &cfg); err != nil {
		t.Fatal(err)
	}
	return m, cfg
}

// checkReferences walks the image graph from d and checks every referenced
// blob is stored with the size its descriptor says and every diff_id matches
// its layer.
func checkReferences(t *testing.T, s *memBlobs, d digest.Digest) {
	t.Helper()
	check := func(desc ocispec.Descriptor) []byte {
		data := s.read(t, desc.Digest)
		if digest.FromBytes(data) != desc.Digest || int64(len(data)) != desc.Size {
			t.Errorf("blob %s: stored %d bytes with digest %s, descriptor says %d", desc.Digest, len(data), digest.FromBytes(data), desc.Size)
		}
		return data
	}
	for _, pd := range platformImages(t, s, d) {
		m, cfg := decodeImage(t, s, pd)
		check(m.Config)
		if len(cfg.RootFS.DiffIDs) != len(m.Layers) {
			t.Fatalf("image %s: %d diff_ids for %d layers", pd, len(cfg.RootFS.DiffIDs), len(m.Layers))
		}
		for i, l := range m.Layers {
			plain, _, err := compression.AutoDecompress(bytes.NewReader(check(l)))
			if err != nil {
				t.Fatal(err)
			}
			dd, err := digest.FromReader(plain)
			if err != nil {
				t.Fatal(err)
			}
			if dd != cfg.RootFS.DiffIDs[i] {
				t.Errorf("image %s layer %d: diff_id %s, uncompressed digest %s", pd, i, cfg.RootFS.DiffIDs[i], dd)
			}
		}
	}
}

// layerOf reads the names and modes of the entries of a layer in order.
func layerOf(t *testing.T, s *memBlobs, d digest.Digest) []string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(s.read(t, d)))
	if err != nil {
		t.Fatalf("layer %s is not gzip: %v", d, err)
	}
	tr := tar.NewReader(zr)
	var out []string
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Uid != 0 || hdr.Gid != 0 || !hdr.ModTime.Equal(layerTime) {
			t.Errorf("layer entry %s: owner %d:%d, time %s; want 0:0 at %s", hdr.Name, hdr.Uid, hdr.Gid, hdr.ModTime, layerTime)
		}
		out = append(out, fmt.Sprintf("%s %o", hdr.Name, hdr.Mode))
	}
}

// runtimeRootFS applies every layer of a platform image the way
// containers/storage (CRI-O, podman) does, and returns the root directory.
func runtimeRootFS(t *testing.T, s *memBlobs, d digest.Digest) string {
	t.Helper()
	m, _ := decodeImage(t, s, d)
	root := t.TempDir()
	for _, l := range m.Layers {
		plain, _, err := compression.AutoDecompress(bytes.NewReader(s.read(t, l.Digest)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := archive.ApplyUncompressedLayer(root, plain, &archive.TarOptions{IgnoreChownErrors: true}); err != nil {
			t.Fatalf("containers/storage cannot apply layer %s: %v", l.Digest, err)
		}
	}
	return root
}

// gcrTree flattens a platform image the way go-containerregistry's
// mutate.Extract does (crane export, oc-mirror): path → content or "<dir>".
func gcrTree(t *testing.T, s *memBlobs, d digest.Digest) map[string]string {
	t.Helper()
	m, _ := decodeImage(t, s, d)
	img := empty.Image
	for _, l := range m.Layers {
		data := s.read(t, l.Digest)
		layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
		if err != nil {
			t.Fatal(err)
		}
		if img, err = mutate.AppendLayers(img, layer); err != nil {
			t.Fatal(err)
		}
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tree := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return tree
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		if hdr.Typeflag == tar.TypeDir {
			tree[hdr.Name] = "<dir>"
		} else {
			tree[hdr.Name] = string(body)
		}
	}
}

// subtree is the part of tree under prefix, relative to it.
func subtree(tree map[string]string, prefix string) map[string]string {
	out := map[string]string{}
	for k, v := range tree {
		if rel, ok := strings.CutPrefix(k, prefix+"/"); ok {
			out[rel] = v
		}
	}
	return out
}

// checkRebuiltPlatform checks one rebuilt platform image against its source.
func checkRebuiltPlatform(t *testing.T, s *memBlobs, src, rebuilt digest.Digest, wantTree map[string]string, layerType string) {
	t.Helper()
	srcM, srcCfg := decodeImage(t, s, src)
	m, cfg := decodeImage(t, s, rebuilt)

	if m.MediaType != srcM.MediaType || m.Config.MediaType != srcM.Config.MediaType {
		t.Errorf("media types %s/%s, want the source's %s/%s", m.MediaType, m.Config.MediaType, srcM.MediaType, srcM.Config.MediaType)
	}
	if len(m.Layers) != len(srcM.Layers)+2 {
		t.Fatalf("rebuilt image has %d layers, want the source's %d + 2", len(m.Layers), len(srcM.Layers))
	}
	for i, l := range srcM.Layers {
		if m.Layers[i].Digest != l.Digest {
			t.Errorf("layer %d is %s, want the source's %s", i, m.Layers[i].Digest, l.Digest)
		}
	}
	for _, l := range m.Layers[len(srcM.Layers):] {
		if l.MediaType != layerType {
			t.Errorf("new layer media type %s, want %s", l.MediaType, layerType)
		}
	}
	if got := layerOf(t, s, m.Layers[len(m.Layers)-2].Digest); !slices.Equal(got, []string{".wh.configs 644", "tmp/ 755", "tmp/.wh.cache 644"}) {
		t.Errorf("whiteout layer entries %q", got)
	}

	want := srcCfg.Config
	want.Cmd = []string{"serve", "/configs"}
	gotJSON, _ := json.Marshal(cfg.Config)
	wantJSON, _ := json.Marshal(want)
	if !bytes.Equal(gotJSON, wantJSON) {
		t.Errorf("container config\n got %s\nwant %s", gotJSON, wantJSON)
	}
	if !cfg.Created.Equal(*srcCfg.Created) || cfg.Platform.Architecture != srcCfg.Platform.Architecture {
		t.Errorf("created %s / arch %s, want the source's %s / %s", cfg.Created, cfg.Architecture, srcCfg.Created, srcCfg.Architecture)
	}
	if len(cfg.History) != len(srcCfg.History)+2 || !strings.Contains(cfg.History[len(cfg.History)-1].CreatedBy, "filtered file-based catalog at /configs") {
		t.Errorf("history %+v: want the source's plus two gapmirror entries", cfg.History)
	}
	if c := cfg.History[len(cfg.History)-1].Comment; c != "filter abc" {
		t.Errorf("history comment %q, want the RebuildOptions comment", c)
	}

	assertTree(t, "re-extracted FBC", extractTree(t, s, rebuilt), wantTree)

	// What a container runtime (containers/storage) sees.
	root := runtimeRootFS(t, s, rebuilt)
	assertTree(t, "runtime /configs", readTree(t, filepath.Join(root, "configs")), wantTree)
	if _, err := os.Lstat(filepath.Join(root, "tmp", "cache")); err == nil {
		t.Errorf("runtime still has /tmp/cache")
	}
	if data, err := os.ReadFile(filepath.Join(root, "tmp", "unrelated", "keep-me.txt")); err != nil || string(data) != "keep" {
		t.Errorf("runtime lost /tmp/unrelated/keep-me.txt: %q, %v", data, err)
	}

	// What go-containerregistry (oc-mirror, crane export) sees.
	flat := gcrTree(t, s, rebuilt)
	assertTree(t, "go-containerregistry /configs", subtree(flat, "configs"), wantTree)
	for k := range flat {
		if strings.HasPrefix(k, "tmp/cache") {
			t.Errorf("go-containerregistry still sees %s", k)
		}
	}
}

func TestRebuildDockerSingleArch(t *testing.T) {
	spec := catalogSpec(imagebuilder.Platform{})
	spec.Format = imagebuilder.FormatDocker
	img, err := imagebuilder.Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	s := newMemBlobs()
	src := s.addImage(t, img)
	fbcDir, wantTree := writeFBC(t)
	opts := RebuildOptions{Comment: "filter abc", TempDir: t.TempDir()}

	d1, mt, err := Rebuild(s, src, fbcDir, opts)
	if err != nil {
		t.Fatalf("Rebuild: %v", err)
	}
	if mt != imagebuilder.MediaTypeDockerManifest {
		t.Errorf("media type %s, want %s", mt, imagebuilder.MediaTypeDockerManifest)
	}
	d2, _, err := Rebuild(s, src, fbcDir, opts)
	if err != nil || d2 != d1 {
		t.Fatalf("second Rebuild gave %s, %v; want the same digest %s", d2, err, d1)
	}
	// A fresh store and staging dir give the same digest too.
	fresh := newMemBlobs()
	fresh.addImage(t, img)
	if d3, _, err := Rebuild(fresh, src, fbcDir, RebuildOptions{Comment: "filter abc"}); err != nil || d3 != d1 {
		t.Fatalf("Rebuild into a fresh store gave %s, %v; want %s", d3, err, d1)
	}

	checkReferences(t, s, d1)
	checkRebuiltPlatform(t, s, src, d1, wantTree, imagebuilder.MediaTypeDockerLayerGzip)

	// The other engineer's loader reads the rebuilt tree as a catalog.
	dest := filepath.Join(t.TempDir(), "fbc")
	if err := ExtractFBC(s, d1, dest); err != nil {
		t.Fatal(err)
	}
	c, err := fbc.LoadFS(os.DirFS(dest), ".")
	if err != nil {
		t.Fatalf("LoadFS of the re-extracted catalog: %v", err)
	}
	if got := c.PackageNames(); !slices.Equal(got, []string{"bar", "foo"}) {
		t.Errorf("re-extracted catalog has packages %v, want [bar foo]", got)
	}
	opmValidate(t, dest)
}

func TestRebuildOCIIndex(t *testing.T) {
	amd := imagebuilder.Platform{OS: "linux", Architecture: "amd64"}
	arm := imagebuilder.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}
	idx, err := imagebuilder.BuildIndex(imagebuilder.IndexSpec{
		Format:      imagebuilder.FormatOCI,
		Images:      []imagebuilder.ImageSpec{catalogSpec(amd), catalogSpec(arm)},
		Annotations: map[string]string{"org.opencontainers.image.source": "https://example.com/catalog"},
	})
	if err != nil {
		t.Fatal(err)
	}
	s := newMemBlobs()
	s.addIndex(t, idx)

	// Add a BuildKit attestation manifest, which Rebuild must drop.
	att := ocispec.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest,
		Config: ocispec.Descriptor{MediaType: ocispec.MediaTypeImageConfig, Digest: s.add(t, []byte(`{}`)), Size: 2},
	}
	attData, _ := json.Marshal(att)
	var index ocispec.Index
	if err := json.Unmarshal(idx.Manifest, &index); err != nil {
		t.Fatal(err)
	}
	index.Manifests = append(index.Manifests, ocispec.Descriptor{
		MediaType: ocispec.MediaTypeImageManifest, Digest: s.add(t, attData), Size: int64(len(attData)),
		Platform:    &ocispec.Platform{OS: "unknown", Architecture: "unknown"},
		Annotations: map[string]string{"vnd.docker.reference.type": "attestation-manifest", "vnd.docker.reference.digest": idx.Images[0].Digest.String()},
	})
	indexData, _ := json.Marshal(index)
	src := s.add(t, indexData)

	fbcDir, wantTree := writeFBC(t)
	opts := RebuildOptions{Comment: "filter abc", TempDir: t.TempDir()}
	d1, mt, err := Rebuild(s, src, fbcDir, opts)
	if err != nil {
		t.Fatalf("Rebuild: %v", err)
	}
	if mt != ocispec.MediaTypeImageIndex {
		t.Errorf("media type %s, want %s", mt, ocispec.MediaTypeImageIndex)
	}
	if d2, _, err := Rebuild(s, src, fbcDir, opts); err != nil || d2 != d1 {
		t.Fatalf("second Rebuild gave %s, %v; want the same digest %s", d2, err, d1)
	}

	var got ocispec.Index
	if err := json.Unmarshal(s.read(t, d1), &got); err != nil {
		t.Fatal(err)
	}
	if got.MediaType != ocispec.MediaTypeImageIndex || got.Annotations["org.opencontainers.image.source"] != "https://example.com/catalog" {
		t.Errorf("rebuilt index lost its media type or annotations: %s", s.read(t, d1))
	}
	if len(got.Manifests) != 2 {
		t.Fatalf("rebuilt index has %d entries, want 2 (attestation dropped): %s", len(got.Manifests), s.read(t, d1))
	}
	checkReferences(t, s, d1)
	var configsLayers []digest.Digest
	for i, desc := range got.Manifests {
		srcImg := idx.Images[i]
		if desc.Platform == nil || desc.Platform.Architecture != srcImg.Platform.Architecture || desc.Platform.Variant != srcImg.Platform.Variant {
			t.Errorf("entry %d platform %+v, want %s", i, desc.Platform, srcImg.Platform)
		}
		if desc.MediaType != srcImg.MediaType || desc.Digest == srcImg.Digest {
			t.Errorf("entry %d: %s %s, want a new %s", i, desc.MediaType, desc.Digest, srcImg.MediaType)
		}
		checkRebuiltPlatform(t, s, srcImg.Digest, desc.Digest, wantTree, ocispec.MediaTypeImageLayerGzip)
		m, _ := decodeImage(t, s, desc.Digest)
		configsLayers = append(configsLayers, m.Layers[len(m.Layers)-1].Digest)
	}
	if configsLayers[0] != configsLayers[1] {
		t.Errorf("platforms got different configs layers %v: the same FBC must give one shared blob", configsLayers)
	}
}

func TestRebuildKeepsDirectoryModes(t *testing.T) {
	s := newMemBlobs()
	src := rawImage(t, s, map[string]string{ConfigsLabel: "/opt/catalog"},
		[]string{"serve", "/opt/catalog", "--cache-dir", "cache", "--cache-enforce-integrity=true"},
		rawLayer(t, "gzip",
			dir("opt/", 0o750), dir("opt/catalog/", 0o755), file("opt/catalog/old.json", "{}"),
			dir("tmp/", 0o1777), file("tmp/x", "x"),
			dir("cache/", 0o700), file("cache/db", "stale")))
	fbcDir, wantTree := writeFBC(t)
	d, _, err := Rebuild(s, src, fbcDir, RebuildOptions{})
	if err != nil {
		t.Fatalf("Rebuild: %v", err)
	}
	m, cfg := decodeImage(t, s, d)
	if got, want := cfg.Config.Cmd, []string{"serve", "/opt/catalog"}; !slices.Equal(got, want) {
		t.Errorf("Cmd %q, want %q", got, want)
	}
	if got := layerOf(t, s, m.Layers[1].Digest); !slices.Equal(got, []string{".wh.cache 644", "opt/ 750", "opt/.wh.catalog 644"}) {
		t.Errorf("whiteout layer entries %q", got)
	}
	if got := layerOf(t, s, m.Layers[2].Digest); !slices.Equal(got, []string{
		"opt/ 750", "opt/catalog/ 755",
		"opt/catalog/deep/ 755", "opt/catalog/deep/bar/ 755", "opt/catalog/deep/bar/catalog.json 644",
		"opt/catalog/foo/ 755", "opt/catalog/foo/catalog.json 644",
	}) {
		t.Errorf("configs layer entries %q", got)
	}
	if len(cfg.History) != 0 {
		t.Errorf("history %+v: a source without history gets none", cfg.History)
	}
	root := runtimeRootFS(t, s, d)
	assertTree(t, "runtime /opt/catalog", readTree(t, filepath.Join(root, "opt", "catalog")), wantTree)
	for p, mode := range map[string]fs.FileMode{"opt": 0o750, "tmp": 0o777 | fs.ModeSticky} {
		if fi, err := os.Stat(filepath.Join(root, p)); err != nil || fi.Mode().Perm()|fi.Mode()&fs.ModeSticky != mode {
			t.Errorf("runtime /%s: %v, %v; want mode %v", p, fi.Mode(), err, mode)
		}
	}
	if _, err := os.Lstat(filepath.Join(root, "cache")); err == nil {
		t.Errorf("runtime still has the relative --cache-dir /cache")
	}
}

func TestRebuildErrors(t *testing.T) {
	fbcDir, _ := writeFBC(t)
	withLink := t.TempDir()
	if err := os.Symlink("/etc/passwd", filepath.Join(withLink, "catalog.json")); err != nil {
		t.Fatal(err)
	}
	withWhiteout := t.TempDir()
	if err := os.WriteFile(filepath.Join(withWhiteout, ".wh.foo"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	layer := func(t *testing.T) testLayer {
		return rawLayer(t, "gzip", file("configs/a.json", "{}"), file("tmp/cache/db", "x"))
	}
	tests := []struct {
		name    string
		labels  map[string]string
		cmd     []string
		fbcDir  string
		wantErr string
	}{
		{"no label", map[string]string{}, nil, fbcDir, "has no label " + ConfigsLabel},
		{"fbcDir missing", catalogLabels, nil, filepath.Join(fbcDir, "nope"), "no such file or directory"},
		{"fbcDir symlink", catalogLabels, nil, withLink, "is not a regular file or directory"},
		{"fbcDir whiteout name", catalogLabels, nil, withWhiteout, "read as a whiteout"},
		{"cache dir holds configs", catalogLabels, []string{"serve", "/configs", "--cache-dir=/"}, fbcDir, "contains the configs directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newMemBlobs()
			src := rawImage(t, s, tt.labels, tt.cmd, layer(t))
			_, _, err := Rebuild(s, src, tt.fbcDir, RebuildOptions{})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Rebuild: %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestRebuildNeedsEverySourceLayer(t *testing.T) {
	s := newMemBlobs()
	base := rawLayer(t, "gzip", file("etc/os-release", "ubi"))
	src := rawImage(t, s, catalogLabels, nil, base, rawLayer(t, "gzip", file("configs/a.json", "{}")))
	s.mu.Lock()
	delete(s.m, digest.FromBytes(base.data))
	s.mu.Unlock()
	fbcDir, _ := writeFBC(t)
	_, _, err := Rebuild(s, src, fbcDir, RebuildOptions{})
	if err == nil || !strings.Contains(err.Error(), "layer 0 ("+digest.FromBytes(base.data).String()+") is not in the store") {
		t.Fatalf("Rebuild with a missing source layer: %v, want an error naming the layer", err)
	}
}

func TestDropCacheFlags(t *testing.T) {
	tests := []struct {
		args     []string
		wantArgs []string
		wantDirs []string
	}{
		{nil, nil, nil},
		{[]string{"serve", "/configs"}, []string{"serve", "/configs"}, nil},
		{[]string{"serve", "/configs", "--cache-dir=/tmp/cache"}, []string{"serve", "/configs"}, []string{"/tmp/cache"}},
		{[]string{"serve", "--cache-dir", "/tmp/cache", "/configs", "--cache-only"}, []string{"serve", "/configs"}, []string{"/tmp/cache"}},
		{[]string{"serve", "/configs", "--cache-enforce-integrity=false", "--cache-only=true", "--port=50051"}, []string{"serve", "/configs", "--port=50051"}, nil},
		{[]string{"serve", "/configs", "--cache-dir"}, []string{"serve", "/configs"}, nil},
	}
	for _, tt := range tests {
		args, dirs := dropCacheFlags(tt.args)
		if !slices.Equal(args, tt.wantArgs) || !slices.Equal(dirs, tt.wantDirs) {
			t.Errorf("dropCacheFlags(%q) = %q, %q; want %q, %q", tt.args, args, dirs, tt.wantArgs, tt.wantDirs)
		}
	}
}

func TestCompareEntryNames(t *testing.T) {
	names := []string{"tmp/cache", "a-b", "tmp/.wh.cache", "a/b", "tmp", "a", "tmp/.wh..wh..opq", "tmp/-x", ".wh.configs"}
	slices.SortFunc(names, compareEntryNames)
	want := []string{".wh.configs", "a", "a/b", "a-b", "tmp", "tmp/.wh..wh..opq", "tmp/.wh.cache", "tmp/-x", "tmp/cache"}
	if !slices.Equal(names, want) {
		t.Errorf("sorted %q, want %q", names, want)
	}
}

// opmValidate has opm validate the catalog in dir and serve it, once with a
// temporary cache and once with the cache --cache-only prepared, as a catalog
// image that keeps --cache-dir does (Rebuild drops the cache and its flags,
// so the cluster's opm rebuilds it; both paths must work).
func opmValidate(t *testing.T, dir string) {
	t.Helper()
	opm := opmtest.Oracle(t)
	if opm == "" {
		return
	}
	opmtest.Validate(t, opm, dir)
	opmtest.Serve(t, opm, dir)
	cache := t.TempDir()
	if err := opmtest.CacheOnly(opm, dir, cache); err != nil {
		t.Error(err)
		return
	}
	opmtest.Serve(t, opm, dir, "--cache-dir", cache)
}

// TestRebuildFilteredCatalog rebuilds a catalog image around a filtered
// catalog (generated: skips, skipRanges, release candidates, deprecations)
// written by WriteDir, extracts it again and has opm judge it.
func TestRebuildFilteredCatalog(t *testing.T) {
	generated, err := catalog.Generate(catalog.GenSpec{Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := catalog.Filter(generated, catalog.FilterSpec{Packages: []catalog.PackageSpec{{Name: catalog.GenPackageName(0), MinVersion: "1.0.0"}}})
	if err != nil {
		t.Fatal(err)
	}
	fbcDir := filepath.Join(t.TempDir(), "filtered")
	if err := out.WriteDir(fbcDir); err != nil {
		t.Fatal(err)
	}
	img, err := imagebuilder.Build(catalogSpec(imagebuilder.Platform{}))
	if err != nil {
		t.Fatal(err)
	}
	s := newMemBlobs()
	src := s.addImage(t, img)
	d, _, err := Rebuild(s, src, fbcDir, RebuildOptions{Comment: "filtered", TempDir: t.TempDir()})
	if err != nil {
		t.Fatalf("Rebuild: %v", err)
	}
	dest := filepath.Join(t.TempDir(), "fbc")
	if err := ExtractFBC(s, d, dest); err != nil {
		t.Fatal(err)
	}
	again, err := fbc.LoadFS(os.DirFS(dest), ".")
	if err != nil {
		t.Fatalf("LoadFS of the re-extracted catalog: %v", err)
	}
	if !slices.Equal(keptBundles(again), keptBundles(out)) {
		t.Errorf("re-extracted bundles %v, want %v", keptBundles(again), keptBundles(out))
	}
	opmValidate(t, dest)
}
