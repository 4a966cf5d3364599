// Package archive writes and reads gapmirror archives: sets of plain POSIX tar
// chunks (mirror_000001.tar, mirror_000002.tar, …) that carry the blobs of an
// image set to an air gap together with a self-describing, checksummed index.
//
// Layout of an archive set:
//
//	mirror_000001.tar  gapmirror-index.json          the Index (format, ids, config, Set, blobs, chunks, extras)
//	                   gapmirror-index.json.sha256   sha256 of the index, in sha256sum(1) format
//	                   <extra files>                 e.g. oci-layout, index.json, signatures
//	                   blobs/sha256/<hex> …          blobs assigned to chunk 1
//	mirror_00000N.tar  gapmirror-chunk.json          which archive and chunk this file is
//	                   blobs/sha256/<hex> …          blobs assigned to chunk N
//
// Extracting every chunk into one directory (tar xf mirror_*.tar) gives an OCI
// image layout, but gapmirror never needs to: the Reader streams each blob
// straight out of its chunk and verifies it as it goes.
package archive

import (
	"crypto/sha256"
	_ "crypto/sha512" // registers sha384/sha512 for blob digests
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gapmirror/gapmirror/imageset"
	digest "github.com/opencontainers/go-digest"
)

// formatVersion is the archive format this gapmirror writes and the newest it reads.
// 2: images may be sparse (Set image platforms), signatures (signatureOf) and
// helm charts travel; a gapmirror that knows only 1 would push such an
// archive wrongly, so it must refuse it.
// 3: chunk files may carry the archive's sequence (Index.Seq,
// mirror_<seq>_<n>.tar), so that several archives share a directory.
const formatVersion = 3

// tool is the value of Index.Tool in every gapmirror archive.
const tool = "gapmirror"

// Reserved entry names.
const (
	// IndexName is the first entry of chunk 1: the JSON Index.
	IndexName = "gapmirror-index.json"
	// indexSumName is the second entry of chunk 1: the sha256 of IndexName, as sha256sum(1) writes it.
	indexSumName = IndexName + ".sha256"
	// chunkMarkerName is the first entry of every chunk after the first: which archive and chunk the file is.
	chunkMarkerName = "gapmirror-chunk.json"
)

// blobsDir is the directory of the OCI image layout that holds the blobs.
const blobsDir = "blobs"

// Index describes an archive: what it is, what it builds on, the image set it
// carries, and where every blob and extra file lives.
type Index struct {
	// FormatVersion is the archive format; readers refuse formats newer than FormatVersion.
	FormatVersion int `json:"formatVersion"`
	// Tool is always "gapmirror"; it tells a gapmirror index from any other JSON.
	Tool string `json:"tool"`
	// ToolVersion is the version of the gapmirror that wrote the archive.
	ToolVersion string `json:"toolVersion,omitempty"`
	// ID identifies the archive; chunks carry it so that mixed-up chunks are caught.
	ID string `json:"id"`
	// Seq is the archive's number among the archives of the workspace that
	// wrote it; when set, its chunks are named mirror_<seq>_<n>.tar
	// (SeqChunkName), else mirror_<n>.tar (chunkName).
	Seq int `json:"seq,omitempty"`
	// BasedOn is the ID of the archive this one builds on (its blobs are assumed
	// present on the air-gapped side); empty for a full archive.
	BasedOn string `json:"basedOn,omitempty"`
	// Workspace identifies the mirror-to-disk workspace that wrote the
	// archive (an id it keeps in its working-dir): disk-to-mirror applies
	// the archives of one workspace to a mirror, never another's in between
	// (its prune and cluster resources would replace theirs). Empty in
	// archives written before it was added; an older reader ignores it.
	Workspace string `json:"workspace,omitempty"`
	// Created is when the archive was written; it is also every entry's mtime.
	Created time.Time `json:"created"`
	// Config is the pinned ImageSetConfiguration, as YAML text.
	Config string `json:"config,omitempty"`
	// Set is every image of the image set.
	Set *imageset.Set `json:"set,omitempty"`
	// LeftOut names the images of the image set that failed in
	// mirror-to-disk and are not in the archive: disk-to-mirror does not
	// prune with a partial archive.
	LeftOut []string `json:"leftOut,omitempty"`
	// Blocked names the images mirror.blockedImages kept out of the image
	// set, so that disk-to-mirror writes the IDMS/ITMS mirror-to-mirror
	// would (no namespace entry covering them).
	Blocked []string `json:"blocked,omitempty"`
	// Blobs is every blob the archive carries, sorted by digest.
	Blobs []Blob `json:"blobs"`
	// Extras are the small named files carried in chunk 1 (OCI index.json, signatures, …).
	Extras []Extra `json:"extras,omitempty"`
	// Chunks lists every chunk file of the archive, in order.
	Chunks []Chunk `json:"chunks"`
	// raw is the index as read from chunk 1 (Bytes).
	raw []byte
}

// Bytes returns the index exactly as read from chunk 1, the bytes a
// signature of the archive covers (nil for an index not read from an archive).
func (idx *Index) Bytes() []byte { return idx.raw }

// Blob is one content-addressed blob of the archive.
type Blob struct {
	// Digest is the blob's content digest.
	Digest digest.Digest `json:"digest"`
	// Size is the blob's length in bytes.
	Size int64 `json:"size"`
	// Chunk is the number (from 1) of the chunk that holds the blob; Write assigns it.
	Chunk int `json:"chunk"`
}

// Extra is a small named file carried in chunk 1.
type Extra struct {
	// Name is the file's safe relative path, e.g. "index.json" or "signatures/4.16.1-x86_64".
	Name string `json:"name"`
	// Size is the file's length in bytes; Write fills it from Data.
	Size int64 `json:"size"`
	// Digest is the sha256 of the file; Write fills it from Data.
	Digest digest.Digest `json:"digest"`
	// Data is the file content given to Write; it is not part of the JSON index
	// (read it back with Reader.Extra).
	Data []byte `json:"-"`
}

// Chunk is one tar file of the archive.
type Chunk struct {
	// Number counts chunks from 1.
	Number int `json:"number"`
	// Name is the chunk's file name, e.g. "mirror_000002.tar".
	Name string `json:"name"`
	// Size is the chunk file's length in bytes.
	Size int64 `json:"size"`
	// SHA256 is the digest of the whole chunk file; empty for chunk 1, which
	// holds the index itself (the index is protected by indexSumName instead).
	SHA256 digest.Digest `json:"sha256,omitempty"`
}

// chunkMarker is the content of chunkMarkerName.
type chunkMarker struct {
	Tool          string `json:"tool"`
	FormatVersion int    `json:"formatVersion"`
	Archive       string `json:"archive"`
	Chunk         int    `json:"chunk"`
}

// chunkName is the file name of chunk n (from 1), oc-mirror's naming: mirror_000001.tar.
func chunkName(n int) string { return fmt.Sprintf("mirror_%06d.tar", n) }

// SeqChunkName is the file name of chunk n of the archive with sequence seq:
// mirror_0002_000001.tar. Archives that share a directory never share a name.
func SeqChunkName(seq, n int) string {
	if seq == 0 {
		return chunkName(n)
	}
	return fmt.Sprintf("mirror_%04d_%06d.tar", seq, n)
}

var (
	chunkNameRE    = regexp.MustCompile(`^mirror_([0-9]{6,})\.tar$`)
	seqChunkNameRE = regexp.MustCompile(`^mirror_([0-9]{4,})_([0-9]{6,})\.tar$`)
)

// chunkSeq returns the sequence and number of a chunk file name of either
// naming (seq 0: mirror_<n>.tar), or ok false if name is not a chunk.
func chunkSeq(name string) (seq, n int, ok bool) {
	if n = chunkNumber(name); n > 0 {
		return 0, n, true
	}
	m := seqChunkNameRE.FindStringSubmatch(name)
	if m == nil {
		return 0, 0, false
	}
	seq, err1 := strconv.Atoi(m[1])
	n, err2 := strconv.Atoi(m[2])
	if err1 != nil || err2 != nil || seq < 1 || n < 1 {
		return 0, 0, false
	}
	return seq, n, true
}

// IsChunkName reports whether name is a chunk file name of any archive.
func IsChunkName(name string) bool {
	_, _, ok := chunkSeq(name)
	return ok
}

// chunkNumber returns the number of a chunk file name, or 0 if name is not one.
func chunkNumber(name string) int {
	m := chunkNameRE.FindStringSubmatch(name)
	if m == nil {
		return 0
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n < 1 {
		return 0
	}
	return n
}

// blobName is the tar entry name of a blob: blobs/<algorithm>/<hex>.
func blobName(d digest.Digest) string {
	return blobsDir + "/" + string(d.Algorithm()) + "/" + d.Encoded()
}

var idRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// validID checks an archive ID: 1–64 letters, digits, '.', '_' or '-'.
func validID(id string) error {
	if !idRE.MatchString(id) {
		return fmt.Errorf("archive id %q must be 1 to 64 letters, digits, '.', '_' or '-'", id)
	}
	return nil
}

var safeNameRE = regexp.MustCompile(`^[A-Za-z0-9._@+=,-]+(/[A-Za-z0-9._@+=,-]+)*$`)

// checkExtraName rejects extra-file names that are unsafe to extract (absolute,
// "..", odd characters) or that collide with the archive's own entries.
func checkExtraName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("extra file name is empty")
	case len(name) > 255:
		return fmt.Errorf("extra file name %.40q… is longer than 255 bytes", name)
	case unsafeName(name):
		return fmt.Errorf("extra file name %q is not a safe relative path (no leading '/', no '.' or '..' elements)", name)
	case !safeNameRE.MatchString(name):
		return fmt.Errorf("extra file name %q may only use letters, digits, '/' and ._@+=,-", name)
	case name == IndexName || name == indexSumName || name == chunkMarkerName:
		return fmt.Errorf("extra file name %q is reserved for the archive's own metadata", name)
	case name == blobsDir || strings.HasPrefix(name, blobsDir+"/"):
		return fmt.Errorf("extra file name %q is under %s/, which holds only blobs", name, blobsDir)
	}
	return nil
}

// unsafeName reports whether a tar entry name could escape the extraction
// directory or is not in canonical form.
func unsafeName(name string) bool {
	if name == "" || strings.HasPrefix(name, "/") || strings.Contains(name, "\\") || strings.ContainsRune(name, 0) {
		return true
	}
	if path.Clean(name) != name {
		return true
	}
	for _, el := range strings.Split(name, "/") {
		if el == "." || el == ".." || el == "" {
			return true
		}
	}
	return false
}

// indexSum renders the content of indexSumName for the index bytes.
func indexSum(index []byte) []byte {
	sum := sha256.Sum256(index)
	return []byte(hex.EncodeToString(sum[:]) + "  " + IndexName + "\n")
}

// checkIndexSum verifies index against the content of indexSumName.
func checkIndexSum(index, sumFile []byte) error {
	fields := strings.Fields(string(sumFile))
	if len(fields) != 2 || fields[1] != IndexName {
		return fmt.Errorf("%s is malformed", indexSumName)
	}
	sum := sha256.Sum256(index)
	if got := hex.EncodeToString(sum[:]); got != fields[0] {
		return fmt.Errorf("%s does not match %s (sha256 %s, expected %s)", IndexName, indexSumName, got, fields[0])
	}
	return nil
}

// marshalIndex encodes idx as indented JSON followed by a newline.
func marshalIndex(idx *Index) ([]byte, error) {
	b, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding archive index: %w", err)
	}
	return append(b, '\n'), nil
}

// decodeIndex parses and checks index bytes read from chunk 1. An index of a
// newer format gets a clear "use a newer gapmirror", even when its JSON no
// longer fits this version's types.
func decodeIndex(b []byte) (*Index, error) {
	var idx Index
	if err := json.Unmarshal(b, &idx); err != nil {
		var head struct {
			FormatVersion int `json:"formatVersion"`
		}
		if json.Unmarshal(b, &head) == nil && head.FormatVersion > formatVersion {
			return nil, &newerFormatError{Version: head.FormatVersion}
		}
		return nil, fmt.Errorf("parsing %s: %w", IndexName, err)
	}
	if idx.FormatVersion > formatVersion {
		return nil, &newerFormatError{Version: idx.FormatVersion}
	}
	if err := idx.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", IndexName, err)
	}
	return &idx, nil
}

// validDigest checks a digest like digest.Digest.Validate, with a fast path
// for sha256 (indexes list many thousands).
func validDigest(d digest.Digest) error {
	if s, ok := strings.CutPrefix(string(d), "sha256:"); ok && len(s) == 64 {
		for i := 0; i < len(s); i++ {
			if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return digest.ErrDigestInvalidFormat
			}
		}
		return nil
	}
	return d.Validate()
}

// newerFormatError is returned for an archive written in a format newer than
// this gapmirror understands.
type newerFormatError struct {
	// Version is the archive's format version.
	Version int
}

// Error says which format was found and what to do.
func (e *newerFormatError) Error() string {
	return fmt.Sprintf("archive format %d is newer than this gapmirror understands (%d): use a newer gapmirror to read it", e.Version, formatVersion)
}

// check validates a decoded index: the consistency Reader relies on.
func (idx *Index) check() error {
	if idx.Tool != tool {
		return fmt.Errorf("tool is %q, want %q", idx.Tool, tool)
	}
	if idx.FormatVersion < 1 || idx.FormatVersion > formatVersion {
		return fmt.Errorf("unsupported formatVersion %d", idx.FormatVersion)
	}
	if err := validID(idx.ID); err != nil {
		return err
	}
	if idx.BasedOn != "" {
		if err := validID(idx.BasedOn); err != nil {
			return fmt.Errorf("basedOn: %w", err)
		}
	}
	if idx.Workspace != "" {
		if err := validID(idx.Workspace); err != nil {
			return fmt.Errorf("workspace: %w", err)
		}
	}
	if !utf8.ValidString(idx.Config) {
		return fmt.Errorf("config is not UTF-8 text")
	}
	if idx.Set != nil && idx.Set.FormatVersion > imageset.SetFormatVersion {
		return fmt.Errorf("image set format %d is newer than this gapmirror understands (%d): use a newer gapmirror", idx.Set.FormatVersion, imageset.SetFormatVersion)
	}
	if len(idx.Chunks) == 0 {
		return fmt.Errorf("lists no chunks")
	}
	if idx.Seq < 0 || idx.Seq > 1e6 {
		return fmt.Errorf("impossible seq %d", idx.Seq)
	}
	for i, c := range idx.Chunks {
		if c.Number != i+1 || c.Name != SeqChunkName(idx.Seq, c.Number) {
			return fmt.Errorf("chunks[%d] is %d %q, want %d %q", i, c.Number, c.Name, i+1, SeqChunkName(idx.Seq, i+1))
		}
		if c.Size < 1024 || c.Size%512 != 0 {
			return fmt.Errorf("chunk %s has impossible size %d", c.Name, c.Size)
		}
		if c.Number > 1 {
			if err := c.SHA256.Validate(); err != nil || c.SHA256.Algorithm() != digest.SHA256 {
				return fmt.Errorf("chunk %s has no valid sha256", c.Name)
			}
		}
	}
	seen := make(map[digest.Digest]bool, len(idx.Blobs))
	for i, b := range idx.Blobs {
		if err := validDigest(b.Digest); err != nil {
			return fmt.Errorf("blobs[%d]: digest %q: %w", i, b.Digest, err)
		}
		if seen[b.Digest] {
			return fmt.Errorf("blobs[%d]: %s is listed twice", i, b.Digest)
		}
		seen[b.Digest] = true
		if b.Size < 0 {
			return fmt.Errorf("blobs[%d]: %s has negative size", i, b.Digest)
		}
		if b.Chunk < 1 || b.Chunk > len(idx.Chunks) {
			return fmt.Errorf("blobs[%d]: %s is in chunk %d, but the archive has %d chunks", i, b.Digest, b.Chunk, len(idx.Chunks))
		}
	}
	if err := checkExtraNames(idx.Extras); err != nil {
		return err
	}
	for i, e := range idx.Extras {
		if err := e.Digest.Validate(); err != nil || e.Digest.Algorithm() != digest.SHA256 {
			return fmt.Errorf("extras[%d]: %q has no valid sha256 digest", i, e.Name)
		}
		if e.Size < 0 {
			return fmt.Errorf("extras[%d]: %q has negative size", i, e.Name)
		}
	}
	return nil
}

// checkExtraNames checks every extra file name and that no two names clash:
// the same name twice, or one name being a directory of another ("a" and "a/b"),
// which tar could not extract.
func checkExtraNames(extras []Extra) error {
	names := make(map[string]bool, len(extras))
	for i, e := range extras {
		if err := checkExtraName(e.Name); err != nil {
			return fmt.Errorf("extras[%d]: %w", i, err)
		}
		if names[e.Name] {
			return fmt.Errorf("extras[%d]: %q is listed twice", i, e.Name)
		}
		names[e.Name] = true
	}
	for _, e := range extras {
		for dir := path.Dir(e.Name); dir != "."; dir = path.Dir(dir) {
			if names[dir] {
				return fmt.Errorf("extra file %q is also used as the directory of extra file %q", dir, e.Name)
			}
		}
	}
	return nil
}
