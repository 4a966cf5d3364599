package archive

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	digest "github.com/opencontainers/go-digest"
)

// stageAll streams blobs into st from 4 goroutines, each blob in pieces, the
// way mirror-to-disk's copy does; skip names blobs given a place but left
// unfinished (a transfer that failed for good).
func stageAll(t *testing.T, st *Staging, store *memStore, blobs []Blob, skip map[digest.Digest]bool) {
	t.Helper()
	var wg sync.WaitGroup
	work := make(chan Blob)
	errs := make(chan error, len(blobs))
	for range 4 {
		wg.Go(func() {
			for b := range work {
				sl, err := st.Reserve(b.Digest, b.Size)
				if err != nil {
					errs <- err
					continue
				}
				data := store.blobs[b.Digest]
				if skip[b.Digest] {
					sl.Writer().Write(data[:len(data)/2])
					sl.Release()
					continue
				}
				w := sl.Writer()
				for len(data) > 0 {
					n := min(len(data), 700)
					if _, err := w.Write(data[:n]); err != nil {
						errs <- err
						break
					}
					data = data[n:]
				}
				sl.Done()
			}
		})
	}
	for _, b := range blobs {
		work <- b
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// checkArchive opens the archive in dir, verifies it and compares every
// blob of want with store's content.
func checkArchive(t *testing.T, dir string, store *memStore, want []Blob) *Reader {
	t.Helper()
	r, err := Open(dir)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if err := r.Verify(context.Background()); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if len(r.Index().Blobs) != len(want) {
		t.Errorf("index lists %d blobs, want %d", len(r.Index().Blobs), len(want))
	}
	for _, b := range want {
		data, err := readAll(r, b.Digest)
		if err != nil || !bytes.Equal(data, store.blobs[b.Digest]) {
			t.Errorf("blob %s: %d bytes, %v", b.Digest, len(data), err)
		}
	}
	for _, name := range dirNames(t, dir) {
		if strings.HasSuffix(name, ".partial") {
			t.Errorf("%s left behind", name)
		}
	}
	return r
}

// TestStagedArchive streams most blobs straight into chunks and commits
// with the rest coming from a store: the archive is the one Write would
// make (same blobs, extras, chunk limit), only laid out differently.
func TestStagedArchive(t *testing.T) {
	dir := t.TempDir()
	store, blobs := newStore(7, mixedSizes...)
	staged, rest := blobs[:12], blobs[12:]
	var progress []int64
	st, err := Stage(dir, testTime, WriteOptions{MaxChunk: testMax, Progress: func(done, total int64) { progress = append(progress, done) }})
	if err != nil {
		t.Fatal(err)
	}
	stageAll(t, st, store, staged, nil)
	if !st.Has(staged[3].Digest) || st.Has(rest[0].Digest) {
		t.Errorf("Has: staged %v, not staged %v", st.Has(staged[3].Digest), st.Has(rest[0].Digest))
	}
	if names := chunkFiles(t, dir); len(names) != 0 {
		t.Fatalf("chunks visible before Commit: %v", names)
	}
	if l, err := List(dir); len(l) != 0 {
		t.Fatalf("List before Commit = %v, %v", l, err)
	}
	// Only what the store has besides the staged blobs is read from it.
	only := &memStore{blobs: map[digest.Digest][]byte{}}
	for _, b := range rest {
		only.blobs[b.Digest] = store.blobs[b.Digest]
	}
	out, err := st.Commit(context.Background(), testIndex("", blobs), only)
	if err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if out.ID != st.ID() || !out.Created.Equal(testTime) {
		t.Errorf("index id %s created %s, want %s %s", out.ID, out.Created, st.ID(), testTime)
	}
	if only.opened != len(rest) {
		t.Errorf("Commit read %d blobs from the store, want %d", only.opened, len(rest))
	}
	r := checkArchive(t, dir, store, blobs)
	for _, b := range r.Index().Blobs {
		if slices.ContainsFunc(staged, func(s Blob) bool { return s.Digest == b.Digest }) && b.Chunk < 2 {
			t.Errorf("staged blob %s is in chunk %d", b.Digest, b.Chunk)
		}
	}
	for _, f := range chunkFiles(t, dir) {
		if st, _ := os.Stat(f); st.Size() > testMax {
			t.Errorf("%s is %d bytes, over the limit", f, st.Size())
		}
	}
	var total int64
	for _, b := range blobs {
		total += b.Size
	}
	if len(progress) == 0 || progress[len(progress)-1] != total {
		t.Errorf("progress %v, want to end at %d", progress, total)
	}
	// The files of an OCI layout come out of the chunks as they would from Write's.
	x := t.TempDir()
	extract(t, chunkFiles(t, dir), x)
	for _, b := range blobs {
		data, err := os.ReadFile(filepath.Join(x, "blobs", "sha256", b.Digest.Encoded()))
		if err != nil || !bytes.Equal(data, store.blobs[b.Digest]) {
			t.Errorf("extracted %s: %v", b.Digest, err)
		}
	}
}

// TestStagedArchiveWrittenAfresh: when a staged blob is not carried (its
// image failed) or a place stayed empty (its transfer failed), Commit
// writes the archive again from the staged blobs, and it is whole.
func TestStagedArchiveWrittenAfresh(t *testing.T) {
	for _, tc := range []struct {
		name string
		drop bool // a staged blob is left out of the index
		hole bool // a place is left unfinished
	}{{"blob not carried", true, false}, {"place left empty", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			store, blobs := newStore(8, mixedSizes...)
			st, err := Stage(dir, testTime, WriteOptions{MaxChunk: testMax})
			if err != nil {
				t.Fatal(err)
			}
			skip := map[digest.Digest]bool{}
			carried := blobs
			if tc.hole {
				skip[blobs[5].Digest] = true
				carried = slices.Delete(slices.Clone(blobs), 5, 6)
			}
			stageAll(t, st, store, blobs, skip)
			if tc.drop {
				carried = slices.Delete(slices.Clone(blobs), 2, 3)
			}
			if _, err := st.Commit(context.Background(), testIndex("", carried), &memStore{}); err != nil {
				t.Fatalf("Commit: %v", err)
			}
			checkArchive(t, dir, store, carried)
		})
	}
}

// TestStagingAbandoned: an interrupted run leaves nothing a reader trusts,
// and the next Stage in the directory clears what it left.
func TestStagingAbandoned(t *testing.T) {
	dir := t.TempDir()
	store, blobs := newStore(9, 3000, 5000)
	st, err := Stage(dir, testTime, WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stageAll(t, st, store, blobs, nil)
	if l, err := List(dir); len(l) != 0 {
		t.Fatalf("List = %v, %v", l, err)
	}
	if _, err := Open(dir); err == nil {
		t.Fatal("Open found an archive in a staging directory")
	}
	// A killed process never calls Abort: the next Stage clears its files,
	// and keeps only its own journal there.
	next, err := Stage(dir, testTime, WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if names := dirNames(t, dir); len(names) != 1 || !strings.HasSuffix(names[0], next.ID()+journalSuffix) {
		t.Errorf("left behind: %v", names)
	}
	next.Abort()
	if names := dirNames(t, dir); len(names) != 0 {
		t.Errorf("left behind by Abort: %v", names)
	}
	st.Abort()
	if _, err := st.Reserve(blobs[0].Digest, blobs[0].Size); err == nil {
		t.Error("Reserve after Abort succeeded")
	}
}

// TestStagingLimits: a blob larger than the chunk limit is refused with
// Strict and gets a chunk of its own (and a warning) without; a slot
// takes no more than its blob's size; sizes must agree.
func TestStagingLimits(t *testing.T) {
	store, blobs := newStore(10, 20000, 100)
	dir := t.TempDir()
	st, err := Stage(dir, time.Time{}, WriteOptions{MaxChunk: testMax, Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	var strict *StrictError
	if _, err := st.Reserve(blobs[0].Digest, blobs[0].Size); !errors.As(err, &strict) || !strings.Contains(err.Error(), "set the archive size to at least") {
		t.Errorf("strict oversized blob: %v", err)
	}
	st.Abort()

	st, err = Stage(dir, time.Time{}, WriteOptions{MaxChunk: testMax})
	if err != nil {
		t.Fatal(err)
	}
	stageAll(t, st, store, blobs, nil)
	sl, err := st.Reserve(digest.FromString("x"), 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sl.Writer().Write([]byte("xy")); err == nil {
		t.Error("a slot took more than its size")
	}
	sl.Release()
	if _, err := st.Reserve(digest.FromString("x"), 2); err == nil {
		t.Error("the same blob staged with another size")
	}
	if _, err := st.Reserve(blobs[1].Digest, blobs[1].Size); !errors.Is(err, ErrStaged) {
		t.Errorf("a blob staged whole was given its place again: %v", err)
	}
	// A second writer of the same blob waits for the first, then takes
	// the slot if the first gave it up.
	held, err := st.Reserve(digest.FromString("y"), 1)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error)
	go func() {
		sl, err := st.Reserve(digest.FromString("y"), 1)
		if err == nil {
			sl.Release()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("second Reserve did not wait: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	held.Release()
	if err := <-got; err != nil {
		t.Errorf("second Reserve after the first gave up: %v", err)
	}
	// "x" stays unfinished: Commit writes afresh, leaving it out.
	if _, err := st.Commit(context.Background(), testIndex("", blobs), &memStore{}); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	r := checkArchive(t, dir, store, blobs)
	if len(r.Index().Chunks) < 2 {
		t.Errorf("the oversized blob did not get its own chunk: %+v", r.Index().Chunks)
	}
}

// TestStagingSalvaged: an archive that will not be committed keeps the
// blobs staged whole, in salvage files outside the chunk names, each where
// Salvage says; nothing a reader would take for an archive is left.
func TestStagingSalvaged(t *testing.T) {
	dir := t.TempDir()
	store, blobs := newStore(11, 3000, 5000, 7000, 9000)
	st, err := Stage(dir, testTime, WriteOptions{MaxChunk: testMax})
	if err != nil {
		t.Fatal(err)
	}
	stageAll(t, st, store, blobs, map[digest.Digest]bool{blobs[3].Digest: true})
	keep := filepath.Join(t.TempDir(), "salvage")
	kept, err := st.Salvage(keep)
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 3 {
		t.Fatalf("kept %d blobs, want the 3 staged whole", len(kept))
	}
	checkKept(t, kept, store, keep)
	if names := dirNames(t, dir); len(names) != 0 {
		t.Errorf("left in the archive directory: %v", names)
	}
}

// TestStagingRecovered: what a killed run had staged whole is found from
// its journal, each blob checked against its digest (one damaged after the
// fact is dropped, a torn last line ignored), and kept outside the archive
// directory; the next Stage finds nothing left to clear.
func TestStagingRecovered(t *testing.T) {
	dir := t.TempDir()
	store, blobs := newStore(12, 3000, 5000, 7000, 9000)
	st, err := Stage(dir, testTime, WriteOptions{MaxChunk: testMax})
	if err != nil {
		t.Fatal(err)
	}
	stageAll(t, st, store, blobs, map[digest.Digest]bool{blobs[0].Digest: true})
	// Damage one staged blob, and tear the journal's end, as a crash may.
	st.mu.Lock()
	bad := st.slots[blobs[1].Digest]
	journal := st.journal.Name()
	st.mu.Unlock()
	flipByte(t, bad.chunk.path, bad.off+10)
	j, err := os.OpenFile(journal, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	j.WriteString(`{"digest":"sha256:`)
	j.Close()

	into := filepath.Join(t.TempDir(), "salvage")
	kept, err := Recover(dir, into)
	if err != nil {
		t.Fatal(err)
	}
	checkKept(t, kept, store, into)
	got := map[digest.Digest]bool{}
	for _, k := range kept {
		got[k.Digest] = true
	}
	if len(got) != 2 || !got[blobs[2].Digest] || !got[blobs[3].Digest] {
		t.Errorf("recovered %v, want the two blobs staged whole and intact", got)
	}
	next, err := Stage(dir, testTime, WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	next.Abort()
	if names := dirNames(t, dir); len(names) != 0 {
		t.Errorf("left behind: %v", names)
	}
}

// checkKept checks that each kept blob lies, whole and intact, where it is
// said to, in a file of the recorded size in dir.
func checkKept(t *testing.T, kept []Salvaged, store *memStore, dir string) {
	t.Helper()
	for _, k := range kept {
		f, err := os.Open(k.At.Chunk)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		data := make([]byte, k.At.Size)
		_, err = f.ReadAt(data, k.At.Offset)
		f.Close()
		if err != nil || !bytes.Equal(data, store.blobs[k.Digest]) || st.Size() != k.At.ChunkSize || filepath.Dir(k.At.Chunk) != dir {
			t.Errorf("kept %s at %+v: %v", k.Digest, k.At, err)
		}
	}
}

// TestStagingJournalFormat: each journal line carries its format; lines
// without one (written before lines had it) are read as format 1 and their
// blobs kept; a journal with a line of a newer format is refused by name,
// nothing kept from it.
func TestStagingJournalFormat(t *testing.T) {
	stageKilled := func() (dir, journal string, store *memStore, blobs []Blob) {
		dir = t.TempDir()
		store, blobs = newStore(21, 3000, 5000)
		st, err := Stage(dir, testTime, WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		stageAll(t, st, store, blobs, nil)
		st.mu.Lock()
		journal = st.journal.Name()
		st.mu.Unlock()
		return dir, journal, store, blobs // never committed nor aborted: killed
	}
	rewrite := func(path string, edit func(line string) string) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
		for i, l := range lines {
			if !strings.HasPrefix(l, `{"formatVersion":1,"digest":"sha256:`) {
				t.Fatalf("journal line %q does not start with its format", l)
			}
			lines[i] = edit(l)
		}
		if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	dir, journal, store, blobs := stageKilled()
	rewrite(journal, func(l string) string { return strings.Replace(l, `"formatVersion":1,`, "", 1) })
	into := filepath.Join(t.TempDir(), "salvage")
	kept, err := Recover(dir, into)
	if err != nil || len(kept) != len(blobs) {
		t.Fatalf("a journal whose lines have no format: kept %d of %d blobs, %v", len(kept), len(blobs), err)
	}
	checkKept(t, kept, store, into)

	dir, journal, _, _ = stageKilled()
	first := true
	rewrite(journal, func(l string) string {
		if first {
			first = false
			return strings.Replace(l, `"formatVersion":1,`, `"formatVersion":2,`, 1)
		}
		return l
	})
	kept, err = Recover(dir, filepath.Join(t.TempDir(), "salvage"))
	if err == nil || !strings.Contains(err.Error(), filepath.Base(journal)) || !strings.Contains(err.Error(), "newer gapmirror") || len(kept) != 0 {
		t.Errorf("a newer journal: kept %d blobs, error %v; want none kept and the journal named", len(kept), err)
	}
}

// TestCommitKilledWhileMovingChunks: a run killed while Commit moved the
// chunks into place (chunk 1, with the index, goes last) leaves chunks 2
// and up under their final names without their chunk 1. They are never
// read as an archive (List says what left them and what to do), and the
// next run's Recover keeps their blobs and clears them, so that the
// directory's later archives are listed and applied; a journal left after
// chunk 1 was moved (the archive is complete) touches nothing.
func TestCommitKilledWhileMovingChunks(t *testing.T) {
	dir := t.TempDir()
	store, blobs := newStore(13, 3000, 5000, 7000, 9000)
	st, err := Stage(dir, testTime, WriteOptions{MaxChunk: testMax, Seq: 1})
	if err != nil {
		t.Fatal(err)
	}
	stageAll(t, st, store, blobs, nil)
	st.mu.Lock()
	journal := st.journal.Name()
	st.mu.Unlock()
	lines, err := os.ReadFile(journal)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := st.Commit(context.Background(), &Index{Blobs: blobs}, store)
	if err != nil {
		t.Fatal(err)
	}
	if len(idx.Chunks) < 3 {
		t.Fatalf("the archive has %d chunks; the test needs staged chunks 2 and up", len(idx.Chunks))
	}
	// Undo the last move and put the journal back: the state of a run
	// killed just before it moved chunk 1 into place.
	first := filepath.Join(dir, idx.Chunks[0].Name)
	if err := os.Rename(first, first+"."+idx.ID+".partial"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(journal, lines, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := List(dir); err == nil || !strings.Contains(err.Error(), "run mirror-to-disk into") || !strings.Contains(err.Error(), idx.Chunks[1].Name) {
		t.Errorf("List of the leftovers: %v, want them named with what to do", err)
	}

	into := filepath.Join(t.TempDir(), "salvage")
	kept, err := Recover(dir, into)
	if err != nil {
		t.Fatal(err)
	}
	checkKept(t, kept, store, into)
	if len(kept) != len(blobs) {
		t.Errorf("kept %d blobs of the moved chunks, want all %d", len(kept), len(blobs))
	}
	next, err := Stage(dir, testTime.Add(time.Hour), WriteOptions{MaxChunk: testMax, Seq: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := next.Commit(context.Background(), &Index{Blobs: blobs[:2]}, store); err != nil {
		t.Fatal(err)
	}
	found, err := List(dir)
	if err != nil || len(found) != 1 {
		t.Fatalf("after the next run: %v, %v", found, err)
	}
	checkArchive(t, dir, store, blobs[:2])

	// Killed after chunk 1 was moved, before the journal was removed: the
	// archive is complete and stays as it is.
	done := t.TempDir()
	st, err = Stage(done, testTime, WriteOptions{MaxChunk: testMax})
	if err != nil {
		t.Fatal(err)
	}
	stageAll(t, st, store, blobs, nil)
	st.mu.Lock()
	journal = st.journal.Name()
	st.mu.Unlock()
	if lines, err = os.ReadFile(journal); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Commit(context.Background(), &Index{Blobs: blobs}, store); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(journal, lines, 0o644); err != nil {
		t.Fatal(err)
	}
	if kept, err := Recover(done, into); err != nil || len(kept) != 0 {
		t.Errorf("Recover with a complete archive: kept %d, %v", len(kept), err)
	}
	checkArchive(t, done, store, blobs)
}
