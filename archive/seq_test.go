package archive

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Archives written one after another into one directory never replace each
// other: the first keeps oc-mirror's names, later ones carry their sequence.
func TestArchivesShareADirectory(t *testing.T) {
	dir := t.TempDir()
	s1, b1 := newStore(31, mixedSizes...)
	s2, b2 := newStore(32, 100, 2000)
	write := func(id string, seq int, s *memStore, blobs []Blob, created time.Time, replace bool) (*Index, error) {
		idx := testIndex(id, blobs)
		idx.Created = created
		return write(context.Background(), dir, idx, s, WriteOptions{MaxChunk: testMax, Seq: seq, Replace: replace})
	}
	first, err := write("one", 1, s1, b1, testTime, false)
	if err != nil {
		t.Fatal(err)
	}
	if first.Seq != 0 || first.Chunks[0].Name != "mirror_000001.tar" {
		t.Fatalf("a lone archive is named %s (seq %d), want mirror_000001.tar", first.Chunks[0].Name, first.Seq)
	}
	second, err := write("two", 2, s2, b2, testTime.Add(time.Hour), false)
	if err != nil {
		t.Fatal(err)
	}
	if second.Chunks[0].Name != "mirror_0002_000001.tar" {
		t.Fatalf("the second archive is named %s, want mirror_0002_000001.tar", second.Chunks[0].Name)
	}
	found, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 2 || found[0].Index.ID != "one" || found[1].Index.ID != "two" {
		t.Fatalf("List = %+v, want archives one then two", found)
	}
	for _, f := range found {
		r, err := OpenFirst(dir, f.First)
		if err != nil {
			t.Fatalf("OpenFirst %s: %v", f.First, err)
		}
		if err := r.Verify(context.Background()); err != nil {
			t.Fatalf("%s: %v", f.First, err)
		}
		if len(r.Stray()) != 0 {
			t.Errorf("%s: stray %v (chunks of the other archive are not stray)", f.First, r.Stray())
		}
	}
	if r, err := Open(dir); err != nil || r.Index().ID != "two" {
		t.Fatalf("Open gives the latest archive: %v", err)
	}

	// The workspace lost its records and numbers the next archive 2 again.
	s3, b3 := newStore(33, 300)
	_, err = write("three", 2, s3, b3, testTime.Add(2*time.Hour), false)
	var re *ReplaceError
	if !errors.As(err, &re) {
		t.Fatalf("writing over archive two: %v, want a ReplaceError", err)
	}
	wantErr(t, err, "mirror_0002_000001.tar", "--force")
	if r, err := OpenFirst(dir, "mirror_0002_000001.tar"); err != nil || r.Index().ID != "two" {
		t.Fatalf("the refused write changed archive two: %v", err)
	}
	if _, err := write("three", 2, s3, b3, testTime.Add(2*time.Hour), true); err != nil {
		t.Fatalf("with Replace: %v", err)
	}
	found, err = List(dir)
	if err != nil || len(found) != 2 || found[1].Index.ID != "three" {
		t.Fatalf("after replacing: %+v %v", found, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "mirror_0002_000002.tar")); len(second.Chunks) > 1 && !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a chunk of the replaced archive is left: %v", err)
	}

	// A renamed first chunk is caught.
	if err := os.Rename(filepath.Join(dir, "mirror_0002_000001.tar"), filepath.Join(dir, "mirror_0005_000001.tar")); err != nil {
		t.Fatal(err)
	}
	_, err = List(dir)
	wantErr(t, err, "mirror_0005_000001.tar", "renamed")
}

func TestChunkNames(t *testing.T) {
	for _, tc := range []struct {
		name    string
		seq, n  int
		isChunk bool
	}{
		{"mirror_000001.tar", 0, 1, true},
		{"mirror_000012.tar", 0, 12, true},
		{"mirror_0003_000001.tar", 3, 1, true},
		{"mirror_12345_000002.tar", 12345, 2, true},
		{"mirror_seq1_000000.tar", 0, 0, false},
		{"mirror_0003_000001.tar.x.partial", 0, 0, false},
		{"mirror_0000_000001.tar", 0, 0, false},
	} {
		seq, n, ok := chunkSeq(tc.name)
		if ok != tc.isChunk || seq != tc.seq || n != tc.n {
			t.Errorf("chunkSeq(%q) = %d %d %v", tc.name, seq, n, ok)
		}
		if ok && SeqChunkName(seq, n) != tc.name && tc.name != "mirror_12345_000002.tar" {
			t.Errorf("SeqChunkName(%d, %d) = %s", seq, n, SeqChunkName(seq, n))
		}
	}
}
