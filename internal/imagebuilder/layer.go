package imagebuilder

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Epoch is the fixed time used for tar entry modification times and, unless
// an ImageSpec says otherwise, the image's creation time.
var Epoch = time.Date(2024, time.January, 1, 0, 0, 0, 0, time.UTC)

// Media types of Docker schema2 content (OCI ones come from image-spec).
const (
	MediaTypeDockerManifest     = "application/vnd.docker.distribution.manifest.v2+json"
	mediaTypeDockerManifestList = "application/vnd.docker.distribution.manifest.list.v2+json"
	mediaTypeDockerConfig       = "application/vnd.docker.container.image.v1+json"
	MediaTypeDockerLayerGzip    = "application/vnd.docker.image.rootfs.diff.tar.gzip"
	mediaTypeDockerLayer        = "application/vnd.docker.image.rootfs.diff.tar"
)

// LayerSpec says how to make one layer: either Size bytes of seeded random
// file content (Files nil), or exactly the given file tree.
type LayerSpec struct {
	// Seed selects the random content; the same Seed and Size give the same bytes.
	Seed uint64
	// Size is the number of random content bytes, spread over a few files
	// (the blob is slightly larger: tar headers, gzip framing).
	Size int64
	// Files, when not nil, is the layer's file tree: slash-separated path
	// (leading "/" optional) to content. Parent directories are added.
	// Seed and Size are ignored.
	Files map[string][]byte
	// Uncompressed stores the layer as a plain tar instead of tar+gzip.
	Uncompressed bool
}

// RandomLayer is a gzip-compressed layer of size seeded random bytes.
func RandomLayer(seed uint64, size int64) LayerSpec {
	return LayerSpec{Seed: seed, Size: size}
}

// FileLayer is a gzip-compressed layer holding exactly files (path to content).
func FileLayer(files map[string][]byte) LayerSpec {
	if files == nil {
		files = map[string][]byte{}
	}
	return LayerSpec{Files: files}
}

// Blob is one piece of content-addressed data: a layer, a config or a
// manifest. Configs, manifests and file-tree layers are held in memory; random
// layers are regenerated from their seed whenever they are read, so gigabytes
// of layers cost no memory.
type Blob struct {
	// MediaType is the blob's media type as manifests reference it.
	MediaType string
	// Digest is the sha256 digest of the content.
	Digest digest.Digest
	// Size is the content's length in bytes.
	Size int64
	// DiffID is the digest of the uncompressed tar; empty for configs and manifests.
	DiffID digest.Digest

	data   []byte     // content held in memory, or nil
	random *LayerSpec // random layer regenerated on Open, or nil
}

// newBlob is an in-memory blob of data.
func newBlob(mediaType string, data []byte) Blob {
	return Blob{MediaType: mediaType, Digest: digest.SHA256.FromBytes(data), Size: int64(len(data)), data: data}
}

// Open reads the blob's content; the caller must close it.
func (b Blob) Open() io.ReadCloser {
	if b.random == nil {
		return io.NopCloser(bytes.NewReader(b.data))
	}
	pr, pw := io.Pipe()
	spec := *b.random
	go func() {
		_, err := writeLayer(pw, spec)
		pw.CloseWithError(err)
	}()
	return pr
}

// Bytes is the blob's whole content, read into memory; do not modify it.
func (b Blob) Bytes() ([]byte, error) {
	if b.random == nil {
		return b.data, nil
	}
	rc := b.Open()
	defer rc.Close()
	var buf bytes.Buffer
	buf.Grow(int(b.Size) + bytes.MinRead)
	if _, err := buf.ReadFrom(rc); err != nil {
		return nil, fmt.Errorf("generating layer %s: %w", b.Digest, err)
	}
	return buf.Bytes(), nil
}

// Descriptor is the OCI descriptor manifests use to reference the blob.
func (b Blob) Descriptor() ocispec.Descriptor {
	return ocispec.Descriptor{MediaType: b.MediaType, Digest: b.Digest, Size: b.Size}
}

// layerKey identifies a random layer for reuse within one build.
type layerKey struct {
	seed         uint64
	size         int64
	uncompressed bool
	format       Format
}

// Random content does not compress, so random layers use stored deflate
// blocks (valid gzip at memory speed, the size barely changes); file trees
// (JSON, manifests) compress well and use the fastest real level.
const (
	randomGzipLevel = gzip.NoCompression
	filesGzipLevel  = gzip.BestSpeed
)

// chunkSize is the unit of random content generation.
const chunkSize = 1 << 20

// buildLayer makes the layer blob for spec in the media types of format.
// A file-tree layer is kept in memory; a random layer is generated once here
// to learn its digests, and again whenever it is read.
func buildLayer(spec LayerSpec, format Format) (Blob, error) {
	mediaType := layerMediaType(format, !spec.Uncompressed)
	if spec.Files != nil {
		var out bytes.Buffer
		diffID, err := writeLayer(&out, spec)
		if err != nil {
			return Blob{}, err
		}
		b := newBlob(mediaType, out.Bytes())
		b.DiffID = diffID
		return b, nil
	}
	blobHash := digest.SHA256.Digester()
	counter := &countingWriter{w: blobHash.Hash()}
	diffID, err := writeLayer(counter, spec)
	if err != nil {
		return Blob{}, err
	}
	return Blob{
		MediaType: mediaType,
		Digest:    blobHash.Digest(),
		Size:      counter.n,
		DiffID:    diffID,
		random:    &spec,
	}, nil
}

// writeLayer writes the layer's blob content to w and returns its diff ID.
func writeLayer(w io.Writer, spec LayerSpec) (digest.Digest, error) {
	entries, err := layerEntries(spec)
	if err != nil {
		return "", err
	}
	diffHash := digest.SHA256.Digester()
	sink := w
	var zw *gzip.Writer
	if !spec.Uncompressed {
		level := randomGzipLevel
		if spec.Files != nil {
			level = filesGzipLevel
		}
		if zw, err = gzip.NewWriterLevel(w, level); err != nil {
			return "", fmt.Errorf("creating the gzip writer: %w", err)
		}
		sink = zw
	}
	tw := tar.NewWriter(io.MultiWriter(diffHash.Hash(), sink))
	if err := writeEntries(tw, entries); err != nil {
		return "", err
	}
	if err := tw.Close(); err != nil {
		return "", fmt.Errorf("finishing the layer tar: %w", err)
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			return "", fmt.Errorf("finishing the layer gzip stream: %w", err)
		}
	}
	return diffHash.Digest(), nil
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// layerMediaType is the layer media type for format and compression.
func layerMediaType(format Format, gzipped bool) string {
	switch {
	case format == FormatDocker && gzipped:
		return MediaTypeDockerLayerGzip
	case format == FormatDocker:
		return mediaTypeDockerLayer
	case gzipped:
		return ocispec.MediaTypeImageLayerGzip
	default:
		return ocispec.MediaTypeImageLayer
	}
}

// tarEntry is one file or directory of a layer; random content has data nil
// and is generated while writing.
type tarEntry struct {
	name   string
	dir    bool
	data   []byte
	random *randomFile
}

// randomFile is seeded random content of a given size.
type randomFile struct {
	key  [32]byte
	size int64
}

// layerEntries lists a layer's tar entries in write order.
func layerEntries(spec LayerSpec) ([]tarEntry, error) {
	if spec.Files != nil {
		return fileEntries(spec.Files)
	}
	if spec.Size < 0 {
		return nil, fmt.Errorf("LayerSpec.Size is %d: must not be negative", spec.Size)
	}
	return randomEntries(spec.Seed, spec.Size), nil
}

// randomEntries spreads size bytes over up to four files under data/<seed>/.
func randomEntries(seed uint64, size int64) []tarEntry {
	dir := fmt.Sprintf("data/%016x/", seed)
	entries := []tarEntry{{name: "data/", dir: true}, {name: dir, dir: true}}
	parts := int64(4)
	if size < 64<<10 {
		parts = 1
	}
	per := size / parts
	for i := range parts {
		n := per
		if i == parts-1 {
			n = size - per*(parts-1)
		}
		var key [32]byte
		binary.LittleEndian.PutUint64(key[0:], seed)
		binary.LittleEndian.PutUint64(key[8:], uint64(i))
		copy(key[16:], "gapmirror-layer!")
		entries = append(entries, tarEntry{
			name:   fmt.Sprintf("%spart-%d.bin", dir, i),
			random: &randomFile{key: key, size: n},
		})
	}
	return entries
}

// fileEntries turns a file tree into sorted tar entries with parent directories.
func fileEntries(files map[string][]byte) ([]tarEntry, error) {
	dirs := map[string]bool{}
	names := make(map[string]string, len(files)) // clean name → original key
	for p := range files {
		name := strings.TrimPrefix(p, "/")
		if name == "" || path.Clean(name) != name || name == "." || strings.HasPrefix(name, "../") || name == ".." {
			return nil, fmt.Errorf("LayerSpec.Files[%q]: path must be a clean file path like \"configs/catalog.json\"", p)
		}
		if prev, dup := names[name]; dup {
			return nil, fmt.Errorf("LayerSpec.Files[%q]: same file as %q", p, prev)
		}
		names[name] = p
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	entries := make([]tarEntry, 0, len(dirs)+len(files))
	for d := range dirs {
		if orig, clash := names[d]; clash {
			return nil, fmt.Errorf("LayerSpec.Files[%q]: is a file but also a directory of other files", orig)
		}
		entries = append(entries, tarEntry{name: d + "/", dir: true})
	}
	for name, orig := range names {
		entries = append(entries, tarEntry{name: name, data: files[orig]})
	}
	slices.SortFunc(entries, func(a, b tarEntry) int {
		return strings.Compare(strings.TrimSuffix(a.name, "/"), strings.TrimSuffix(b.name, "/"))
	})
	return entries, nil
}

// writeEntries writes entries with fixed ownership, modes and times.
func writeEntries(tw *tar.Writer, entries []tarEntry) error {
	var chunk []byte
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, ModTime: Epoch, Uid: 0, Gid: 0}
		switch {
		case e.dir:
			hdr.Typeflag, hdr.Mode = tar.TypeDir, 0o755
		case e.random != nil:
			hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, 0o644, e.random.size
		default:
			hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, 0o644, int64(len(e.data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("writing tar header for %s: %w", e.name, err)
		}
		switch {
		case e.random != nil:
			if chunk == nil {
				chunk = make([]byte, chunkSize)
			}
			rng := rand.NewChaCha8(e.random.key)
			for left := e.random.size; left > 0; {
				n := min(left, int64(len(chunk)))
				_, _ = rng.Read(chunk[:n])
				if _, err := tw.Write(chunk[:n]); err != nil {
					return fmt.Errorf("writing %s: %w", e.name, err)
				}
				left -= n
			}
		case len(e.data) > 0:
			if _, err := tw.Write(e.data); err != nil {
				return fmt.Errorf("writing %s: %w", e.name, err)
			}
		}
	}
	return nil
}
