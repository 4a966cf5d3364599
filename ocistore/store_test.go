package ocistore

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/archive"
	"github.com/gapmirror/gapmirror/failure"
)

// TestStoreRefusesCorruptBlobs: a blob whose bytes or size do not match its
// digest never appears in the store, and a good one appears whole.
func TestStoreRefusesCorruptBlobs(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	good := []byte("layer bytes")
	d := digest.FromBytes(good)
	for _, c := range []struct {
		name string
		data []byte
		size int64
	}{
		{"flipped", []byte("layer byteS"), int64(len(good))},
		{"short", good[:5], int64(len(good))},
		{"wrong size", good, 3},
	} {
		err := s.Put(d, c.size, bytes.NewReader(c.data))
		var de *failure.DigestError
		if !errors.As(err, &de) {
			t.Errorf("%s: got %v, want a DigestError", c.name, err)
		}
		if s.Has(d) {
			t.Fatalf("%s: corrupt blob stored", c.name)
		}
	}
	if err := s.Put(d, int64(len(good)), bytes.NewReader(good)); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ReadBlob(d); err != nil || !bytes.Equal(got, good) {
		t.Errorf("ReadBlob = %q, %v", got, err)
	}
	if entries, _ := os.ReadDir(filepath.Join(s.Dir(), storeIngest)); len(entries) != 0 {
		t.Errorf("ingest not cleaned: %v", entries)
	}
}

// TestStoreLinks: a blob linked to its place in a chunk is in the store
// and reads from there; once the chunk is gone, or replaced by a file of
// another size, the blob is not in the store and the link is dropped.
func TestStoreLinks(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	content := []byte("the blob's bytes")
	chunk := filepath.Join(t.TempDir(), "mirror_000002.tar")
	data := append(append([]byte("header.."), content...), "trailer"...)
	if err := os.WriteFile(chunk, data, 0o644); err != nil {
		t.Fatal(err)
	}
	d := digest.FromBytes(content)
	if err := s.Link(d, archive.Location{Chunk: chunk, ChunkSize: int64(len(data)), Offset: 8, Size: int64(len(content))}); err != nil {
		t.Fatal(err)
	}
	if !s.Has(d) {
		t.Fatal("a linked blob is not in the store")
	}
	rc, err := s.Open(d)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if string(got) != string(content) {
		t.Errorf("read %q through the link, want %q", got, content)
	}
	if err := os.WriteFile(chunk, data[:10], 0o644); err != nil { // another file now
		t.Fatal(err)
	}
	if s.Has(d) {
		t.Error("a link to a chunk of another size still holds")
	}
	if _, err := os.Stat(s.linkPath(d)); !os.IsNotExist(err) {
		t.Errorf("the stale link stayed: %v", err)
	}
	// A relative or out-of-range link is not trusted.
	for _, l := range []archive.Location{
		{Chunk: "mirror_000002.tar", ChunkSize: 10, Offset: 0, Size: 5},
		{Chunk: chunk, ChunkSize: 10, Offset: 8, Size: 5},
	} {
		if err := s.Link(d, l); err != nil {
			t.Fatal(err)
		}
		if s.Has(d) {
			t.Errorf("link %+v trusted", l)
		}
	}
	// Links are written without fsync: one a crash left empty or cut
	// short is not trusted either.
	good, _ := os.ReadFile(chunk)
	if err := s.Link(d, archive.Location{Chunk: chunk, ChunkSize: int64(len(good)), Offset: 0, Size: int64(len(good))}); err != nil {
		t.Fatal(err)
	}
	whole, err := os.ReadFile(s.linkPath(d))
	if err != nil || !s.Has(d) {
		t.Fatalf("link not written (%v) or not trusted", err)
	}
	for _, torn := range [][]byte{nil, whole[:len(whole)/2]} {
		if err := os.WriteFile(s.linkPath(d), torn, 0o644); err != nil {
			t.Fatal(err)
		}
		if s.Has(d) {
			t.Errorf("a link torn to %q is trusted", torn)
		}
	}
}
