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
	"hash"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	digest "github.com/opencontainers/go-digest"
)

// maxIndexSize bounds the index read into memory (a set of a million blobs
// stays far below it); a larger entry is not a gapmirror index.
const maxIndexSize = 1 << 30

// Reader reads an archive in place: blobs are streamed straight out of their
// chunk files and verified as they are read; nothing is unpacked.
type Reader struct {
	dir    string
	idx    *Index
	blobs  map[digest.Digest]location
	extras map[string]location
	stray  []string
	// progress, if set, hears the bytes Verify has read so far (SetProgress).
	progress func(done, total int64)
}

// SetProgress makes Verify report the chunk bytes read so far and in total.
func (r *Reader) SetProgress(f func(done, total int64)) { r.progress = f }

// location is where an entry's data lives.
type location struct {
	chunk  int
	offset int64
	size   int64
}

// corruptError reports a blob, extra file or chunk whose content does not
// match the index: the archive was damaged after it was written.
type corruptError struct {
	// Chunk is the chunk file name, e.g. "mirror_000002.tar".
	Chunk string
	// What names the damaged content, e.g. "blob sha256:…".
	What string
	// Detail says what was found instead.
	Detail string
}

// Error names the chunk and content and says what to do.
func (e *corruptError) Error() string {
	return fmt.Sprintf("%s: %s is corrupt (%s): the archive was damaged in transit; copy %s again", e.Chunk, e.What, e.Detail, e.Chunk)
}

// Open opens the latest archive in dir (see List and OpenFirst).
func Open(dir string) (*Reader, error) {
	found, err := List(dir)
	if err != nil {
		return nil, err
	}
	return OpenFirst(dir, found[len(found)-1].First)
}

// Listed is an archive found in a directory: the name of its first chunk
// and its verified index; its other chunks are not looked at.
type Listed struct {
	First string
	Index *Index
}

// List finds every archive in dir by its first chunk (mirror_000001.tar,
// mirror_<seq>_000001.tar) and reads its index, oldest first (by creation
// time, then sequence). It fails if there is none, or if the first chunk of
// a set of chunks is missing or unreadable: which archives are there must
// be known for sure before any is applied.
func List(dir string) ([]Listed, error) {
	families, v1, err := dirChunks(dir)
	if err != nil {
		return nil, err
	}
	if len(families) == 0 {
		if len(v1) > 0 {
			return nil, fmt.Errorf("%s holds an oc-mirror v1 archive (%s), not a gapmirror archive: unpack it with oc-mirror v1, or mirror to disk again with gapmirror", dir, v1[0])
		}
		return nil, fmt.Errorf("no gapmirror archive in %s: %s not found", dir, chunkName(1))
	}
	var out []Listed
	for seq, chunks := range families {
		first, ok := chunks[1]
		if !ok {
			if j, _ := filepath.Glob(filepath.Join(dir, SeqChunkName(seq, 1)+".*"+journalSuffix)); len(j) > 0 {
				return nil, fmt.Errorf("%s holds chunks of an archive mirror-to-disk was stopped from completing (%s without %s): run mirror-to-disk into %s again, which clears them, and carry none of them", dir, strings.Join(sortedValues(chunks), ", "), SeqChunkName(seq, 1), dir)
			}
			return nil, fmt.Errorf("%s is missing from %s: it holds the archive index; copy every chunk of the archive into %s", SeqChunkName(seq, 1), dir, dir)
		}
		idx, err := readIndexFile(dir, first)
		if err != nil {
			return nil, err
		}
		out = append(out, Listed{First: first, Index: idx})
	}
	sort.Slice(out, func(a, b int) bool {
		x, y := out[a].Index, out[b].Index
		if !x.Created.Equal(y.Created) {
			return x.Created.Before(y.Created)
		}
		if x.Seq != y.Seq {
			return x.Seq < y.Seq
		}
		return out[a].First < out[b].First
	})
	return out, nil
}

// sortedValues returns the values of m, sorted.
func sortedValues(m map[int]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// dirChunks lists the chunk files of dir by sequence (0: mirror_<n>.tar)
// and number, and any oc-mirror v1 archive files.
func dirChunks(dir string) (map[int]map[int]string, []string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("opening archive: %w", err)
	}
	families := map[int]map[int]string{}
	var v1 []string
	for _, e := range entries {
		if seq, n, ok := chunkSeq(e.Name()); ok {
			if families[seq] == nil {
				families[seq] = map[int]string{}
			}
			families[seq][n] = e.Name()
		} else if v1RE.MatchString(e.Name()) {
			v1 = append(v1, e.Name())
		}
	}
	return families, v1, nil
}

// readIndexFile reads and verifies the index of the first chunk first.
func readIndexFile(dir, first string) (*Index, error) {
	f, sc, err := openScan(dir, first)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readIndex(dir, first, sc, tar.NewReader(sc))
}

// openScan opens a chunk file for scanning its tar headers.
func openScan(dir, name string) (*os.File, *scanReader, error) {
	f, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		return nil, nil, fmt.Errorf("opening archive: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("opening archive: %w", err)
	}
	return f, newScanReader(f, st.Size()), nil
}

// OpenFirst opens the archive whose first chunk in dir is named first: it
// reads and verifies the index, checks that every chunk is present with
// the size the index records, and scans the tar headers of every chunk
// (without reading blob data) to locate each blob, rejecting any entry that
// is not an expected regular file.
func OpenFirst(dir, first string) (*Reader, error) {
	families, _, err := dirChunks(dir)
	if err != nil {
		return nil, err
	}
	seq, n, ok := chunkSeq(first)
	if !ok || n != 1 {
		return nil, fmt.Errorf("%s is not the first chunk of an archive", first)
	}
	r := &Reader{dir: dir, blobs: map[digest.Digest]location{}, extras: map[string]location{}}
	f, sc, err := openScan(dir, first)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr := tar.NewReader(sc)
	if r.idx, err = readIndex(dir, first, sc, tr); err != nil {
		return nil, err
	}
	if err := r.checkChunks(families[seq]); err != nil {
		return nil, err
	}
	want := make([]map[digest.Digest]int64, len(r.idx.Chunks)+1)
	for _, b := range r.idx.Blobs {
		if want[b.Chunk] == nil {
			want[b.Chunk] = map[digest.Digest]int64{}
		}
		want[b.Chunk][b.Digest] = b.Size
	}
	if err := r.scan(1, sc, tr, want[1]); err != nil {
		return nil, err
	}
	for n := 2; n <= len(r.idx.Chunks); n++ {
		if err := r.scanChunk(n, want[n]); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// v1RE matches oc-mirror v1 archive names (mirror_seq1_000000.tar).
var v1RE = regexp.MustCompile(`^mirror_seq[0-9]+_[0-9]+\.tar$`)

// readIndex reads the first two entries of chunk 1, the index and its
// checksum, and says what the file is when it is not a gapmirror archive.
func readIndex(dir, name string, sc *scanReader, tr *tar.Reader) (*Index, error) {
	var magic [4]byte
	n, _ := sc.r.ReadAt(magic[:], 0)
	switch {
	case n >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		return nil, fmt.Errorf("%s is gzip-compressed, not a gapmirror archive: oc-mirror v1 archives look like this (unpack it with oc-mirror v1); if it is a gapmirror chunk someone compressed, gunzip it first", name)
	case n == 4 && bytes.Equal(magic[:], []byte{0x28, 0xb5, 0x2f, 0xfd}):
		return nil, fmt.Errorf("%s is zstd-compressed: decompress every chunk (zstd -d) before reading the archive", name)
	}
	hdr, err := tr.Next()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s in %s is empty or not a tar file: copy every chunk of the archive again", name, dir)
		}
		return nil, fmt.Errorf("%s in %s is not a gapmirror archive (not a readable tar file: %v)", name, dir, err)
	}
	if hdr.Name != IndexName {
		switch {
		case hdr.Name == chunkMarkerName:
			return nil, fmt.Errorf("%s in %s is a later chunk of an archive, not its first: the chunk files were renamed; restore their original names", name, dir)
		case strings.Contains(hdr.Name, "docker/registry/v2") || strings.Contains(hdr.Name, "working-dir"):
			return nil, fmt.Errorf("%s in %s is an oc-mirror v2 archive (it starts with %q), not a gapmirror archive: use oc-mirror v2 for it, or mirror to disk again with gapmirror", name, dir, hdr.Name)
		default:
			return nil, fmt.Errorf("%s in %s is a tar file but not a gapmirror archive (it starts with %q, not %s)", name, dir, hdr.Name, IndexName)
		}
	}
	if hdr.Typeflag != tar.TypeReg || hdr.Size > maxIndexSize {
		return nil, fmt.Errorf("%s in %s: %s is not a regular file of plausible size", name, dir, IndexName)
	}
	data := make([]byte, hdr.Size)
	if _, err := io.ReadFull(tr, data); err != nil {
		return nil, fmt.Errorf("%s in %s is truncated inside the index (%v): copy it again", name, dir, err)
	}
	// The version comes first so that a newer archive gets "use a newer
	// gapmirror" even if a future format protects its index differently.
	if v := peekFormatVersion(data); v > formatVersion {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, name), &newerFormatError{Version: v})
	}
	hdr, err = tr.Next()
	if err != nil || hdr.Name != indexSumName || hdr.Typeflag != tar.TypeReg || hdr.Size > 4096 {
		return nil, &corruptError{Chunk: name, What: "the archive index", Detail: indexSumName + " does not follow it"}
	}
	sum, err := io.ReadAll(tr)
	if err != nil {
		return nil, &corruptError{Chunk: name, What: "the archive index", Detail: "reading " + indexSumName + ": " + err.Error()}
	}
	if err := checkIndexSum(data, sum); err != nil {
		return nil, &corruptError{Chunk: name, What: "the archive index", Detail: err.Error()}
	}
	idx, err := decodeIndex(data)
	if err != nil {
		return nil, fmt.Errorf("%s in %s: %w", name, dir, err)
	}
	if idx.Chunks[0].Name != name {
		return nil, fmt.Errorf("%s in %s is chunk 1 of archive %s, which named it %s: the chunk files were renamed; restore their original names", name, dir, idx.ID, idx.Chunks[0].Name)
	}
	idx.raw = data
	return idx, nil
}

// peekFormatVersion reads the formatVersion of an index without parsing the
// rest of it (gapmirror writes it as the first member), or returns 0.
func peekFormatVersion(data []byte) int {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return 0
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return 0
		}
		if key == "formatVersion" {
			var v int
			if dec.Decode(&v) != nil {
				return 0
			}
			return v
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return 0
		}
	}
	return 0
}

// checkChunks compares the chunk files on disk with the index and reports
// every missing, short, long or foreign chunk in one error.
func (r *Reader) checkChunks(onDisk map[int]string) error {
	var problems []string
	for _, c := range r.idx.Chunks {
		st, err := os.Stat(filepath.Join(r.dir, c.Name))
		switch {
		case errors.Is(err, os.ErrNotExist):
			if other := r.renamedChunk(c); other != "" {
				problems = append(problems, fmt.Sprintf("%s is missing (%s is that chunk under another name: rename it back to %s)", c.Name, other, c.Name))
			} else {
				problems = append(problems, c.Name+" is missing")
			}
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s cannot be read (%v)", c.Name, err))
		case !st.Mode().IsRegular():
			problems = append(problems, c.Name+" is not a regular file")
		case st.Size() != c.Size:
			if other := r.foreignChunk(c); other != "" {
				problems = append(problems, other)
			} else if st.Size() < c.Size {
				problems = append(problems, fmt.Sprintf("%s is truncated (%d of %d bytes)", c.Name, st.Size(), c.Size))
			} else {
				problems = append(problems, fmt.Sprintf("%s is %d bytes, not the %d the index records", c.Name, st.Size(), c.Size))
			}
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("archive %s in %s is incomplete: %s: copy every chunk of archive %s (%s) into %s",
			r.idx.ID, r.dir, strings.Join(problems, ", "), r.idx.ID, r.chunkRange(), r.dir)
	}
	for n, name := range onDisk {
		if n > len(r.idx.Chunks) {
			r.stray = append(r.stray, name)
		}
	}
	sort.Strings(r.stray)
	return nil
}

// renamedChunk finds, among the chunk-named files of the directory, one
// whose marker says it is chunk c of this archive, and returns its name
// (or ""): the chunk was renamed, on the media or on the way.
func (r *Reader) renamedChunk(c Chunk) string {
	if c.Number == 1 {
		return ""
	}
	entries, err := os.ReadDir(r.dir)
	if err != nil {
		return ""
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || !IsChunkName(e.Name()) || e.Name() == c.Name {
			continue
		}
		if m, err := readMarker(filepath.Join(r.dir, e.Name())); err == nil && m.Archive == r.idx.ID && m.Chunk == c.Number {
			return e.Name()
		}
	}
	return ""
}

// chunkRange renders the archive's chunk file names for messages.
func (r *Reader) chunkRange() string {
	n := len(r.idx.Chunks)
	if n == 1 {
		return r.chunkName(1)
	}
	return r.chunkName(1) + " to " + r.chunkName(n)
}

// chunkName is the file name of chunk n of the archive.
func (r *Reader) chunkName(n int) string { return r.idx.Chunks[n-1].Name }

// foreignChunk reads the marker of chunk c and, if it names another archive
// or chunk, says so; otherwise it returns "".
func (r *Reader) foreignChunk(c Chunk) string {
	if c.Number == 1 {
		return ""
	}
	m, err := readMarker(filepath.Join(r.dir, c.Name))
	if err != nil || (m.Archive == r.idx.ID && m.Chunk == c.Number) {
		return ""
	}
	return fmt.Sprintf("%s is chunk %d of archive %s, not of archive %s", c.Name, m.Chunk, m.Archive, r.idx.ID)
}

// readMarker reads the chunk marker at the start of a chunk file.
func readMarker(p string) (*chunkMarker, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr := tar.NewReader(bufio.NewReader(f))
	hdr, err := tr.Next()
	if err != nil {
		return nil, err
	}
	if hdr.Name != chunkMarkerName || hdr.Typeflag != tar.TypeReg || hdr.Size > 4096 {
		return nil, fmt.Errorf("%s does not start with %s", filepath.Base(p), chunkMarkerName)
	}
	var m chunkMarker
	if err := json.NewDecoder(tr).Decode(&m); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", filepath.Base(p), chunkMarkerName, err)
	}
	return &m, nil
}

// scanChunk checks the marker of chunk n and scans its entries.
func (r *Reader) scanChunk(n int, want map[digest.Digest]int64) error {
	name := r.chunkName(n)
	f, err := os.Open(filepath.Join(r.dir, name))
	if err != nil {
		return fmt.Errorf("opening archive: %w", err)
	}
	defer f.Close()
	sc := newScanReader(f, r.idx.Chunks[n-1].Size)
	tr := tar.NewReader(sc)
	hdr, err := tr.Next()
	if err != nil {
		return &corruptError{Chunk: name, What: "the chunk", Detail: "its first tar header cannot be read: " + err.Error()}
	}
	if err := checkEntry(name, hdr); err != nil {
		return err
	}
	if hdr.Name != chunkMarkerName || hdr.Size > 4096 {
		return &corruptError{Chunk: name, What: "the chunk", Detail: fmt.Sprintf("it starts with %q, not %s", hdr.Name, chunkMarkerName)}
	}
	var m chunkMarker
	if err := json.NewDecoder(tr).Decode(&m); err != nil {
		return &corruptError{Chunk: name, What: chunkMarkerName, Detail: err.Error()}
	}
	if m.Archive != r.idx.ID || m.Chunk != n {
		return fmt.Errorf("archive %s in %s is mixed up: %s is chunk %d of archive %s: copy every chunk of archive %s (%s) into %s",
			r.idx.ID, r.dir, name, m.Chunk, m.Archive, r.idx.ID, r.chunkRange(), r.dir)
	}
	return r.scan(n, sc, tr, want)
}

// checkEntry rejects tar entries gapmirror never writes: unsafe names and
// anything but plain regular files.
func checkEntry(chunk string, hdr *tar.Header) error {
	if unsafeName(hdr.Name) {
		return fmt.Errorf("%s: entry %q is not a safe relative path: this is not an archive gapmirror wrote, or it was tampered with", chunk, hdr.Name)
	}
	if hdr.Typeflag != tar.TypeReg {
		return fmt.Errorf("%s: entry %q is %s, not a regular file: this is not an archive gapmirror wrote, or it was tampered with", chunk, hdr.Name, typeName(hdr.Typeflag))
	}
	for k := range hdr.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return fmt.Errorf("%s: entry %q is a sparse file: this is not an archive gapmirror wrote", chunk, hdr.Name)
		}
	}
	return nil
}

// typeName describes a tar entry type for messages.
func typeName(t byte) string {
	switch t {
	case tar.TypeSymlink:
		return "a symbolic link"
	case tar.TypeLink:
		return "a hard link"
	case tar.TypeDir:
		return "a directory"
	case tar.TypeChar, tar.TypeBlock:
		return "a device"
	case tar.TypeFifo:
		return "a FIFO"
	default:
		return fmt.Sprintf("of tar type %q", t)
	}
}

// scan reads the remaining entries of chunk n, each of which must be one of
// the blobs in want, the blobs the index places in chunk n (or, in chunk 1, an
// extra file), and records where their data lies. Blob data is skipped, not
// read. Entries found are deleted from want.
func (r *Reader) scan(n int, sc *scanReader, tr *tar.Reader, want map[digest.Digest]int64) error {
	name := r.chunkName(n)
	wantExtra := map[string]int64{}
	if n == 1 {
		for _, e := range r.idx.Extras {
			wantExtra[e.Name] = e.Size
		}
	}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return &corruptError{Chunk: name, What: "the chunk", Detail: "reading its tar headers: " + err.Error()}
		}
		if err := checkEntry(name, hdr); err != nil {
			return err
		}
		loc := location{chunk: n, offset: sc.pos, size: hdr.Size}
		if size, ok := wantExtra[hdr.Name]; ok {
			if size != hdr.Size {
				return &corruptError{Chunk: name, What: "extra file " + hdr.Name, Detail: fmt.Sprintf("%d bytes, the index says %d", hdr.Size, size)}
			}
			delete(wantExtra, hdr.Name)
			r.extras[hdr.Name] = loc
			continue
		}
		d, ok := entryDigest(hdr.Name)
		if !ok {
			return fmt.Errorf("%s: unexpected entry %q: this is not an archive gapmirror wrote, or it was tampered with", name, hdr.Name)
		}
		size, ok := want[d]
		if !ok {
			return fmt.Errorf("%s: entry %q is not a blob the index places in this chunk: the archive was tampered with or its chunks mixed up", name, hdr.Name)
		}
		if size != hdr.Size {
			return &corruptError{Chunk: name, What: "blob " + d.String(), Detail: fmt.Sprintf("%d bytes, the index says %d", hdr.Size, size)}
		}
		delete(want, d)
		r.blobs[d] = loc
	}
	for d := range want {
		return &corruptError{Chunk: name, What: "the chunk", Detail: "blob " + d.String() + " listed in the index is not in it"}
	}
	for e := range wantExtra {
		return &corruptError{Chunk: name, What: "the chunk", Detail: "extra file " + e + " listed in the index is not in it"}
	}
	return nil
}

// entryDigest parses a blob entry name, blobs/<algorithm>/<hex>.
func entryDigest(name string) (digest.Digest, bool) {
	rest, ok := strings.CutPrefix(name, blobsDir+"/")
	if !ok {
		return "", false
	}
	alg, enc, ok := strings.Cut(rest, "/")
	if !ok {
		return "", false
	}
	d := digest.NewDigestFromEncoded(digest.Algorithm(alg), enc)
	return d, validDigest(d) == nil
}

// Location is where a blob's content lies in an archive on disk.
type Location struct {
	Chunk     string `json:"chunk"`     // the chunk file's path
	ChunkSize int64  `json:"chunkSize"` // its size, to tell it is still the same file
	Offset    int64  `json:"offset"`    // where the blob's content starts
	Size      int64  `json:"size"`
}

// Locate says where blob d's content lies.
func (r *Reader) Locate(d digest.Digest) (Location, bool) {
	loc, ok := r.blobs[d]
	if !ok {
		return Location{}, false
	}
	c := r.idx.Chunks[loc.chunk-1]
	return Location{Chunk: filepath.Join(r.dir, c.Name), ChunkSize: c.Size, Offset: loc.offset, Size: loc.size}, true
}

// Index returns the archive's index. The caller must not modify it.
func (r *Reader) Index() *Index { return r.idx }

// Dir returns the directory the archive was opened from.
func (r *Reader) Dir() string { return r.dir }

// Stray lists chunk files in the directory that are not part of this archive
// (numbered beyond its last chunk); they are ignored.
func (r *Reader) Stray() []string { return r.stray }

// Has reports whether the archive carries blob d.
func (r *Reader) Has(d digest.Digest) bool {
	_, ok := r.blobs[d]
	return ok
}

// Open streams blob d straight from its chunk. The content is verified as it
// is read: the read that completes the blob returns a *corruptError if the
// digest does not match.
func (r *Reader) Open(d digest.Digest) (io.ReadCloser, error) {
	loc, ok := r.blobs[d]
	if !ok {
		return nil, fmt.Errorf("blob %s is not in archive %s: %w", d, r.idx.ID, os.ErrNotExist)
	}
	name := r.chunkName(loc.chunk)
	f, err := os.Open(filepath.Join(r.dir, name))
	if err != nil {
		return nil, fmt.Errorf("opening blob %s in %s: %w", d, name, err)
	}
	return &blobReader{f: f, sr: io.NewSectionReader(f, loc.offset, loc.size), h: d.Algorithm().Hash(), want: d, size: loc.size, chunk: name}, nil
}

// blobReader reads one blob from its chunk and verifies it.
type blobReader struct {
	f     *os.File
	sr    *io.SectionReader
	h     hash.Hash
	want  digest.Digest
	size  int64
	read  int64
	chunk string
	err   error // sticky result once the blob is complete or broken
}

func (b *blobReader) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.sr.Read(p)
	b.h.Write(p[:n])
	b.read += int64(n)
	if b.read == b.size {
		if got := digest.NewDigest(b.want.Algorithm(), b.h); got != b.want {
			b.err = &corruptError{Chunk: b.chunk, What: "blob " + b.want.String(), Detail: "got " + got.String()}
		} else {
			b.err = io.EOF
		}
		if n > 0 && b.err == io.EOF {
			return n, nil
		}
		return n, b.err
	}
	if errors.Is(err, io.EOF) {
		b.err = &corruptError{Chunk: b.chunk, What: "blob " + b.want.String(), Detail: fmt.Sprintf("only %d of %d bytes are there", b.read, b.size)}
		return n, b.err
	}
	if err != nil {
		b.err = fmt.Errorf("reading blob %s from %s: %w", b.want, b.chunk, err)
		return n, b.err
	}
	return n, nil
}

func (b *blobReader) Close() error { return b.f.Close() }

// Extra returns the content of the extra file name, verified against the index.
func (r *Reader) Extra(name string) ([]byte, error) {
	loc, ok := r.extras[name]
	if !ok {
		return nil, fmt.Errorf("archive %s has no extra file %q: %w", r.idx.ID, name, os.ErrNotExist)
	}
	var want digest.Digest
	for _, e := range r.idx.Extras {
		if e.Name == name {
			want = e.Digest
		}
	}
	f, err := os.Open(filepath.Join(r.dir, r.chunkName(1)))
	if err != nil {
		return nil, fmt.Errorf("reading extra file %s: %w", name, err)
	}
	defer f.Close()
	data := make([]byte, loc.size)
	if _, err := f.ReadAt(data, loc.offset); err != nil {
		return nil, &corruptError{Chunk: r.chunkName(1), What: "extra file " + name, Detail: err.Error()}
	}
	sum := sha256.Sum256(data)
	if got := digest.NewDigestFromBytes(digest.SHA256, sum[:]); got != want {
		return nil, &corruptError{Chunk: r.chunkName(1), What: "extra file " + name, Detail: "got " + got.String()}
	}
	return data, nil
}

// Verify reads every chunk in full and checks every blob and extra file
// against its digest and every chunk after the first against its sha256. It
// reports all damaged chunks, not just the first.
func (r *Reader) Verify(ctx context.Context) error {
	var errs []error
	var total, done int64
	for _, c := range r.idx.Chunks {
		total += c.Size
	}
	for _, c := range r.idx.Chunks {
		err := r.verifyChunk(ctx, c, func(n int64) {
			if r.progress != nil {
				done += n
				r.progress(done, total)
			}
		})
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("verifying archive %s: %w", r.idx.ID, ctx.Err())
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// verifyChunk reads one chunk sequentially, hashing the whole file and each entry.
func (r *Reader) verifyChunk(ctx context.Context, c Chunk, read func(n int64)) error {
	f, err := os.Open(filepath.Join(r.dir, c.Name))
	if err != nil {
		return fmt.Errorf("verifying %s: %w", c.Name, err)
	}
	defer f.Close()
	whole := sha256.New()
	src := io.TeeReader(&contextReader{ctx: ctx, r: bufio.NewReaderSize(&countingReader{r: f, read: read}, 1<<20)}, whole)
	tr := tar.NewReader(src)
	extras := map[string]digest.Digest{}
	for _, e := range r.idx.Extras {
		extras[e.Name] = e.Digest
	}
	var first error
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return &corruptError{Chunk: c.Name, What: "the chunk", Detail: "reading its tar headers: " + err.Error()}
		}
		var want digest.Digest
		if d, ok := entryDigest(hdr.Name); ok {
			want = d
		} else if d, ok := extras[hdr.Name]; ok && c.Number == 1 {
			want = d
		} else {
			continue // index, checksum and marker were checked by Open
		}
		h := want.Algorithm().Hash()
		if _, err := io.Copy(h, tr); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return &corruptError{Chunk: c.Name, What: hdr.Name, Detail: err.Error()}
		}
		if got := digest.NewDigest(want.Algorithm(), h); got != want && first == nil {
			what := "blob " + want.String()
			if !strings.HasPrefix(hdr.Name, blobsDir+"/") {
				what = "extra file " + hdr.Name
			}
			first = &corruptError{Chunk: c.Name, What: what, Detail: "got " + got.String()}
		}
	}
	if first != nil {
		return first
	}
	if _, err := io.Copy(io.Discard, src); err != nil {
		return fmt.Errorf("verifying %s: %w", c.Name, err)
	}
	if c.Number > 1 {
		if got := digest.NewDigestFromBytes(digest.SHA256, whole.Sum(nil)); got != c.SHA256 {
			return &corruptError{Chunk: c.Name, What: "the chunk", Detail: "sha256 " + got.Encoded() + ", the index says " + c.SHA256.Encoded()}
		}
	}
	return nil
}

// scanReader reads a file through a read-ahead buffer while keeping track of
// the position, and seeks without system calls, so that scanning the headers
// of many small entries costs few reads.
type scanReader struct {
	r      io.ReaderAt
	size   int64
	pos    int64
	buf    []byte
	bufOff int64
}

func newScanReader(r io.ReaderAt, size int64) *scanReader {
	return &scanReader{r: r, size: size, bufOff: -1}
}

func (s *scanReader) Read(p []byte) (int, error) {
	if s.pos >= s.size {
		return 0, io.EOF
	}
	if s.bufOff < 0 || s.pos < s.bufOff || s.pos >= s.bufOff+int64(len(s.buf)) {
		if s.buf == nil {
			s.buf = make([]byte, 64<<10)
		}
		s.buf = s.buf[:cap(s.buf)]
		n, err := s.r.ReadAt(s.buf, s.pos)
		if n == 0 {
			s.bufOff = -1
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
		s.buf, s.bufOff = s.buf[:n], s.pos
	}
	n := copy(p, s.buf[s.pos-s.bufOff:])
	s.pos += int64(n)
	return n, nil
}

func (s *scanReader) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += s.pos
	case io.SeekEnd:
		offset += s.size
	default:
		return 0, fmt.Errorf("seek: invalid whence %d", whence)
	}
	if offset < 0 {
		return 0, fmt.Errorf("seek: negative position")
	}
	s.pos = offset
	return offset, nil
}

// countingReader tells read how many bytes each Read returned.
type countingReader struct {
	r    io.Reader
	read func(n int64)
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		c.read(int64(n))
	}
	return n, err
}

// chunks returns the file names of the archive's chunks, in order.
func (r *Reader) chunks() []string {
	out := make([]string, len(r.idx.Chunks))
	for i, c := range r.idx.Chunks {
		out[i] = c.Name
	}
	return out
}

// Whole reads the verified index of the archive with sequence seq in dir
// and checks that every chunk it lists is there at its recorded size and
// that the tar headers of every chunk, the first included, hold each blob
// and extra file the index places there at its size (as OpenFirst: a first
// chunk cut short, whose index still reads, is not whole; the chunks'
// contents are checked when the archive is read). It fails with an error
// satisfying errors.Is(err, fs.ErrNotExist) when dir holds no first chunk
// of that sequence.
func Whole(dir string, seq int) (*Index, error) {
	first := SeqChunkName(seq, 1)
	if _, err := os.Stat(filepath.Join(dir, first)); err != nil {
		return nil, err
	}
	r, err := OpenFirst(dir, first)
	if err != nil {
		return nil, err
	}
	return r.idx, nil
}
