package archive

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	digest "github.com/opencontainers/go-digest"
)

// Staging is an archive being written while its blobs arrive: each blob
// streams straight into its place in a chunk, so mirror-to-disk writes its
// bytes once instead of once into the store and again into the archive.
//
// Staged blobs go into chunks 2 and up (chunk 1 starts with the index, whose
// size is known only at the end). Commit then writes chunk 1 with the index,
// the extra files and the blobs taken from another source (manifests,
// images gapmirror built), closes and checks the staged chunks, and moves
// everything into place as Write does. Until then the chunks have temporary
// names that no reader trusts and that the next Write or Stage removes.
//
// The caller verifies each blob's content against its digest before it
// calls Slot.Done: Staging trusts what it is told is complete.
type Staging struct {
	dir     string
	opts    WriteOptions
	id      string
	created time.Time
	seq     int

	mu     sync.Mutex
	freed  *sync.Cond     // a slot stopped being busy
	chunks []*stagedChunk // chunk n is chunks[n-2]
	slots  map[digest.Digest]*Slot
	over   []oversize
	ended  bool
	// journal lists the blobs staged whole, a line each, so that a run
	// killed before Commit or Salvage can be recovered (see Recover).
	journal *os.File
}

// stagedChunk is one chunk file being filled.
type stagedChunk struct {
	n    int
	path string
	f    *os.File
	used int64 // bytes reserved, marker included, trailer not
	full bool  // an oversized blob has it to itself
}

// Slot is the place of one blob in a staged chunk.
type Slot struct {
	s     *Staging
	chunk *stagedChunk
	d     digest.Digest
	off   int64 // where the blob's data starts
	size  int64
	done  bool
	busy  bool
}

// Stage starts an archive in dir. opts are those of Write; created becomes
// the archive's creation time (and every entry's mtime).
func Stage(dir string, created time.Time, opts WriteOptions) (*Staging, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if created.IsZero() {
		created = time.Now()
	}
	created = created.UTC().Truncate(time.Second)
	id, err := newID(created)
	if err != nil {
		return nil, err
	}
	s := &Staging{dir: dir, opts: opts, created: created, id: id, slots: map[digest.Digest]*Slot{}}
	s.freed = sync.NewCond(&s.mu)
	if s.seq, err = chooseSeq(dir, opts.Seq, opts.Replace); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating archive directory: %w", err)
	}
	if err := removePartials(dir); err != nil {
		return nil, err
	}
	j, err := os.OpenFile(filepath.Join(dir, SeqChunkName(s.seq, 1)+"."+s.id+journalSuffix), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("starting the archive in %s: %w", dir, err)
	}
	s.journal = j
	return s, nil
}

// journalSuffix ends a staging journal's name; stagedSuffix a staged chunk's.
// Both match partialRE: an unrecovered one goes with the leftovers.
const (
	journalSuffix = ".journal.partial"
	stagedSuffix  = ".staged.partial"
)

// ID is the archive's id.
func (s *Staging) ID() string { return s.id }

// Has reports whether blob d is staged whole.
func (s *Staging) Has(d digest.Digest) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sl := s.slots[d]
	return sl != nil && sl.done
}

// ErrStaged says that the blob was staged whole meanwhile.
var ErrStaged = errors.New("blob already staged")

// Reserve gives blob d (size bytes) its place in a chunk, or the place it
// already has. One writer holds a slot at a time: Reserve waits while
// another does, and returns ErrStaged if that one staged the blob whole.
func (s *Staging) Reserve(d digest.Digest, size int64) (*Slot, error) {
	if err := validDigest(d); err != nil {
		return nil, fmt.Errorf("staging blob %q: %w", d, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if s.ended {
			return nil, fmt.Errorf("staging blob %s: the archive is already committed or abandoned", d)
		}
		sl := s.slots[d]
		if sl == nil {
			break
		}
		if sl.size != size {
			return nil, fmt.Errorf("blob %s is %d bytes, staged earlier as %d", d, size, sl.size)
		}
		switch {
		case sl.done:
			return nil, ErrStaged
		case sl.busy:
			s.freed.Wait()
			continue
		}
		sl.busy = true
		return sl, nil
	}
	hdr, err := headerBytes(blobName(d), size, s.created)
	if err != nil {
		return nil, err
	}
	entry := int64(len(hdr)) + padded(size)
	c, err := s.chunkFor(d, size, entry)
	if err != nil {
		return nil, err
	}
	at := c.used
	if _, err := writeAt(c.f, hdr, at); err != nil {
		return nil, NoSpace(fmt.Errorf("writing into %s: %w", filepath.Base(c.path), err), s.dir, entry, true)
	}
	c.used += entry
	sl := &Slot{s: s, chunk: c, d: d, off: at + int64(len(hdr)), size: size, busy: true}
	s.slots[d] = sl
	return sl, nil
}

// chunkFor is the first chunk with room for an entry of the given size,
// creating one when none has it. A blob that fits in no chunk gets one to
// itself (an oversized chunk: a warning, or with Strict an error).
func (s *Staging) chunkFor(d digest.Digest, size, entry int64) (*stagedChunk, error) {
	for _, c := range s.chunks {
		if !c.full && c.used+entry+trailerSize <= s.opts.MaxChunk {
			return c, nil
		}
	}
	n := len(s.chunks) + 2
	marker := markerBytes(s.id, n)
	hdr, err := headerBytes(chunkMarkerName, int64(len(marker)), s.created)
	if err != nil {
		return nil, err
	}
	used := int64(len(hdr)) + padded(int64(len(marker)))
	full := used+entry+trailerSize > s.opts.MaxChunk
	if full {
		o := oversize{what: fmt.Sprintf("blob %s (%s)", d, humanSize(size)), chunk: n, seq: s.seq, size: used + entry + trailerSize}
		if s.opts.Strict {
			return nil, &StrictError{msg: o.message(s.opts.MaxChunk, true)}
		}
		s.over = append(s.over, o)
	}
	p := filepath.Join(s.dir, SeqChunkName(s.seq, n)+"."+s.id+stagedSuffix)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("creating %s: %w", SeqChunkName(s.seq, n), err)
	}
	block := append(hdr, marker...)
	block = append(block, make([]byte, padded(int64(len(marker)))-int64(len(marker)))...)
	if _, err := writeAt(f, block, 0); err != nil {
		f.Close()
		os.Remove(p)
		return nil, NoSpace(fmt.Errorf("writing %s: %w", SeqChunkName(s.seq, n), err), s.dir, used, true)
	}
	c := &stagedChunk{n: n, path: p, f: f, used: used, full: full}
	s.chunks = append(s.chunks, c)
	return c, nil
}

// StrictError refuses a blob larger than a chunk when the archive size is strict.
type StrictError struct{ msg string }

func (e *StrictError) Error() string { return "strict archive size: " + e.msg }

// headerBytes is the tar header of an entry as archive/tar writes it.
func headerBytes(name string, size int64, mtime time.Time) ([]byte, error) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	if err := tw.WriteHeader(newHeader(name, size, mtime)); err != nil {
		return nil, fmt.Errorf("tar header for %s: %w", name, err)
	}
	return b.Bytes(), nil
}

// Writer writes the blob's content from its start; it refuses to write past
// the blob's size. A retry takes a new Writer.
func (sl *Slot) Writer() io.Writer {
	return &slotWriter{f: sl.chunk.f, off: sl.off, end: sl.off + sl.size, d: sl.d, s: sl.s}
}

// Done marks the blob staged whole: the caller has written exactly its
// size and checked its digest.
func (sl *Slot) Done() {
	sl.s.mu.Lock()
	sl.done, sl.busy = true, false
	sl.s.freed.Broadcast()
	if j := sl.s.journal; j != nil {
		line, _ := json.Marshal(journalEntry{FormatVersion: journalFormat, Digest: sl.d, Chunk: filepath.Base(sl.chunk.path), Offset: sl.off, Size: sl.size}) // cannot fail: plain struct
		_, _ = j.Write(append(line, '\n'))                                                                                                                    // advice for Recover, which checks every blob
	}
	sl.s.mu.Unlock()
	sl.s.startWriteback(sl.chunk.f, sl.off, sl.size)
}

// journalFormat is the format of the staging journal lines this gapmirror
// writes and the newest Recover reads; a line without one (written before
// lines had it) is format 1. Recover checks every blob a journal lists
// against its digest, so a misread line could only cost a download; the
// version is there so that a newer layout is refused by name instead of
// silently recovering nothing. Each line carries it, not a first line, so
// that a journal holding a line means a blob staged whole.
const journalFormat = 1

// journalEntry is a line of a staging journal.
type journalEntry struct {
	FormatVersion int           `json:"formatVersion,omitempty"`
	Digest        digest.Digest `json:"digest"`
	Chunk         string        `json:"chunk"` // the staged chunk file's name in the archive directory
	Offset        int64         `json:"offset"`
	Size          int64         `json:"size"`
}

// Release gives the slot up without marking it done: a later Reserve of
// the same blob writes it again in the same place.
func (sl *Slot) Release() {
	sl.s.mu.Lock()
	sl.busy = false
	sl.s.freed.Broadcast()
	sl.s.mu.Unlock()
}

type slotWriter struct {
	f        *os.File
	off, end int64
	d        digest.Digest
	s        *Staging
}

func (w *slotWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > w.end-w.off {
		return 0, fmt.Errorf("blob %s: more data than its size", w.d)
	}
	n, err := writeAt(w.f, p, w.off)
	w.off += int64(n)
	if err != nil {
		return n, NoSpace(fmt.Errorf("writing blob %s into the archive: %w", w.d, err), w.s.dir, w.end-w.off+int64(n), true)
	}
	return n, nil
}

// Open reads a staged blob (for Commit's fallback to Write).
func (s *Staging) Open(d digest.Digest) (io.ReadCloser, error) {
	s.mu.Lock()
	sl := s.slots[d]
	s.mu.Unlock()
	if sl == nil || !sl.done {
		return nil, fmt.Errorf("blob %s is not staged", d)
	}
	return io.NopCloser(io.NewSectionReader(sl.chunk.f, sl.off, sl.size)), nil
}

// Abort removes the staged chunks. It is safe to call after Commit.
func (s *Staging) Abort() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = true
	s.freed.Broadcast()
	for _, c := range s.chunks {
		if c.f != nil {
			c.f.Close()
			c.f = nil
		}
		os.Remove(c.path)
	}
	if s.journal != nil {
		s.journal.Close()
		os.Remove(s.journal.Name())
		s.journal = nil
	}
}

// Salvaged is a blob staged whole that an unfinished archive leaves in a
// salvage file, and where.
type Salvaged struct {
	Digest digest.Digest
	At     Location
}

// Salvage ends an archive that will not be committed (the run was
// interrupted) but keeps what it staged whole: each staged chunk holding
// such blobs is synced and moved into dir (created if needed) as a
// salvage file, never a chunk name, and the blobs' places are returned so
// that a later run can read them instead of fetching them again. Chunks
// without a whole blob are removed. Salvage is final, like Abort.
func (s *Staging) Salvage(dir string) ([]Salvaged, error) {
	s.mu.Lock()
	s.ended = true
	s.freed.Broadcast()
	byChunk := map[*stagedChunk][]*Slot{}
	for _, sl := range s.slots {
		if sl.done {
			byChunk[sl.chunk] = append(byChunk[sl.chunk], sl)
		}
	}
	s.mu.Unlock()
	var out []Salvaged
	var errs []error
	for _, c := range s.chunks {
		slots := byChunk[c]
		if len(slots) == 0 || c.f == nil {
			continue
		}
		to := filepath.Join(dir, filepath.Base(strings.TrimSuffix(c.path, ".partial"))+".salvage")
		err := os.MkdirAll(dir, 0o755)
		if err == nil {
			err = c.f.Sync()
		}
		var size int64
		if err == nil {
			var st os.FileInfo
			if st, err = c.f.Stat(); err == nil {
				size = st.Size()
			}
		}
		if err == nil {
			err = os.Rename(c.path, to)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("keeping the blobs of %s: %w", filepath.Base(c.path), err))
			continue
		}
		for _, sl := range slots {
			out = append(out, Salvaged{Digest: sl.d, At: Location{Chunk: to, ChunkSize: size, Offset: sl.off, Size: sl.size}})
		}
	}
	s.Abort() // closes the files; the renamed ones are not removed
	return out, errors.Join(errs...)
}

// Recover keeps what a run killed while staging an archive in dir had
// staged whole: it reads the journals such runs left, checks each blob they
// list against its digest in the staged chunk, and moves each chunk holding
// at least one good blob into into, as Salvage does, returning the good
// blobs' places. Everything else they left is for the next Write or Stage
// to remove. Call it before Stage, which removes leftovers.
func Recover(dir, into string) ([]Salvaged, error) {
	journals, err := filepath.Glob(filepath.Join(dir, "mirror_*"+journalSuffix))
	if err != nil {
		return nil, err
	}
	var out []Salvaged
	var errs []error
	for _, jp := range journals {
		got, err := recoverJournal(dir, jp, into)
		out = append(out, got...)
		if err != nil {
			errs = append(errs, err)
		}
		os.Remove(jp)
	}
	return out, errors.Join(errs...)
}

// recoverJournal recovers the blobs one journal lists.
func recoverJournal(dir, journal, into string) ([]Salvaged, error) {
	data, err := os.ReadFile(journal)
	if err != nil {
		return nil, err
	}
	orphans := uncommitted(dir, journal)
	byChunk := map[string][]journalEntry{}
	for _, line := range bytes.Split(data, []byte("\n")) {
		var e journalEntry
		err := json.Unmarshal(line, &e)
		if err == nil && e.FormatVersion > journalFormat {
			return nil, fmt.Errorf("staging journal %s was written by a newer gapmirror (format %d, this one reads up to %d): its blobs are not kept and are downloaded again", journal, e.FormatVersion, journalFormat)
		}
		if err != nil || validDigest(e.Digest) != nil || e.Offset < 0 || e.Size < 0 ||
			e.Chunk != filepath.Base(e.Chunk) || !strings.HasSuffix(e.Chunk, stagedSuffix) || !partialRE.MatchString(e.Chunk) {
			continue // a torn last line, or not ours
		}
		byChunk[e.Chunk] = append(byChunk[e.Chunk], e)
	}
	var out []Salvaged
	var errs []error
	for staged, entries := range byChunk {
		name := staged
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			// Moved into place already by a Commit killed before it
			// moved chunk 1?
			final := strings.TrimSuffix(strings.TrimSuffix(staged, stagedSuffix), "."+journalID(journal))
			if !orphans[final] {
				continue // removed already
			}
			if f, err = os.Open(filepath.Join(dir, final)); err != nil {
				continue
			}
			name = final
			delete(orphans, final)
		}
		var good []journalEntry
		for _, e := range entries {
			h := e.Digest.Algorithm().Hash()
			if n, err := io.Copy(h, io.NewSectionReader(f, e.Offset, e.Size)); err == nil && n == e.Size && digest.NewDigest(e.Digest.Algorithm(), h) == e.Digest {
				good = append(good, e)
			}
		}
		st, err := f.Stat()
		if err == nil && len(good) > 0 {
			err = f.Sync() // the killed run never synced it
		}
		f.Close()
		if len(good) == 0 || err != nil {
			continue
		}
		to := filepath.Join(into, strings.TrimSuffix(staged, ".partial")+".salvage")
		if err := os.MkdirAll(into, 0o755); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := os.Rename(filepath.Join(dir, name), to); err != nil {
			errs = append(errs, fmt.Errorf("keeping the blobs of %s: %w", name, err))
			continue
		}
		for _, e := range good {
			out = append(out, Salvaged{Digest: e.Digest, At: Location{Chunk: to, ChunkSize: st.Size(), Offset: e.Offset, Size: e.Size}})
		}
	}
	// The rest of the uncommitted archive's chunks hold nothing kept: no
	// reader may take them for an archive's.
	for name := range orphans {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing %s, a chunk of an archive that was never completed: %w", name, err))
		}
	}
	return out, errors.Join(errs...)
}

// journalID is the archive id in a staging journal's name,
// mirror_….tar.<id>.journal.partial.
func journalID(journal string) string {
	name := strings.TrimSuffix(filepath.Base(journal), journalSuffix)
	_, id, _ := strings.Cut(name, ".tar.")
	return id
}

// uncommitted finds the chunk files that a Commit, killed while it moved
// the archive's chunks into place (chunk 1, which holds the index, goes
// last), left under their final names: chunks of the journal's archive
// while its chunk 1 is not in place. Nothing reads them (List refuses a
// set of chunks without its chunk 1), but they would stand in the way of
// every later archive in the directory. An archive whose chunk 1 is in
// place was committed: it has none.
func uncommitted(dir, journal string) map[string]bool {
	id := journalID(journal)
	first := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(journal), journalSuffix), "."+id)
	seq, n, ok := chunkSeq(first)
	if id == "" || !ok || n != 1 {
		return nil
	}
	if idx, err := readIndexFile(dir, first); err == nil && idx.ID == id {
		return nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	out := map[string]bool{}
	for _, e := range entries {
		s, n, ok := chunkSeq(e.Name())
		if !ok || s != seq || n < 2 || !e.Type().IsRegular() {
			continue
		}
		if m, err := readMarker(filepath.Join(dir, e.Name())); err == nil && m.Archive == id && m.Chunk == n {
			out[e.Name()] = true
		}
	}
	return out
}

// Commit completes the archive: idx lists every blob it carries (digest
// and size) and its extra files, as for Write. Blobs staged whole keep their
// place; the others are read from more and written into chunk 1, or into
// new chunks after the staged ones. When the staged chunks hold something
// the archive must not carry or lack something they were given a place for
// (a blob whose image failed, a transfer that never finished), the archive
// is written afresh by Write instead, from the staged blobs and more.
// Either way the staged chunks are gone afterwards.
func (s *Staging) Commit(ctx context.Context, idx *Index, more BlobSource) (*Index, error) {
	defer s.Abort()
	s.mu.Lock()
	s.ended = true
	s.freed.Broadcast()
	s.mu.Unlock()
	in := *idx
	in.ID, in.Created = s.id, s.created
	out, err := prepare(&in)
	if err != nil {
		return nil, err
	}
	out.Seq = s.seq
	if !s.fits(out) {
		opts := s.opts
		opts.Seq = s.seq
		opts.Replace = true // the same sequence chooseSeq allowed at Stage
		opts.keepPartials = true
		s.opts.Logger.Debug("writing the archive afresh: its staged chunks do not match the blobs it carries", "archive", s.id)
		return write(ctx, s.dir, &in, eitherSource{s, more}, opts)
	}
	fixed := make([][]Blob, len(s.chunks))
	sizes := make([]int64, len(s.chunks))
	staged := map[digest.Digest]bool{}
	for _, sl := range s.slots {
		fixed[sl.chunk.n-2] = append(fixed[sl.chunk.n-2], Blob{Digest: sl.d, Size: sl.size})
		staged[sl.d] = true
	}
	for i, c := range s.chunks {
		sizes[i] = c.used + trailerSize
	}
	p := planner{max: s.opts.MaxChunk, id: out.ID, seq: out.Seq, mtime: out.Created, fixed: fixed, fixedSizes: sizes}
	l, err := p.plan(out)
	if err != nil {
		return nil, err
	}
	l.oversized = append(l.oversized, s.over...)
	if err := l.checkSize(s.opts); err != nil {
		return nil, err
	}
	w := &writer{ctx: ctx, dir: s.dir, idx: out, layout: l, blobs: more, progress: s.opts.Progress, staged: map[int]*stagedChunk{}}
	for _, c := range s.chunks {
		w.staged[c.n] = c
	}
	if err := w.run(); err != nil {
		return nil, err
	}
	return out, nil
}

// fits reports whether the staged chunks hold exactly blobs of idx, each
// whole: nothing the archive does not carry, no place left empty.
func (s *Staging) fits(idx *Index) bool {
	want := make(map[digest.Digest]int64, len(idx.Blobs))
	for _, b := range idx.Blobs {
		want[b.Digest] = b.Size
	}
	for d, sl := range s.slots {
		if size, ok := want[d]; !sl.done || !ok || size != sl.size {
			return false
		}
	}
	return true
}

// finishStaged ends staged chunk n: the tar trailer, then sync, then its
// sha256 read back from the disk's copy.
func (w *writer) finishStaged(c *stagedChunk) error {
	name := w.name(c.n)
	size := w.layout.sizes[c.n-1]
	if size != c.used+trailerSize {
		return fmt.Errorf("internal error: %s planned at %d bytes, staged %d", name, size, c.used+trailerSize)
	}
	if _, err := writeAt(c.f, make([]byte, trailerSize), c.used); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	if err := c.f.Sync(); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	h := sha256.New()
	src := &contextReader{ctx: w.ctx, r: io.NewSectionReader(c.f, 0, size+1)}
	n, err := io.Copy(h, bufio.NewReaderSize(src, 1<<20))
	if err != nil {
		return fmt.Errorf("reading %s back: %w", name, err)
	}
	if n != size {
		return fmt.Errorf("internal error: %s is %d bytes, planned %d", name, n, size)
	}
	if err := c.f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	c.f = nil
	w.idx.Chunks[c.n-1].SHA256 = digest.NewDigestFromBytes(digest.SHA256, h.Sum(nil))
	if w.temps == nil {
		w.temps = map[int]string{}
	}
	w.temps[c.n] = c.path
	for _, b := range w.layout.chunks[c.n-1] {
		w.done += b.Size
	}
	if w.progress != nil {
		w.progress(w.done, w.total)
	}
	return nil
}

// eitherSource reads a blob from the staged chunks, or else from more.
type eitherSource struct {
	s    *Staging
	more BlobSource
}

func (e eitherSource) Open(d digest.Digest) (io.ReadCloser, error) {
	if e.s.Has(d) {
		return e.s.Open(d)
	}
	if e.more == nil {
		return nil, errors.New("blob " + d.String() + " is neither staged nor elsewhere")
	}
	return e.more.Open(d)
}
