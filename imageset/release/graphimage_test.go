package release_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/gapmirror/gapmirror/imageset/release"
	"github.com/gapmirror/gapmirror/internal/imagebuilder"
)

// memBlobs is an in-memory content store that checks digests on Put.
type memBlobs map[digest.Digest][]byte

func (m memBlobs) Has(d digest.Digest) bool { _, ok := m[d]; return ok }

func (m memBlobs) Open(d digest.Digest) (io.ReadCloser, error) {
	b, ok := m[d]
	if !ok {
		return nil, os.ErrNotExist
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

func (m memBlobs) Put(d digest.Digest, _ int64, r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if digest.FromBytes(b) != d {
		return errors.New("digest mismatch")
	}
	m[d] = b
	return nil
}

func (m memBlobs) addImage(t *testing.T, img *imagebuilder.Image) {
	t.Helper()
	m[img.Digest] = img.Manifest
	for _, b := range img.Blobs() {
		rc := b.Open()
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		m[b.Digest] = data
	}
}

func tarball(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Uid: 1000, Gid: 1000, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestBuildGraphImage layers the graph data on a single image and on every
// platform of an index, deterministically, with root-owned files under
// /var/lib/cincinnati-graph-data and the copy command.
func TestBuildGraphImage(t *testing.T) {
	tgz := tarball(t, map[string]string{"cincinnati-graph-data-master/channels/stable-4.18.yaml": "name: stable-4.18\n", "cincinnati-graph-data-master/version": "1"})
	idx, err := imagebuilder.BuildIndex(imagebuilder.IndexSpec{Images: []imagebuilder.ImageSpec{
		{Platform: imagebuilder.Platform{OS: "linux", Architecture: "amd64"}, Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(1, 512)}},
		{Platform: imagebuilder.Platform{OS: "linux", Architecture: "arm64"}, Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(2, 512)}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	blobs := memBlobs{idx.Digest: idx.Manifest}
	for _, img := range idx.Images {
		blobs.addImage(t, img)
	}
	d, err := release.BuildGraphImage(blobs, idx.Digest, tgz)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := release.BuildGraphImage(blobs, idx.Digest, tgz); err != nil || again != d {
		t.Errorf("second build gave %s (%v), first %s", again, err, d)
	}
	var out ocispec.Index
	if err := json.Unmarshal(blobs[d], &out); err != nil || len(out.Manifests) != 2 {
		t.Fatalf("built index %s: %v", blobs[d], err)
	}
	for i, m := range out.Manifests {
		var man ocispec.Manifest
		if err := json.Unmarshal(blobs[m.Digest], &man); err != nil {
			t.Fatal(err)
		}
		if len(man.Layers) != 2 || man.Layers[0].Digest != idx.Images[i].Layers[0].Digest {
			t.Fatalf("platform %s: layers %v", m.Platform.Architecture, man.Layers)
		}
		var cfg ocispec.Image
		if err := json.Unmarshal(blobs[man.Config.Digest], &cfg); err != nil {
			t.Fatal(err)
		}
		if len(cfg.RootFS.DiffIDs) != 2 || len(cfg.Config.Cmd) != 3 || cfg.Architecture != m.Platform.Architecture {
			t.Errorf("platform %s: config %+v", m.Platform.Architecture, cfg)
		}
		zr, err := gzip.NewReader(bytes.NewReader(blobs[man.Layers[1].Digest]))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(zr)
		if digest.FromBytes(raw) != cfg.RootFS.DiffIDs[1] {
			t.Errorf("diff ID %s does not match the layer", cfg.RootFS.DiffIDs[1])
		}
		tr := tar.NewReader(bytes.NewReader(raw))
		found := false
		for {
			hdr, err := tr.Next()
			if err != nil {
				break
			}
			if hdr.Name == "var/lib/cincinnati-graph-data/cincinnati-graph-data-master/channels/stable-4.18.yaml" {
				found = hdr.Uid == 0 && hdr.Gid == 0
			}
		}
		if !found {
			t.Errorf("platform %s: the graph data is not root-owned under /var/lib/cincinnati-graph-data", m.Platform.Architecture)
		}
	}
}

// TestGraphDataRejected: something that is not cincinnati-graph-data is
// refused when fetched, naming the URL.
func TestGraphDataRejected(t *testing.T) {
	for name, body := range map[string][]byte{
		"html":        []byte("<html>maintenance</html>"),
		"no channels": tarball(t, map[string]string{"README.md": "hi"}),
	} {
		url, stop := serve(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(body) }))
		_, err := release.FetchGraphData(t.Context(), nil, url)
		stop()
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		mustContain(t, err.Error(), url)
	}
	url, stop := serve(http.NotFoundHandler())
	defer stop()
	if _, err := release.FetchGraphData(t.Context(), nil, url); err == nil {
		t.Error("404 accepted")
	} else {
		mustContain(t, err.Error(), "404", "--graph-data-url")
	}
}
