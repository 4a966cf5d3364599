package archive

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	digest "github.com/opencontainers/go-digest"
)

// BlobSource gives the content of blobs by digest; the local store and a
// Reader implement it.
type BlobSource interface {
	// Open returns the blob's content; the caller closes it.
	Open(d digest.Digest) (io.ReadCloser, error)
}

// WriteOptions tunes Write.
type WriteOptions struct {
	// MaxChunk is the largest size of a chunk file in bytes (0: defaultMaxChunk).
	MaxChunk int64
	// Strict makes a blob (or index) larger than MaxChunk an error instead of
	// a warning and an oversized chunk.
	Strict bool
	// Logger receives warnings (oversized chunks); nil means slog.Default().
	Logger *slog.Logger
	// Progress, if set, is called after each blob with the blob bytes written so far and in total.
	Progress func(done, total int64)
	// Seq is the archive's sequence in its workspace. When set, the chunks
	// are named mirror_<seq>_<n>.tar, or mirror_<n>.tar if dir holds no
	// other chunk file, and Write never replaces a chunk of another archive
	// unless Replace is set. When 0, chunks are named mirror_<n>.tar and
	// replace the archive of that naming in dir.
	Seq int
	// Replace lets Write replace chunk files of an earlier archive that
	// have the names the new archive needs.
	Replace bool

	// keepPartials: Staging.Commit writes afresh from its staged chunks,
	// which look like leftovers of an interrupted Write.
	keepPartials bool
}

// withDefaults fills the defaults in and checks the chunk size.
func (o WriteOptions) withDefaults() (WriteOptions, error) {
	if o.MaxChunk == 0 {
		o.MaxChunk = defaultMaxChunk
	}
	if o.MaxChunk < minMaxChunk {
		return o, fmt.Errorf("archive size %s is too small: use at least %s", humanSize(o.MaxChunk), humanSize(minMaxChunk))
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o, nil
}

// partialRE matches the temporary files Write creates; they never match the
// chunk name pattern, so no reader mistakes them for chunks.
var partialRE = regexp.MustCompile(`^mirror_([0-9]{4,}_)?[0-9]{6,}\.tar\.[A-Za-z0-9._-]+\.partial$`)

// write writes an archive into dir: the blobs listed in idx.Blobs (digest and
// size; read from blobs and verified against both), idx.Extras (name and
// Data), and an index describing them. It returns the completed index (IDs,
// chunk assignments, chunk sizes and checksums filled in); idx itself is not
// modified.
//
// Chunks are written under temporary names and moved into place only when
// every one is complete and synced, so an interrupted or failed Write leaves
// no mirror_*.tar a reader would trust, and an older archive already in dir
// stays intact. An archive with a sequence (opts.Seq) never replaces another
// (see WriteOptions.Seq); one that does (same names) is replaced only once
// the new archive is complete: its chunk 1 is removed first, then the new
// chunks are renamed into place (chunk 1 last) and its chunks beyond the
// new count are removed. Only one Write may run in a directory at a time.
func write(ctx context.Context, dir string, idx *Index, blobs BlobSource, opts WriteOptions) (*Index, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	out, err := prepare(idx)
	if err != nil {
		return nil, err
	}
	if out.Seq, err = chooseSeq(dir, opts.Seq, opts.Replace); err != nil {
		return nil, err
	}
	p := planner{max: opts.MaxChunk, id: out.ID, seq: out.Seq, mtime: out.Created}
	l, err := p.plan(out)
	if err != nil {
		return nil, err
	}
	if err := l.checkSize(opts); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating archive directory: %w", err)
	}
	if !opts.keepPartials {
		if err := removePartials(dir); err != nil {
			return nil, err
		}
	}

	w := &writer{ctx: ctx, dir: dir, idx: out, layout: l, blobs: blobs, progress: opts.Progress}
	if err := w.run(); err != nil {
		return nil, err
	}
	return out, nil
}

// checkSize refuses a layout with an oversized chunk when the size is
// strict, and warns of each otherwise.
func (l *layout) checkSize(opts WriteOptions) error {
	if len(l.oversized) == 0 {
		return nil
	}
	if opts.Strict {
		return &StrictError{msg: l.oversized[0].message(opts.MaxChunk, true)}
	}
	for _, o := range l.oversized {
		opts.Logger.Warn(o.message(opts.MaxChunk, false))
	}
	return nil
}

// run writes the archive; on failure nothing it wrote stays, and a full
// disk is reported with the bytes the chunks it had to write still need.
func (w *writer) run() error {
	for _, b := range w.idx.Blobs {
		w.total += b.Size
	}
	defer w.cleanup()
	err := w.write()
	if err == nil {
		return nil
	}
	var need int64
	for n, c := range w.idx.Chunks {
		if w.staged[n+1] == nil { // staged chunks were written already
			need += c.Size
		}
	}
	return NoSpace(err, w.dir, need, false)
}

// write writes the chunks under temporary names (chunk 1, with the index,
// last) and moves them into place.
func (w *writer) write() error {
	for n := 2; n <= len(w.layout.chunks); n++ {
		write := w.writeChunk
		if c := w.staged[n]; c != nil {
			write = func(int) error { return w.finishStaged(c) }
		}
		if err := write(n); err != nil {
			return err
		}
	}
	if err := w.writeFirstChunk(); err != nil {
		return err
	}
	return w.commit()
}

// prepare copies idx, fills defaults and derived fields, and validates it.
func prepare(idx *Index) (*Index, error) {
	if idx == nil {
		return nil, fmt.Errorf("archive index is nil")
	}
	out := *idx
	out.FormatVersion = formatVersion
	out.Tool = tool
	if out.ToolVersion == "" {
		out.ToolVersion = buildVersion()
	}
	if out.Created.IsZero() {
		out.Created = time.Now()
	}
	out.Created = out.Created.UTC().Truncate(time.Second)
	if out.ID == "" {
		var err error
		if out.ID, err = newID(out.Created); err != nil {
			return nil, err
		}
	}
	if err := validID(out.ID); err != nil {
		return nil, err
	}
	if out.BasedOn != "" {
		if err := validID(out.BasedOn); err != nil {
			return nil, fmt.Errorf("basedOn: %w", err)
		}
		if out.BasedOn == out.ID {
			return nil, fmt.Errorf("archive %s cannot be based on itself", out.ID)
		}
	}
	if out.Workspace != "" {
		if err := validID(out.Workspace); err != nil {
			return nil, fmt.Errorf("workspace: %w", err)
		}
	}
	if !utf8.ValidString(out.Config) {
		return nil, fmt.Errorf("pinned configuration is not UTF-8 text")
	}

	out.Blobs = append([]Blob(nil), idx.Blobs...)
	for i, b := range out.Blobs {
		if err := validDigest(b.Digest); err != nil {
			return nil, fmt.Errorf("blobs[%d]: digest %q: %w", i, b.Digest, err)
		}
		if b.Size < 0 {
			return nil, fmt.Errorf("blobs[%d]: %s has negative size %d", i, b.Digest, b.Size)
		}
	}
	sort.SliceStable(out.Blobs, func(a, b int) bool { return out.Blobs[a].Digest < out.Blobs[b].Digest })
	uniq := out.Blobs[:0]
	for _, b := range out.Blobs {
		if n := len(uniq); n > 0 && uniq[n-1].Digest == b.Digest {
			if uniq[n-1].Size != b.Size {
				return nil, fmt.Errorf("blob %s is listed with sizes %d and %d", b.Digest, uniq[n-1].Size, b.Size)
			}
			continue
		}
		b.Chunk = 0
		uniq = append(uniq, b)
	}
	out.Blobs = uniq

	out.Extras = make([]Extra, len(idx.Extras))
	for i, e := range idx.Extras {
		sum := sha256.Sum256(e.Data)
		out.Extras[i] = Extra{Name: e.Name, Size: int64(len(e.Data)), Digest: digest.NewDigestFromBytes(digest.SHA256, sum[:]), Data: e.Data}
	}
	if err := checkExtraNames(out.Extras); err != nil {
		return nil, err
	}
	out.Chunks = nil
	return &out, nil
}

// newID is a new archive id: its creation time and 48 random bits.
func newID(created time.Time) (string, error) {
	var r [6]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", fmt.Errorf("making archive id: %w", err)
	}
	return created.Format("20060102T150405Z") + "-" + hex.EncodeToString(r[:]), nil
}

// buildVersion is the version of the running gapmirror binary, as Go recorded it.
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// removePartials deletes temporary chunk files left by an interrupted Write.
func removePartials(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("reading archive directory: %w", err)
	}
	for _, e := range entries {
		if partialRE.MatchString(e.Name()) && e.Type().IsRegular() {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return fmt.Errorf("removing a temporary file of an interrupted archive: %w", err)
			}
		}
	}
	return nil
}

// writer holds the state of one Write.
type writer struct {
	ctx      context.Context
	dir      string
	idx      *Index
	layout   *layout
	blobs    BlobSource
	progress func(done, total int64)
	done     int64
	total    int64
	temps    map[int]string       // chunk number → temporary path
	staged   map[int]*stagedChunk // chunks Staging filled: only ended here
}

// name is the file name of chunk n.
func (w *writer) name(n int) string { return SeqChunkName(w.idx.Seq, n) }

// tempPath is the temporary name of chunk n.
func (w *writer) tempPath(n int) string {
	return filepath.Join(w.dir, w.name(n)+"."+w.idx.ID+".partial")
}

// cleanup removes temporary files that were not committed.
func (w *writer) cleanup() {
	for _, p := range w.temps {
		_ = os.Remove(p) // best effort: the next Write removes leftovers too
	}
}

// chunkFile is a chunk being written: tar on top of a buffer, a hash and a count.
type chunkFile struct {
	f    *os.File
	bw   *bufio.Writer
	hash *hashCounter
	tw   *tar.Writer
}

// hashCounter hashes and counts what is written through it.
type hashCounter struct {
	h interface {
		io.Writer
		Sum([]byte) []byte
	}
	n int64
}

func (h *hashCounter) Write(p []byte) (int, error) {
	h.n += int64(len(p))
	return h.h.Write(p)
}

func (w *writer) create(n int) (*chunkFile, error) {
	p := w.tempPath(n)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("creating %s: %w", w.name(n), err)
	}
	if w.temps == nil {
		w.temps = map[int]string{}
	}
	w.temps[n] = p
	bw := bufio.NewWriterSize(FileWriter(f), 1<<20)
	hc := &hashCounter{h: sha256.New()}
	return &chunkFile{f: f, bw: bw, hash: hc, tw: tar.NewWriter(io.MultiWriter(bw, hc))}, nil
}

// finish ends the tar, syncs and closes the file, and checks its planned size.
func (w *writer) finish(n int, c *chunkFile) (digest.Digest, error) {
	name := w.name(n)
	err := c.tw.Close()
	if err == nil {
		err = c.bw.Flush()
	}
	if err == nil {
		err = c.f.Sync()
	}
	if cerr := c.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("writing %s: %w", name, err)
	}
	if c.hash.n != w.layout.sizes[n-1] {
		return "", fmt.Errorf("internal error: %s is %d bytes, planned %d", name, c.hash.n, w.layout.sizes[n-1])
	}
	return digest.NewDigestFromBytes(digest.SHA256, c.hash.h.Sum(nil)), nil
}

// writeChunk writes chunk n (n ≥ 2): its marker, then its blobs.
func (w *writer) writeChunk(n int) error {
	c, err := w.create(n)
	if err != nil {
		return err
	}
	marker := markerBytes(w.idx.ID, n)
	if err := writeEntry(c.tw, chunkMarkerName, int64(len(marker)), w.idx.Created, bytes.NewReader(marker)); err != nil {
		c.f.Close()
		return fmt.Errorf("%s: %w", w.name(n), err)
	}
	if err := w.writeBlobs(n, c); err != nil {
		c.f.Close()
		return err
	}
	sum, err := w.finish(n, c)
	if err != nil {
		return err
	}
	w.idx.Chunks[n-1].SHA256 = sum
	return nil
}

// writeFirstChunk writes chunk 1: the final index and its checksum, the extra
// files, then the blobs of chunk 1. It runs last, once every other chunk's
// checksum is known.
func (w *writer) writeFirstChunk() error {
	planned := w.idx.Chunks[0].Size
	data, err := encodeIndex(w.idx, w.layout.rest, w.idx.Created)
	if err != nil {
		return err
	}
	if w.idx.Chunks[0].Size != planned {
		return fmt.Errorf("internal error: %s would be %d bytes, planned %d", w.name(1), w.idx.Chunks[0].Size, planned)
	}
	c, err := w.create(1)
	if err != nil {
		return err
	}
	sum := indexSum(data)
	err = writeEntry(c.tw, IndexName, int64(len(data)), w.idx.Created, bytes.NewReader(data))
	if err == nil {
		err = writeEntry(c.tw, indexSumName, int64(len(sum)), w.idx.Created, bytes.NewReader(sum))
	}
	for _, e := range w.idx.Extras {
		if err == nil {
			err = writeEntry(c.tw, e.Name, e.Size, w.idx.Created, bytes.NewReader(e.Data))
		}
	}
	if err == nil {
		err = w.writeBlobs(1, c)
	}
	if err != nil {
		c.f.Close()
		return fmt.Errorf("%s: %w", w.name(1), err)
	}
	_, err = w.finish(1, c)
	return err
}

// writeBlobs copies the blobs of chunk n from the source, verifying each.
func (w *writer) writeBlobs(n int, c *chunkFile) error {
	buf := make([]byte, 1<<20)
	for _, b := range w.layout.chunks[n-1] {
		if err := w.ctx.Err(); err != nil {
			return fmt.Errorf("archive not written: %w", err)
		}
		if err := w.copyBlob(c.tw, b, buf); err != nil {
			return err
		}
		w.done += b.Size
		if w.progress != nil {
			w.progress(w.done, w.total)
		}
	}
	return nil
}

// copyBlob copies one blob into the tar and checks its size and digest.
func (w *writer) copyBlob(tw *tar.Writer, b Blob, buf []byte) error {
	rc, err := w.blobs.Open(b.Digest)
	if err != nil {
		return fmt.Errorf("reading blob %s for the archive: %w", b.Digest, err)
	}
	defer rc.Close()
	if err := tw.WriteHeader(newHeader(blobName(b.Digest), b.Size, w.idx.Created)); err != nil {
		return fmt.Errorf("writing tar header for blob %s: %w", b.Digest, err)
	}
	h := b.Digest.Algorithm().Hash()
	src := &contextReader{ctx: w.ctx, r: io.TeeReader(io.LimitReader(rc, b.Size), h)}
	n, err := io.CopyBuffer(tw, src, buf)
	if err != nil {
		return fmt.Errorf("copying blob %s into the archive: %w", b.Digest, err)
	}
	if n < b.Size {
		return fmt.Errorf("blob %s in the store is %d bytes, expected %d: the store copy is damaged; remove it and mirror again", b.Digest, n, b.Size)
	}
	if extra, _ := rc.Read(buf[:1]); extra > 0 {
		return fmt.Errorf("blob %s in the store is longer than the expected %d bytes: the store copy is damaged; remove it and mirror again", b.Digest, b.Size)
	}
	if got := digest.NewDigest(b.Digest.Algorithm(), h); got != b.Digest {
		return fmt.Errorf("blob %s in the store is corrupt (its content hashes to %s): remove it and mirror again", b.Digest, got)
	}
	return nil
}

// contextReader stops reading once its context is done.
type contextReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *contextReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// commit moves the new chunks into place. Chunks of an older archive with
// the same names (allowed only with replace) are replaced: its chunk 1 is
// removed first, so that no mix of old and new is ever read as one archive,
// and its chunks beyond the new count are removed afterwards.
func (w *writer) commit() error {
	first := filepath.Join(w.dir, w.name(1))
	if err := os.Remove(first); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing chunk 1 of the older archive in %s: %w", w.dir, err)
	}
	for n := len(w.layout.chunks); n >= 1; n-- {
		if err := os.Rename(w.temps[n], filepath.Join(w.dir, w.name(n))); err != nil {
			return fmt.Errorf("moving %s into place (the archive in %s is incomplete; write it again): %w", w.name(n), w.dir, err)
		}
		delete(w.temps, n)
	}
	entries, err := os.ReadDir(w.dir)
	if err != nil {
		return fmt.Errorf("reading archive directory: %w", err)
	}
	for _, e := range entries {
		if seq, n, ok := chunkSeq(e.Name()); ok && seq == w.idx.Seq && n > len(w.layout.chunks) {
			if err := os.Remove(filepath.Join(w.dir, e.Name())); err != nil {
				return fmt.Errorf("removing %s of an older archive from %s: %w", e.Name(), w.dir, err)
			}
		}
	}
	return syncDir(w.dir)
}

// chooseSeq picks the naming of a new archive with sequence seq in dir (see
// WriteOptions.Seq) and refuses to replace chunks of another archive.
func chooseSeq(dir string, seq int, replace bool) (int, error) {
	if seq == 0 {
		return 0, nil
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading archive directory: %w", err)
	}
	var clash []string
	chunks := 0
	for _, e := range entries {
		if s, _, ok := chunkSeq(e.Name()); ok {
			chunks++
			if s == seq {
				clash = append(clash, e.Name())
			}
		}
	}
	if chunks == 0 {
		return 0, nil // a lone archive keeps oc-mirror's names
	}
	if len(clash) > 0 && !replace {
		sort.Strings(clash)
		e := &ReplaceError{Dir: dir, Chunks: clash}
		if idx, err := readIndexFile(dir, SeqChunkName(seq, 1)); err == nil {
			e.ID, e.Workspace = idx.ID, idx.Workspace
		}
		return 0, e
	}
	return seq, nil
}

// ReplaceError refuses to overwrite the chunks of an earlier archive: they
// may not have been carried across the air gap yet.
type ReplaceError struct {
	Dir    string
	Chunks []string
	// ID and Workspace are the earlier archive's, when its first chunk
	// could be read.
	ID, Workspace string
	// Writing is the workspace of the archive that would replace it, when
	// the caller knows it: the same Workspace means a run of it wrote the
	// earlier archive and was stopped before recording it (the caller
	// adopts such an archive when whole: this one is not); another means
	// another workspace's archive.
	Writing string
}

// Error names the chunks and says what to do.
func (e *ReplaceError) Error() string {
	mine := e.Writing != "" && e.Workspace == e.Writing
	foreign := e.Writing != "" && e.Workspace != "" && e.Workspace != e.Writing
	if mine {
		return fmt.Sprintf("%s already holds %s of archive %s, which an earlier run of this workspace wrote but was stopped before recording, and which is not whole (a chunk missing, cut short or damaged): "+
			"the workspace's next archives are not based on it; carry those chunks away first if you need them, or pass --force to replace them", e.Dir, strings.Join(e.Chunks, ", "), e.ID)
	}
	if foreign {
		return fmt.Sprintf("%s already holds %s of archive %s, written by another mirror-to-disk workspace (%s): "+
			"this archive would overwrite it; give each workspace's archives a directory of their own, carry those chunks away first, or pass --force to replace them", e.Dir, strings.Join(e.Chunks, ", "), e.ID, e.Workspace)
	}
	return fmt.Sprintf("%s already holds %s of an earlier archive with the same sequence number (the workspace records of the archives written there were removed or replaced): "+
		"this archive would overwrite it; carry those chunks away first, or pass --force to replace them", e.Dir, strings.Join(e.Chunks, ", "))
}

// syncDir flushes a directory's entries (renames, removals) to disk.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("syncing archive directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("syncing archive directory %s: %w", dir, err)
	}
	return nil
}
