package archive

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	digest "github.com/opencontainers/go-digest"
)

const testMax = 16 * kiB

// mixedSizes are blob sizes that need several 16 KiB chunks, including an
// empty blob and sizes on and around tar block boundaries.
var mixedSizes = []int{0, 1, 511, 512, 513, 1000, 2048, 3000, 4000, 5000, 6000, 7000, 7500, 100, 200, 9000, 12000, 300}

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	store, blobs := newStore(1, mixedSizes...)
	in := testIndex("full-1", blobs)
	in.BasedOn = "older-0"
	out := writeArchive(t, dir, in, store, testMax)

	files := chunkFiles(t, dir)
	if len(files) < 3 || len(files) != len(out.Chunks) {
		t.Fatalf("got chunk files %v for %d index chunks, want several", files, len(out.Chunks))
	}
	for i, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() > testMax {
			t.Errorf("%s is %d bytes, over the %d limit", f, st.Size(), testMax)
		}
		if st.Size() != out.Chunks[i].Size || filepath.Base(f) != out.Chunks[i].Name {
			t.Errorf("%s is %d bytes; index says %s %d", f, st.Size(), out.Chunks[i].Name, out.Chunks[i].Size)
		}
	}
	if len(in.Blobs) != len(mixedSizes) || in.Blobs[0].Chunk != 0 || in.Chunks != nil {
		t.Errorf("Write modified the caller's index")
	}

	r, err := Open(dir)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	got := r.Index()
	if got.ID != "full-1" || got.BasedOn != "older-0" || got.Config != in.Config || !got.Created.Equal(testTime) ||
		got.Tool != tool || got.FormatVersion != formatVersion || got.ToolVersion == "" {
		t.Errorf("index header round trip: got %+v", got)
	}
	if !reflect.DeepEqual(got.Set, in.Set) {
		t.Errorf("Set round trip: got %+v, want %+v", got.Set, in.Set)
	}
	wantOut := *out
	wantOut.Extras = append([]Extra(nil), out.Extras...)
	for i := range wantOut.Extras {
		wantOut.Extras[i].Data = nil
	}
	if !reflect.DeepEqual(got, &wantOut) {
		t.Errorf("Reader index differs from the index Write returned")
	}
	for _, b := range blobs {
		if !r.Has(b.Digest) {
			t.Errorf("Has(%s) = false", b.Digest)
		}
		data, err := readAll(r, b.Digest)
		if err != nil {
			t.Fatalf("reading blob %s: %v", b.Digest, err)
		}
		if !bytes.Equal(data, store.blobs[b.Digest]) {
			t.Errorf("blob %s content differs", b.Digest)
		}
	}
	for _, e := range in.Extras {
		data, err := r.Extra(e.Name)
		if err != nil || !bytes.Equal(data, e.Data) {
			t.Errorf("Extra(%q) = %q, %v; want %q", e.Name, data, err, e.Data)
		}
	}
	absent := digest.FromString("absent")
	if r.Has(absent) {
		t.Errorf("Has(absent) = true")
	}
	if _, err := r.Open(absent); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open(absent) = %v, want ErrNotExist", err)
	}
	if _, err := r.Extra("nope"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Extra(nope) = %v, want ErrNotExist", err)
	}
	if err := r.Verify(context.Background()); err != nil {
		t.Errorf("Verify: %v", err)
	}
	if len(r.Stray()) != 0 {
		t.Errorf("Stray = %v", r.Stray())
	}
}

func TestWriteIsDeterministic(t *testing.T) {
	store, blobs := newStore(2, mixedSizes...)
	a, b := t.TempDir(), t.TempDir()
	writeArchive(t, a, testIndex("same", blobs), store, testMax)
	// Same content in another order gives the same bytes.
	rev := append([]Blob(nil), blobs...)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	writeArchive(t, b, testIndex("same", rev), store, testMax)
	fa, fb := chunkFiles(t, a), chunkFiles(t, b)
	if len(fa) != len(fb) {
		t.Fatalf("%d vs %d chunks", len(fa), len(fb))
	}
	for i := range fa {
		x, _ := os.ReadFile(fa[i])
		y, _ := os.ReadFile(fb[i])
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs between two writes of the same archive", filepath.Base(fa[i]))
		}
	}
}

func TestChunkHeadersAreDeterministic(t *testing.T) {
	dir := t.TempDir()
	store, blobs := newStore(3, 700, 70000)
	writeArchive(t, dir, testIndex("hdr", blobs), store, 0)
	for _, f := range chunkFiles(t, dir) {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(fh)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Typeflag != tar.TypeReg || h.Mode != 0o644 || h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(testTime) || h.Format == tar.FormatGNU {
				t.Errorf("%s: header %+v is not a deterministic ustar/pax regular file", h.Name, h)
			}
		}
		fh.Close()
	}
}

func TestOversizedBlob(t *testing.T) {
	store, blobs := newStore(4, 1000, 40000, 2000, 3000)
	big := blobs[1]

	t.Run("permissive", func(t *testing.T) {
		dir := t.TempDir()
		var log bytes.Buffer
		out, err := write(context.Background(), dir, testIndex("big", blobs), store,
			WriteOptions{MaxChunk: testMax, Logger: slog.New(slog.NewTextHandler(&log, nil))})
		if err != nil {
			t.Fatalf("Write: %v", err)
		}
		if !strings.Contains(log.String(), big.Digest.String()) || !strings.Contains(log.String(), "at least") {
			t.Errorf("warning %q does not name the blob and the size to use", log.String())
		}
		var bigChunk int
		for _, b := range out.Blobs {
			if b.Digest == big.Digest {
				bigChunk = b.Chunk
			}
		}
		for _, b := range out.Blobs {
			if b.Digest != big.Digest && b.Chunk == bigChunk {
				t.Errorf("blob %s shares oversized chunk %d", b.Digest, bigChunk)
			}
		}
		for _, c := range out.Chunks {
			if (c.Size > testMax) != (c.Number == bigChunk) {
				t.Errorf("chunk %s is %d bytes (oversized chunk is %d)", c.Name, c.Size, bigChunk)
			}
		}
		r, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if data, err := readAll(r, big.Digest); err != nil || !bytes.Equal(data, store.blobs[big.Digest]) {
			t.Errorf("reading the oversized blob: %v", err)
		}
	})

	t.Run("strict", func(t *testing.T) {
		dir := t.TempDir()
		_, err := write(context.Background(), dir, testIndex("big", blobs), store, WriteOptions{MaxChunk: testMax, Strict: true})
		wantErr(t, err, big.Digest.String(), "does not fit in a chunk of 16 KiB", "at least 1MiB", "strict")
		if files := chunkFiles(t, dir); len(files) != 0 {
			t.Errorf("strict failure left %v", files)
		}
	})

	t.Run("index too large", func(t *testing.T) {
		dir := t.TempDir()
		idx := testIndex("bigindex", nil)
		idx.Extras = append(idx.Extras, Extra{Name: "graph.json", Data: bytes.Repeat([]byte("x"), 20000)})
		_, err := write(context.Background(), dir, idx, store, WriteOptions{MaxChunk: testMax, Strict: true})
		wantErr(t, err, "archive index and extra files", "at least")
	})
}

func TestIndexOnlyArchive(t *testing.T) {
	dir := t.TempDir()
	out := writeArchive(t, dir, testIndex("empty", nil), &memStore{}, testMax)
	if len(out.Chunks) != 1 || len(chunkFiles(t, dir)) != 1 {
		t.Fatalf("index-only archive has %d chunks, files %v", len(out.Chunks), chunkFiles(t, dir))
	}
	r, err := Open(dir)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if len(r.Index().Blobs) != 0 || r.Has(digest.FromString("x")) {
		t.Errorf("index-only archive claims blobs")
	}
	if data, err := r.Extra("oci-layout"); err != nil || len(data) == 0 {
		t.Errorf("Extra(oci-layout) = %q, %v", data, err)
	}
	if err := r.Verify(context.Background()); err != nil {
		t.Errorf("Verify: %v", err)
	}
}

func TestIncompleteArchive(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, dir string)
		want   []string
	}{
		{"missing chunk", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, chunkName(3)))
		}, []string{"mirror_000003.tar is missing", "copy every chunk of archive part"}},
		{"truncated chunk", func(t *testing.T, dir string) {
			p := filepath.Join(dir, chunkName(2))
			st, _ := os.Stat(p)
			os.Truncate(p, st.Size()-700)
		}, []string{"mirror_000002.tar is truncated", "copy every chunk of archive part"}},
		{"grown chunk", func(t *testing.T, dir string) {
			f, _ := os.OpenFile(filepath.Join(dir, chunkName(2)), os.O_APPEND|os.O_WRONLY, 0)
			f.Write(make([]byte, 512))
			f.Close()
		}, []string{"mirror_000002.tar is", "not the", "index records"}},
		{"renamed chunk", func(t *testing.T, dir string) {
			os.Rename(filepath.Join(dir, chunkName(2)), filepath.Join(dir, chunkName(9)))
		}, []string{"mirror_000002.tar is missing (mirror_000009.tar is that chunk under another name: rename it back to mirror_000002.tar)"}},
		{"empty chunk", func(t *testing.T, dir string) {
			os.Truncate(filepath.Join(dir, chunkName(2)), 0)
		}, []string{"mirror_000002.tar is truncated (0 of", "copy every chunk of archive part"}},
		{"missing first chunk", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, chunkName(1)))
		}, []string{"mirror_000001.tar is missing", "holds the archive index"}},
		{"truncated first chunk", func(t *testing.T, dir string) {
			os.Truncate(filepath.Join(dir, chunkName(1)), 1024)
		}, []string{"mirror_000001.tar", "truncated"}},
	}
	store, blobs := newStore(5, mixedSizes...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeArchive(t, dir, testIndex("part", blobs), store, testMax)
			tc.damage(t, dir)
			_, err := Open(dir)
			wantErr(t, err, tc.want...)
		})
	}
}

func TestChunkOfAnotherArchive(t *testing.T) {
	store, blobs := newStore(6, mixedSizes...)
	a, b := t.TempDir(), t.TempDir()
	writeArchive(t, a, testIndex("archive-a", blobs), store, testMax)
	writeArchive(t, b, testIndex("archive-b", blobs), store, testMax)
	// Same layout, so chunk 2 of b has the size chunk 2 of a should have.
	data, err := os.ReadFile(filepath.Join(b, chunkName(2)))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(a, chunkName(2)), data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Open(a)
	wantErr(t, err, "mirror_000002.tar is chunk 2 of archive archive-b", "copy every chunk of archive archive-a")

	// A chunk of another size names its archive too.
	store2, blobs2 := newStore(7, 9000, 100)
	c := t.TempDir()
	writeArchive(t, c, testIndex("archive-c", blobs2), store2, testMax)
	data, _ = os.ReadFile(filepath.Join(c, chunkName(2)))
	os.WriteFile(filepath.Join(a, chunkName(2)), data, 0o644)
	_, err = Open(a)
	wantErr(t, err, "mirror_000002.tar is chunk 2 of archive archive-c")
}

func TestCorruptBlob(t *testing.T) {
	dir := t.TempDir()
	store, blobs := newStore(8, mixedSizes...)
	out := writeArchive(t, dir, testIndex("flip", blobs), store, testMax)
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var victim Blob
	for _, b := range out.Blobs {
		if b.Chunk == 2 && b.Size > 1000 {
			victim = b
		}
	}
	loc := r.blobs[victim.Digest]
	flipByte(t, filepath.Join(dir, chunkName(2)), loc.offset+victim.Size/2)

	// The header scan does not read data, so Open still succeeds…
	r, err = Open(dir)
	if err != nil {
		t.Fatalf("Open after a flipped data byte: %v", err)
	}
	// …and reading the blob reports it.
	_, err = readAll(r, victim.Digest)
	ce, ok := asCorrupt(err)
	if !ok || ce.Chunk != chunkName(2) {
		t.Fatalf("reading the damaged blob: %v, want a CorruptError for %s", err, chunkName(2))
	}
	wantErr(t, err, "mirror_000002.tar: blob "+victim.Digest.String()+" is corrupt (got sha256:", "copy mirror_000002.tar again")
	// Other blobs still read fine.
	for _, b := range out.Blobs {
		if b.Digest != victim.Digest {
			if _, err := readAll(r, b.Digest); err != nil {
				t.Errorf("intact blob %s: %v", b.Digest, err)
			}
		}
	}
	err = r.Verify(context.Background())
	if _, ok := asCorrupt(err); !ok {
		t.Fatalf("Verify = %v, want a CorruptError", err)
	}
	wantErr(t, err, chunkName(2), victim.Digest.String())

	// A damaged extra file is caught too.
	eloc := r.extras["index.json"]
	flipByte(t, filepath.Join(dir, chunkName(1)), eloc.offset)
	_, err = r.Extra("index.json")
	wantErr(t, err, "mirror_000001.tar: extra file index.json is corrupt")
	wantErr(t, r.Verify(context.Background()), "extra file index.json", chunkName(2))
}

func TestBlobTruncatedAfterOpen(t *testing.T) {
	dir := t.TempDir()
	store, blobs := newStore(9, 9000)
	writeArchive(t, dir, testIndex("trunc", blobs), store, 0)
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	loc := r.blobs[blobs[0].Digest]
	if err := os.Truncate(filepath.Join(dir, chunkName(1)), loc.offset+100); err != nil {
		t.Fatal(err)
	}
	_, err = readAll(r, blobs[0].Digest)
	wantErr(t, err, "only 100 of 9000 bytes")
}

func TestChunkChecksum(t *testing.T) {
	dir := t.TempDir()
	store, blobs := newStore(10, mixedSizes...)
	out := writeArchive(t, dir, testIndex("sum", blobs), store, testMax)
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Damage the padding after a blob: no blob changes, only the chunk checksum sees it.
	var padAt int64 = -1
	for _, b := range out.Blobs {
		if b.Chunk == 2 && b.Size%512 != 0 {
			padAt = r.blobs[b.Digest].offset + b.Size
		}
	}
	if padAt < 0 {
		t.Fatal("no padded blob in chunk 2")
	}
	flipByte(t, filepath.Join(dir, chunkName(2)), padAt)
	if r, err = Open(dir); err != nil {
		t.Fatal(err)
	}
	wantErr(t, r.Verify(context.Background()), "mirror_000002.tar: the chunk is corrupt (sha256")
}

func TestTamperedIndex(t *testing.T) {
	dir := t.TempDir()
	store, blobs := newStore(11, 100, 200)
	writeArchive(t, dir, testIndex("tamper", blobs), store, 0)
	p := filepath.Join(dir, chunkName(1))
	data, _ := os.ReadFile(p)
	i := bytes.Index(data, []byte(`"size": 100`))
	if i < 0 {
		t.Fatal("size not found in the index")
	}
	data[i+len(`"size": 1`)] = '9' // 100 → 190, same length
	os.WriteFile(p, data, 0o644)
	_, err := Open(dir)
	if _, ok := asCorrupt(err); !ok {
		t.Fatalf("Open = %v, want a CorruptError", err)
	}
	wantErr(t, err, "the archive index is corrupt", indexSumName)
}

func TestUnsafeEntries(t *testing.T) {
	store, blobs := newStore(12, 600)
	b := blobs[0]
	blobEntry := reg(blobName(b.Digest), store.blobs[b.Digest])
	marker := reg(chunkMarkerName, markerBytes("crafted", 2))
	link := func(typ byte, name, target string) entry {
		return entry{hdr: tar.Header{Typeflag: typ, Name: name, Linkname: target, Mode: 0o777, ModTime: testTime}}
	}
	cases := []struct {
		name  string
		evil  entry
		first bool // in chunk 1 rather than chunk 2
		want  string
	}{
		{"dot-dot", reg("../evil", []byte("x")), false, `entry "../evil" is not a safe relative path`},
		{"nested dot-dot", reg("blobs/../../evil", []byte("x")), true, "not a safe relative path"},
		{"absolute", reg("/etc/evil", []byte("x")), false, "not a safe relative path"},
		{"symlink", link(tar.TypeSymlink, "blobs/sha256/link", "/etc/passwd"), false, "is a symbolic link, not a regular file"},
		{"hard link", link(tar.TypeLink, "evil", "blobs/sha256/x"), true, "is a hard link"},
		{"directory", link(tar.TypeDir, "blobs", ""), false, "is a directory"},
		{"unexpected name", reg("evil.sh", []byte("x")), false, `unexpected entry "evil.sh"`},
		{"blob not in index", reg(blobName(digest.FromString("other")), []byte("other")), false, "not a blob the index places in this chunk"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			idx := craftedIndex(Blob{Digest: b.Digest, Size: b.Size, Chunk: 2})
			var first []entry
			later := []entry{marker, blobEntry}
			if tc.first {
				first = []entry{tc.evil}
			} else {
				later = append(later, tc.evil)
			}
			craft(t, dir, idx, first, later)
			_, err := Open(dir)
			wantErr(t, err, tc.want)
		})
	}

	t.Run("control: crafted archive is valid", func(t *testing.T) {
		dir := t.TempDir()
		craft(t, dir, craftedIndex(Blob{Digest: b.Digest, Size: b.Size, Chunk: 2}), nil, []entry{marker, blobEntry})
		r, err := Open(dir)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		if err := r.Verify(context.Background()); err != nil {
			t.Fatalf("Verify: %v", err)
		}
	})
	t.Run("unsafe extra name in index", func(t *testing.T) {
		dir := t.TempDir()
		idx := craftedIndex()
		idx.Extras = []Extra{{Name: "../x", Size: 1, Digest: digest.FromString("x")}}
		craft(t, dir, idx, []entry{reg("../x", []byte("x"))})
		_, err := Open(dir)
		wantErr(t, err, `extra file name "../x" is not a safe relative path`)
	})
}

func TestForeignArchives(t *testing.T) {
	gz := func() []byte {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(tarBytes(t, []entry{reg("publish/.metadata.json", []byte("{}"))}, true))
		zw.Close()
		return buf.Bytes()
	}
	cases := []struct {
		name  string
		files map[string][]byte
		want  []string
	}{
		{"oc-mirror v1 name", map[string][]byte{"mirror_seq1_000000.tar": gz()}, []string{"oc-mirror v1 archive", "mirror_seq1_000000.tar"}},
		{"gzip chunk", map[string][]byte{chunkName(1): gz()}, []string{"gzip-compressed", "oc-mirror v1"}},
		{"oc-mirror v2", map[string][]byte{chunkName(1): tarBytes(t, []entry{reg("docker/registry/v2/repositories/ubi9/_layers/sha256/x/link", []byte("sha256:x"))}, true)}, []string{"oc-mirror v2 archive"}},
		{"other tar", map[string][]byte{chunkName(1): tarBytes(t, []entry{reg("hello.txt", []byte("hi"))}, true)}, []string{"not a gapmirror archive", `"hello.txt"`}},
		{"not a tar", map[string][]byte{chunkName(1): bytes.Repeat([]byte("garbage!"), 200)}, []string{"not a gapmirror archive"}},
		{"empty file", map[string][]byte{chunkName(1): nil}, []string{"empty or not a tar file"}},
		{"later chunk renamed", map[string][]byte{chunkName(1): tarBytes(t, []entry{reg(chunkMarkerName, markerBytes("x", 2))}, true)}, []string{"later chunk", "renamed"}},
		{"empty directory", map[string][]byte{}, []string{"no gapmirror archive", "mirror_000001.tar not found"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, data := range tc.files {
				os.WriteFile(filepath.Join(dir, name), data, 0o644)
			}
			_, err := Open(dir)
			wantErr(t, err, tc.want...)
		})
	}
}

func TestNewerFormat(t *testing.T) {
	dir := t.TempDir()
	future := []byte(`{"formatVersion": 99, "tool": "gapmirror", "somethingNew": {"x": 1}}` + "\n")
	os.WriteFile(filepath.Join(dir, chunkName(1)), tarBytes(t, []entry{reg(IndexName, future), reg("gapmirror-index.v99", []byte("x"))}, true), 0o644)
	_, err := Open(dir)
	var nf *newerFormatError
	if !errors.As(err, &nf) || nf.Version != 99 {
		t.Fatalf("Open = %v, want NewerFormatError 99", err)
	}
	wantErr(t, err, "use a newer gapmirror")
}

// extract unpacks every chunk into dst the way "tar xf" would, using only
// regular-file entries (the archive has nothing else).
func extract(t *testing.T, files []string, dst string) {
	t.Helper()
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(fh)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Typeflag != tar.TypeReg || unsafeName(h.Name) {
				t.Fatalf("unexpected entry %q", h.Name)
			}
			p := filepath.Join(dst, filepath.FromSlash(h.Name))
			os.MkdirAll(filepath.Dir(p), 0o755)
			data, _ := io.ReadAll(tr)
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		fh.Close()
	}
}

func TestExtractedChunksAreAnOCILayout(t *testing.T) {
	dir := t.TempDir()
	store, blobs := newStore(13, mixedSizes...)
	idx := testIndex("layout", blobs)
	writeArchive(t, dir, idx, store, testMax)
	files := chunkFiles(t, dir)

	check := func(t *testing.T, root string) {
		for _, e := range idx.Extras {
			got, err := os.ReadFile(filepath.Join(root, e.Name))
			if err != nil || !bytes.Equal(got, e.Data) {
				t.Errorf("%s: %v (content equal: %v)", e.Name, err, bytes.Equal(got, e.Data))
			}
		}
		for _, b := range blobs {
			got, err := os.ReadFile(filepath.Join(root, "blobs", "sha256", b.Digest.Encoded()))
			if err != nil || digest.FromBytes(got) != b.Digest {
				t.Errorf("blob %s: %v", b.Digest, err)
			}
		}
		if _, err := os.Stat(filepath.Join(root, IndexName)); err != nil {
			t.Errorf("index not extracted: %v", err)
		}
	}
	t.Run("archive/tar", func(t *testing.T) {
		dst := t.TempDir()
		extract(t, files, dst)
		check(t, dst)
	})
	t.Run("system tar", func(t *testing.T) {
		tarBin, err := exec.LookPath("tar")
		if err != nil {
			t.Skip("no tar command on this machine")
		}
		dst := t.TempDir()
		for _, f := range files {
			if out, err := exec.Command(tarBin, "-xf", f, "-C", dst).CombinedOutput(); err != nil {
				t.Fatalf("tar -xf %s: %v\n%s", f, err, out)
			}
		}
		check(t, dst)
		if out, err := exec.Command("sha256sum", "--version").CombinedOutput(); err == nil && len(out) > 0 {
			cmd := exec.Command("sha256sum", "-c", indexSumName)
			cmd.Dir = dst
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("sha256sum -c %s: %v\n%s", indexSumName, err, out)
			}
		}
	})
}

func TestInterruptedWrite(t *testing.T) {
	store, blobs := newStore(14, mixedSizes...)
	dir := t.TempDir()
	old := writeArchive(t, dir, testIndex("old", blobs), store, testMax)

	newStore2, newBlobs := newStore(15, mixedSizes...)
	cases := []struct {
		name  string
		write func() error
		want  string
	}{
		{"store fails mid-way", func() error {
			newStore2.failAfter, newStore2.opened = 5, 0
			defer func() { newStore2.failAfter = 0 }()
			_, err := write(context.Background(), dir, testIndex("new", newBlobs), newStore2, WriteOptions{MaxChunk: testMax})
			return err
		}, "store unavailable"},
		{"cancelled", func() error {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_, err := write(ctx, dir, testIndex("new", newBlobs), newStore2, WriteOptions{MaxChunk: testMax})
			return err
		}, "context canceled"},
		{"corrupt store blob", func() error {
			newStore2.serve = map[digest.Digest][]byte{newBlobs[5].Digest: bytes.Repeat([]byte{1}, int(newBlobs[5].Size))}
			defer func() { newStore2.serve = nil }()
			_, err := write(context.Background(), dir, testIndex("new", newBlobs), newStore2, WriteOptions{MaxChunk: testMax})
			return err
		}, "blob " + newBlobs[5].Digest.String() + " in the store is corrupt"},
		{"short store blob", func() error {
			newStore2.serve = map[digest.Digest][]byte{newBlobs[6].Digest: store.blobs[blobs[6].Digest][:10]}
			defer func() { newStore2.serve = nil }()
			_, err := write(context.Background(), dir, testIndex("new", newBlobs), newStore2, WriteOptions{MaxChunk: testMax})
			return err
		}, "in the store is 10 bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantErr(t, tc.write(), tc.want)
			for _, n := range dirNames(t, dir) {
				if chunkNumber(n) == 0 {
					t.Errorf("failed Write left %s", n)
				}
			}
			r, err := Open(dir)
			if err != nil {
				t.Fatalf("the older archive no longer opens: %v", err)
			}
			if r.Index().ID != old.ID || len(chunkFiles(t, dir)) != len(old.Chunks) {
				t.Errorf("the older archive was changed")
			}
			if err := r.Verify(context.Background()); err != nil {
				t.Errorf("the older archive no longer verifies: %v", err)
			}
		})
	}

	t.Run("killed writer leftovers", func(t *testing.T) {
		left := filepath.Join(dir, chunkName(2)+".killed.partial")
		os.WriteFile(left, []byte("half a chunk"), 0o644)
		if r, err := Open(dir); err != nil || r.Index().ID != old.ID {
			t.Fatalf("a partial file confused Open: %v", err)
		}
		// The next Write replaces the older archive with a smaller one and cleans up.
		small, smallBlobs := newStore(16, 100)
		writeArchive(t, dir, testIndex("smaller", smallBlobs), small, testMax)
		names := dirNames(t, dir)
		if len(names) != 1 || names[0] != chunkName(1) {
			t.Errorf("directory holds %v, want only %s", names, chunkName(1))
		}
		r, err := Open(dir)
		if err != nil || r.Index().ID != "smaller" {
			t.Fatalf("Open after replace: %v", err)
		}
	})

	t.Run("stray chunks are reported", func(t *testing.T) {
		os.WriteFile(filepath.Join(dir, chunkName(7)), []byte("x"), 0o644)
		r, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Stray(); len(got) != 1 || got[0] != chunkName(7) {
			t.Errorf("Stray = %v", got)
		}
	})
}

func TestWriteRejectsBadInput(t *testing.T) {
	store, blobs := newStore(17, 100)
	cases := []struct {
		name string
		edit func(idx *Index, opts *WriteOptions)
		want string
	}{
		{"nil-ish digest", func(idx *Index, _ *WriteOptions) {
			idx.Blobs = append(idx.Blobs, Blob{Digest: "sha256:nothex", Size: 1})
		}, `blobs[1]: digest "sha256:nothex"`},
		{"two sizes", func(idx *Index, _ *WriteOptions) {
			idx.Blobs = append(idx.Blobs, Blob{Digest: blobs[0].Digest, Size: 5})
		}, "listed with sizes"},
		{"negative size", func(idx *Index, _ *WriteOptions) { idx.Blobs[0].Size = -1 }, "negative size"},
		{"traversal extra", func(idx *Index, _ *WriteOptions) { idx.Extras[0].Name = "../etc/x" }, "not a safe relative path"},
		{"absolute extra", func(idx *Index, _ *WriteOptions) { idx.Extras[0].Name = "/etc/x" }, "not a safe relative path"},
		{"reserved extra", func(idx *Index, _ *WriteOptions) { idx.Extras[0].Name = IndexName }, "reserved"},
		{"extra under blobs", func(idx *Index, _ *WriteOptions) { idx.Extras[0].Name = "blobs/sha256/abc" }, "holds only blobs"},
		{"duplicate extra", func(idx *Index, _ *WriteOptions) { idx.Extras[1].Name = idx.Extras[0].Name }, "listed twice"},
		{"extra file as directory", func(idx *Index, _ *WriteOptions) { idx.Extras[1].Name = "oci-layout/x" }, "also used as the directory"},
		{"odd characters", func(idx *Index, _ *WriteOptions) { idx.Extras[0].Name = "a b" }, "may only use"},
		{"bad id", func(idx *Index, _ *WriteOptions) { idx.ID = "no/slash" }, "archive id"},
		{"based on itself", func(idx *Index, _ *WriteOptions) { idx.BasedOn = idx.ID }, "based on itself"},
		{"binary config", func(idx *Index, _ *WriteOptions) { idx.Config = "\xff\xfe" }, "not UTF-8"},
		{"tiny chunks", func(_ *Index, o *WriteOptions) { o.MaxChunk = 1000 }, "too small"},
		{"missing store blob", func(idx *Index, _ *WriteOptions) {
			idx.Blobs = append(idx.Blobs, Blob{Digest: digest.FromString("gone"), Size: 4})
		}, "reading blob " + digest.FromString("gone").String()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			idx := testIndex("bad", append([]Blob(nil), blobs...))
			opts := WriteOptions{MaxChunk: testMax}
			tc.edit(idx, &opts)
			_, err := write(context.Background(), dir, idx, store, opts)
			wantErr(t, err, tc.want)
			if files := chunkFiles(t, dir); len(files) != 0 {
				t.Errorf("failed Write left %v", files)
			}
		})
	}
}

func TestRandomIDAndDefaults(t *testing.T) {
	dir := t.TempDir()
	store, blobs := newStore(18, 10)
	idx := testIndex("", blobs)
	idx.Created = idx.Created.Add(123456789) // sub-second part is dropped
	out := writeArchive(t, dir, idx, store, 0)
	if err := validID(out.ID); err != nil || !strings.HasPrefix(out.ID, "20250304T050607Z-") {
		t.Errorf("generated id %q: %v", out.ID, err)
	}
	if !out.Created.Equal(testTime) {
		t.Errorf("Created = %v, want %v", out.Created, testTime)
	}
	// A Reader is itself a BlobSource: an archive can be rewritten from another.
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	dir2 := t.TempDir()
	writeArchive(t, dir2, testIndex("copy", blobs), r, 0)
	if _, err := Open(dir2); err != nil {
		t.Fatal(err)
	}
}

func TestLargeIndexSettles(t *testing.T) {
	// Many tiny blobs in small chunks: the index itself takes a good part of
	// chunk 1, so the layout has to be planned around it.
	sizes := make([]int, 300)
	for i := range sizes {
		sizes[i] = 1 + i%700
	}
	store, blobs := newStore(19, sizes...)
	dir := t.TempDir()
	out := writeArchive(t, dir, testIndex("many", blobs), store, 64*kiB)
	for _, c := range out.Chunks {
		if c.Size > 64*kiB {
			t.Errorf("%s is %d bytes", c.Name, c.Size)
		}
	}
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Verify(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestSHA512BlobAndProgress(t *testing.T) {
	dir := t.TempDir()
	data := bytes.Repeat([]byte("sha512 blob "), 100)
	d := digest.SHA512.FromBytes(data)
	store, blobs := newStore(20, 3000, 5000)
	store.blobs[d] = data
	blobs = append(blobs, Blob{Digest: d, Size: int64(len(data))})
	var calls []int64
	var total int64
	_, err := write(context.Background(), dir, testIndex("sha512", blobs), store, WriteOptions{
		MaxChunk: testMax,
		Progress: func(done, all int64) { calls = append(calls, done); total = all },
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(3000 + 5000 + len(data)); len(calls) != 3 || calls[2] != want || total != want {
		t.Errorf("progress calls %v of %d, want 3 calls ending at %d", calls, total, want)
	}
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := readAll(r, d); err != nil || !bytes.Equal(got, data) {
		t.Errorf("sha512 blob: %v", err)
	}
	if err := r.Verify(context.Background()); err != nil {
		t.Error(err)
	}
}

func TestHeaderSizeCountsPAX(t *testing.T) {
	long := blobName(digest.SHA512.FromString("x")) // 141 bytes: too long for ustar
	cases := []struct {
		name string
		size int64
		more bool
	}{
		{blobName(digest.FromString("x")), 100, false},
		{blobName(digest.FromString("x")), 10 * giB, true}, // beyond ustar's 8 GiB
		{long, 100, true},
	}
	for _, tc := range cases {
		h, err := headerSize(tc.name, tc.size, testTime)
		if err != nil {
			t.Fatal(err)
		}
		if (h > blockSize) != tc.more || h%blockSize != 0 {
			t.Errorf("headerSize(%d-byte name, %d) = %d", len(tc.name), tc.size, h)
		}
	}
}

// TestImplausibleIndexSize: a first chunk whose index entry claims more
// than the cap (a damaged or hostile header) is refused from the header,
// before anything of that size is allocated or read.
func TestImplausibleIndexSize(t *testing.T) {
	dir := t.TempDir()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: IndexName, Typeflag: tar.TypeReg, Mode: 0o644, Size: maxIndexSize + 1}); err != nil {
		t.Fatal(err)
	}
	// No body and no Close: the header alone is on disk.
	if err := os.WriteFile(filepath.Join(dir, chunkName(1)), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(dir)
	wantErr(t, err, chunkName(1), IndexName, "not a regular file of plausible size")
}
