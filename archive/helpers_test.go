package archive

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/gapmirror/gapmirror/imageset"
	digest "github.com/opencontainers/go-digest"
)

// testTime is the fixed creation time of test archives.
var testTime = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

// memStore is an in-memory BlobSource.
type memStore struct {
	blobs map[digest.Digest][]byte
	// serve overrides what Open returns for a digest (to simulate a damaged store).
	serve map[digest.Digest][]byte
	// failAfter makes Open fail once that many blobs were opened (0: never).
	failAfter int
	opened    int
}

func (m *memStore) Open(d digest.Digest) (io.ReadCloser, error) {
	m.opened++
	if m.failAfter > 0 && m.opened > m.failAfter {
		return nil, fmt.Errorf("store unavailable")
	}
	if b, ok := m.serve[d]; ok {
		return io.NopCloser(bytes.NewReader(b)), nil
	}
	b, ok := m.blobs[d]
	if !ok {
		return nil, fmt.Errorf("blob %s: %w", d, os.ErrNotExist)
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

// newStore makes blobs of the given sizes with deterministic pseudo-random content.
func newStore(seed uint64, sizes ...int) (*memStore, []Blob) {
	rng := rand.New(rand.NewPCG(seed, 42))
	m := &memStore{blobs: map[digest.Digest][]byte{}}
	var list []Blob
	for _, n := range sizes {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		d := digest.FromBytes(b)
		m.blobs[d] = b
		list = append(list, Blob{Digest: d, Size: int64(n)})
	}
	return m, list
}

// testIndex is an index ready for Write with the given blobs and a few extras.
func testIndex(id string, blobs []Blob) *Index {
	return &Index{
		ID:      id,
		Created: testTime,
		Config:  "kind: ImageSetConfiguration\napiVersion: mirror.openshift.io/v2alpha1\n",
		Set: &imageset.Set{FormatVersion: imageset.SetFormatVersion, Images: []imageset.Image{{
			Source: "quay.io/x/y@sha256:" + fmt.Sprintf("%064d", 1), Origin: "quay.io/x/y:1", Digest: "sha256:" + fmt.Sprintf("%064d", 1),
			Destination: "x/y:1", Kind: imageset.KindAdditional, Why: []string{"mirror.additionalImages[0]"},
		}}},
		Blobs: blobs,
		Extras: []Extra{
			{Name: "oci-layout", Data: []byte(`{"imageLayoutVersion":"1.0.0"}`)},
			{Name: "index.json", Data: []byte(`{"schemaVersion":2,"manifests":[]}`)},
			{Name: "signatures/4.16.1-x86_64", Data: bytes.Repeat([]byte("sig"), 300)},
		},
	}
}

// writeArchive writes a test archive into dir and fails the test on error.
func writeArchive(t testing.TB, dir string, idx *Index, store BlobSource, max int64) *Index {
	t.Helper()
	out, err := write(context.Background(), dir, idx, store, WriteOptions{MaxChunk: max})
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	return out
}

// chunkFiles lists the mirror_*.tar files in dir.
func chunkFiles(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "mirror_*.tar"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(m)
	return m
}

// dirNames lists every file name in dir.
func dirNames(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// readAll reads a blob through the Reader.
func readAll(r *Reader, d digest.Digest) ([]byte, error) {
	rc, err := r.Open(d)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// flipByte inverts one byte of a file.
func flipByte(t testing.TB, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b[:], off); err != nil {
		t.Fatal(err)
	}
}

// entry is one tar entry for crafted archives.
type entry struct {
	hdr  tar.Header
	data []byte
}

// reg is a regular-file entry.
func reg(name string, data []byte) entry {
	return entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: name, Size: int64(len(data)), Mode: 0o644, ModTime: testTime}, data: data}
}

// tarBytes renders entries as a tar stream, with or without the end trailer.
func tarBytes(t testing.TB, entries []entry, trailer bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := e.hdr
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(e.data); err != nil {
			t.Fatal(err)
		}
	}
	if trailer {
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
	} else if err := tw.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// craft writes an archive from hand-made entries: first holds the entries of
// chunk 1 after the index and its checksum; later[i] the entries of chunk i+2
// (marker included by the caller). idx gets its chunk list filled in, and a
// correct index and checksum are written, so only the entries are "wrong".
func craft(t testing.TB, dir string, idx *Index, first []entry, later ...[]entry) {
	t.Helper()
	idx.Chunks = make([]Chunk, 1+len(later))
	idx.Chunks[0] = Chunk{Number: 1, Name: chunkName(1)}
	for i, entries := range later {
		b := tarBytes(t, entries, true)
		sum := sha256.Sum256(b)
		idx.Chunks[i+1] = Chunk{Number: i + 2, Name: chunkName(i + 2), Size: int64(len(b)), SHA256: digest.NewDigestFromBytes(digest.SHA256, sum[:])}
		if err := os.WriteFile(filepath.Join(dir, chunkName(i+2)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tail := tarBytes(t, append([]entry{reg(indexSumName, indexSum(nil))}, first...), true)
	data, err := encodeIndex(idx, int64(len(tail)), testTime)
	if err != nil {
		t.Fatal(err)
	}
	chunk1 := tarBytes(t, append([]entry{reg(IndexName, data), reg(indexSumName, indexSum(data))}, first...), true)
	if int64(len(chunk1)) != idx.Chunks[0].Size {
		t.Fatalf("crafted chunk 1 is %d bytes, index says %d", len(chunk1), idx.Chunks[0].Size)
	}
	if err := os.WriteFile(filepath.Join(dir, chunkName(1)), chunk1, 0o644); err != nil {
		t.Fatal(err)
	}
}

// craftedIndex is a minimal valid index for crafted archives.
func craftedIndex(blobs ...Blob) *Index {
	return &Index{FormatVersion: formatVersion, Tool: tool, ID: "crafted", Created: testTime, Blobs: blobs}
}

// wantErr checks that err is non-nil and mentions every substring.
func wantErr(t testing.TB, err error, subs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one mentioning %q", subs)
	}
	for _, s := range subs {
		if !bytes.Contains([]byte(err.Error()), []byte(s)) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
}

// asCorrupt reports whether err is (or wraps) a *corruptError.
func asCorrupt(err error) (*corruptError, bool) {
	var ce *corruptError
	ok := errors.As(err, &ce)
	return ce, ok
}
