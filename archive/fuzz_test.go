package archive

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/gapmirror/gapmirror/internal/fuzzguard"
)

// fuzzArchive writes a small archive (one chunk, blobs and extras) and
// returns the bytes of its chunk file and of its index.
func fuzzArchive(f *testing.F) (chunk, index []byte) {
	dir := f.TempDir()
	s, blobs := newStore(41, 0, 1, 600, 2000)
	idx := testIndex("fuzz", blobs)
	idx.Extras = []Extra{{Name: "index.json", Data: []byte(`{"schemaVersion":2}`)}}
	if _, err := write(context.Background(), dir, idx, s, WriteOptions{MaxChunk: testMax}); err != nil {
		f.Fatal(err)
	}
	chunk, err := os.ReadFile(filepath.Join(dir, chunkName(1)))
	if err != nil {
		f.Fatal(err)
	}
	r, err := Open(dir)
	if err != nil {
		f.Fatal(err)
	}
	index, err = marshalIndex(r.Index())
	if err != nil {
		f.Fatal(err)
	}
	return chunk, index
}

// within fails the input when fn hangs or panics.
func within(t *testing.T, fn func()) { fuzzguard.Within(t, fn) }

// FuzzDecodeIndex: any index bytes are parsed or refused, never a panic.
func FuzzDecodeIndex(f *testing.F) {
	_, index := fuzzArchive(f)
	f.Add(index)
	f.Add([]byte(`{"formatVersion":99}`))
	f.Add([]byte(`{"formatVersion":3,"tool":"gapmirror","id":"x","seq":-1,"chunks":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		within(t, func() { _, _ = decodeIndex(data) })
	})
}

// FuzzReadChunk: a chunk file with any content (as a damaged or hostile
// archive) is listed, opened, verified and read or refused: never a
// panic, a hang, or a file written outside the archive directory.
func FuzzReadChunk(f *testing.F) {
	chunk, _ := fuzzArchive(f)
	f.Add(chunk)
	f.Add(chunk[:len(chunk)/2])
	f.Add([]byte("not a tar file"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, chunkName(1)), data, 0o644); err != nil {
			t.Fatal(err)
		}
		within(t, func() {
			found, err := List(dir)
			if err != nil {
				return
			}
			r, err := OpenFirst(dir, found[0].First)
			if err != nil {
				return
			}
			_ = r.Verify(context.Background())
			for _, b := range r.Index().Blobs {
				if rc, err := r.Open(b.Digest); err == nil {
					_, _ = io.Copy(io.Discard, rc)
					rc.Close()
				}
			}
			for _, e := range r.Index().Extras {
				_, _ = r.Extra(e.Name)
			}
		})
		entries, _ := os.ReadDir(dir)
		if len(entries) != 1 {
			t.Fatalf("reading the archive left files in its directory: %v", entries)
		}
	})
}
