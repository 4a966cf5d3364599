package ocistore

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/opencontainers/go-digest"

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
