package archive

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	digest "github.com/opencontainers/go-digest"
)

// blockSize is the tar block size; trailerSize the two zero blocks that end a tar file.
const (
	blockSize   = 512
	trailerSize = 2 * blockSize
)

// zeroSHA256 stands in for chunk checksums while the layout is planned; it has
// the length of a real one, so the planned index has the final index's length.
var zeroSHA256 = digest.NewDigestFromEncoded(digest.SHA256, strings.Repeat("0", 64))

// newHeader is the deterministic header of every entry: a regular file,
// mode 0644, owned by 0:0, with the archive's creation time as mtime.
func newHeader(name string, size int64, mtime time.Time) *tar.Header {
	return &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     name,
		Size:     size,
		Mode:     0o644,
		ModTime:  mtime,
	}
}

// countingWriter counts the bytes written through it.
type countingWriter struct{ n int64 }

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}

// headerSize is the number of bytes archive/tar writes for the header of an
// entry (512, or more when PAX records are needed for long names or sizes).
func headerSize(name string, size int64, mtime time.Time) (int64, error) {
	var c countingWriter
	if err := tar.NewWriter(&c).WriteHeader(newHeader(name, size, mtime)); err != nil {
		return 0, fmt.Errorf("tar header for %s: %w", name, err)
	}
	return c.n, nil
}

// padded rounds n up to whole tar blocks.
func padded(n int64) int64 { return (n + blockSize - 1) / blockSize * blockSize }

// entrySize is the space an entry takes in a tar file: header plus padded data.
func entrySize(name string, size int64, mtime time.Time) (int64, error) {
	h, err := headerSize(name, size, mtime)
	if err != nil {
		return 0, err
	}
	return h + padded(size), nil
}

// markerBytes is the content of chunkMarkerName for chunk n of archive id.
func markerBytes(id string, n int) []byte {
	b, _ := json.Marshal(chunkMarker{Tool: tool, FormatVersion: formatVersion, Archive: id, Chunk: n}) // cannot fail: plain struct
	return append(b, '\n')
}

// layout is the planned content of every chunk.
type layout struct {
	// chunks[i] holds the blobs of chunk i+1, sorted by digest.
	chunks [][]Blob
	// sizes[i] is the exact size chunk i+1 will have.
	sizes []int64
	// rest is the size of chunk 1 without the index entry.
	rest int64
	// oversized lists the chunks that exceed the limit.
	oversized []oversize
}

// oversize is a chunk larger than the limit, and what made it so.
type oversize struct {
	what  string // "blob sha256:… (5 GiB)" or "the archive index and extra files (…)"
	chunk int
	seq   int
	size  int64
}

// message explains an oversized chunk, as a warning or, when strict, an error.
func (o oversize) message(max int64, strict bool) string {
	if strict {
		return fmt.Sprintf("%s does not fit in a chunk of %s (%s would be %s): set the archive size to at least %s",
			o.what, humanSize(max), SeqChunkName(o.seq, o.chunk), humanSize(o.size), recommendedSize(o.size))
	}
	return fmt.Sprintf("%s is larger than the archive size limit of %s: %s is %s; set the archive size to at least %s to keep every chunk within the limit",
		o.what, humanSize(max), SeqChunkName(o.seq, o.chunk), humanSize(o.size), recommendedSize(o.size))
}

// planner assigns blobs to chunks.
type planner struct {
	max   int64
	id    string
	seq   int
	mtime time.Time
	// fixed holds the blobs already staged in chunks 2, 3, … (Staging) and
	// fixedSizes those chunks' sizes; they take no more blobs.
	fixed      [][]Blob
	fixedSizes []int64
}

// assign packs blobs into chunks by first-fit decreasing: the largest blob
// first, each into the first chunk with room, so chunks stay few and full.
// fixed1 is the space chunk 1 needs before its blobs (index, checksum, extras).
// A blob that fits in no chunk, even an empty one, gets a chunk of its own.
func (p planner) assign(blobs []Blob, fixed1 int64) (*layout, error) {
	type sized struct {
		blob  Blob
		entry int64
	}
	pinned := map[digest.Digest]bool{}
	for _, c := range p.fixed {
		for _, b := range c {
			pinned[b.Digest] = true
		}
	}
	list := make([]sized, 0, len(blobs))
	for _, b := range blobs {
		if pinned[b.Digest] {
			continue
		}
		es, err := entrySize(blobName(b.Digest), b.Size, p.mtime)
		if err != nil {
			return nil, err
		}
		list = append(list, sized{b, es})
	}
	sort.SliceStable(list, func(a, b int) bool {
		if list[a].entry != list[b].entry {
			return list[a].entry > list[b].entry
		}
		return list[a].blob.Digest < list[b].blob.Digest
	})

	l := &layout{chunks: [][]Blob{nil}, sizes: []int64{fixed1 + trailerSize}}
	closed := []bool{false}
	for i, c := range p.fixed {
		l.chunks = append(l.chunks, append([]Blob(nil), c...))
		l.sizes = append(l.sizes, p.fixedSizes[i])
		closed = append(closed, true)
	}
	for _, s := range list {
		placed := false
		for i := range l.chunks {
			if !closed[i] && l.sizes[i]+s.entry <= p.max {
				l.chunks[i] = append(l.chunks[i], s.blob)
				l.sizes[i] += s.entry
				placed = true
				break
			}
		}
		if placed {
			continue
		}
		n := len(l.chunks) + 1
		ms, err := entrySize(chunkMarkerName, int64(len(markerBytes(p.id, n))), p.mtime)
		if err != nil {
			return nil, err
		}
		size := ms + s.entry + trailerSize
		l.chunks = append(l.chunks, []Blob{s.blob})
		l.sizes = append(l.sizes, size)
		closed = append(closed, size > p.max)
		if size > p.max {
			l.oversized = append(l.oversized, oversize{
				what:  fmt.Sprintf("blob %s (%s)", s.blob.Digest, humanSize(s.blob.Size)),
				chunk: n, seq: p.seq, size: size,
			})
		}
	}
	for i := range l.chunks {
		sort.Slice(l.chunks[i], func(a, b int) bool { return l.chunks[i][a].Digest < l.chunks[i][b].Digest })
	}
	return l, nil
}

// plan lays out the archive described by idx (Blobs sorted, Extras filled):
// it assigns every blob a chunk, fills idx.Blobs[].Chunk and idx.Chunks with
// exact sizes (placeholder checksums), and returns the layout. Because the
// index sits in chunk 1 and lists the assignment, the space reserved for it is
// grown until the encoded index fits.
func (p planner) plan(idx *Index) (*layout, error) {
	sumEntry, err := entrySize(indexSumName, int64(len(indexSum(nil))), p.mtime)
	if err != nil {
		return nil, err
	}
	var extras int64
	for _, e := range idx.Extras {
		es, err := entrySize(e.Name, e.Size, p.mtime)
		if err != nil {
			return nil, err
		}
		extras += es
	}
	reserve := int64(0)
	for range 32 {
		l, err := p.assign(idx.Blobs, reserve+sumEntry+extras)
		if err != nil {
			return nil, err
		}
		chunkOf := make(map[digest.Digest]int, len(idx.Blobs))
		for i, blobs := range l.chunks {
			for _, b := range blobs {
				chunkOf[b.Digest] = i + 1
			}
		}
		for i := range idx.Blobs {
			idx.Blobs[i].Chunk = chunkOf[idx.Blobs[i].Digest]
		}
		idx.Chunks = make([]Chunk, len(l.chunks))
		for i := range l.chunks {
			idx.Chunks[i] = Chunk{Number: i + 1, Name: SeqChunkName(idx.Seq, i+1), Size: l.sizes[i], SHA256: zeroSHA256}
		}
		idx.Chunks[0].SHA256 = ""
		rest := l.sizes[0] - reserve // chunk 1 without the index entry
		data, err := encodeIndex(idx, rest, p.mtime)
		if err != nil {
			return nil, err
		}
		need, err := entrySize(IndexName, int64(len(data)), p.mtime)
		if err != nil {
			return nil, err
		}
		if need <= reserve {
			l.sizes[0] = idx.Chunks[0].Size
			l.rest = rest
			if l.sizes[0] > p.max {
				l.oversized = append([]oversize{{
					what:  fmt.Sprintf("the archive index and extra files (%s)", humanSize(l.sizes[0]-trailerSize)),
					chunk: 1, seq: p.seq, size: l.sizes[0],
				}}, l.oversized...)
			}
			return l, nil
		}
		// Grow with some slack so that a few more chunk numbers in the
		// index do not force yet another round.
		reserve = need + need/64 + 4*blockSize
	}
	return nil, fmt.Errorf("internal error: archive layout did not settle")
}

// encodeIndex encodes idx with the exact size of chunk 1 in idx.Chunks[0].Size,
// given rest, the size of chunk 1 without the index entry. The index's own
// length feeds its recorded chunk size, so the index is encoded once with a
// 19-digit placeholder for that size, which the size then overwrites,
// padded with spaces (JSON allows white space after a number): the length
// does not depend on the size, and an index of tens of MiB is encoded once,
// not twice.
func encodeIndex(idx *Index, rest int64, mtime time.Time) ([]byte, error) {
	const placeholder int64 = 1 << 62 // 4611686018427387904, 19 digits
	idx.Chunks[0].Size = placeholder
	b, err := marshalIndex(idx)
	if err != nil {
		return nil, err
	}
	mark := []byte(`"size": ` + strconv.FormatInt(placeholder, 10))
	at := bytes.Index(b, mark)
	if at < 0 || bytes.Index(b[at+len(mark):], mark) >= 0 {
		return nil, fmt.Errorf("internal error: the archive index's size placeholder is not there once")
	}
	blocks := (int64(len(b)) + blockSize - 1) / blockSize
	hs, err := headerSize(IndexName, blocks*blockSize, mtime)
	if err != nil {
		return nil, err
	}
	idx.Chunks[0].Size = rest + hs + blocks*blockSize
	digits := strconv.FormatInt(idx.Chunks[0].Size, 10)
	field := b[at+len(`"size": `) : at+len(mark)]
	copy(field, digits)
	for i := len(digits); i < len(field); i++ {
		field[i] = ' '
	}
	idx.raw = b
	return b, nil
}

// writeEntry writes one entry with data from r (exactly size bytes).
func writeEntry(tw *tar.Writer, name string, size int64, mtime time.Time, r io.Reader) error {
	if err := tw.WriteHeader(newHeader(name, size, mtime)); err != nil {
		return fmt.Errorf("writing tar header for %s: %w", name, err)
	}
	if _, err := io.Copy(tw, r); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return nil
}
