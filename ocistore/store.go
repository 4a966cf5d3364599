// Package ocistore is the local content store: an OCI image layout under the
// cache directory whose blobs are shared by every image and workspace,
// written once and verified, and linked to where mirror-to-disk wrote them
// into an archive. transfer reads and writes it as a Source and a
// Destination; it knows nothing of registries or copies. It may import
// archive and failure.
package ocistore

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/gapmirror/gapmirror/archive"
	"github.com/gapmirror/gapmirror/failure"
)

// Store is the local content store: an OCI image layout whose blobs
// directory is shared by every image. Blobs are written once, verified
// against their digest, and published by an atomic rename, so a blob that
// exists under its digest is always complete and correct. Manifests are
// blobs too and are written after everything they reference, so a manifest
// present in the store means the whole image is present.
type Store struct {
	dir string

	mu   sync.Mutex
	refs map[string]ocispec.Descriptor // ref name (destination) → top-level manifest
}

const storeIngest = "ingest"

// Open opens (creating if needed) the store in dir.
func Open(dir string) (*Store, error) {
	for _, d := range []string{filepath.Join(dir, "blobs", "sha256"), filepath.Join(dir, storeIngest)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("creating store %s: %w", dir, err)
		}
	}
	layout := filepath.Join(dir, ocispec.ImageLayoutFile)
	if _, err := os.Stat(layout); errors.Is(err, fs.ErrNotExist) {
		data, _ := json.Marshal(ocispec.ImageLayout{Version: ocispec.ImageLayoutVersion})
		if err := archive.WriteFileAtomic(layout, data); err != nil {
			return nil, err
		}
	}
	s := &Store{dir: dir, refs: map[string]ocispec.Descriptor{}}
	idx, err := s.readIndex()
	if err != nil {
		return nil, err
	}
	for _, m := range idx.Manifests {
		if name := m.Annotations[ocispec.AnnotationRefName]; name != "" {
			s.refs[name] = m
		}
	}
	return s, nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// blobPath is where the blob with digest d lives (it may not exist).
func (s *Store) blobPath(d digest.Digest) string {
	return filepath.Join(s.dir, "blobs", d.Algorithm().String(), d.Encoded())
}

// Has reports whether the blob is in the store: as a file, or linked to
// its place in an archive that is still where it was written.
func (s *Store) Has(d digest.Digest) bool {
	if d.Validate() != nil {
		return false
	}
	if _, err := os.Stat(s.blobPath(d)); err == nil {
		return true
	}
	_, ok := s.linked(d)
	return ok
}

// Open opens the blob with digest d. Its content is not checked here:
// every reader of store blobs verifies the digest as it reads.
func (s *Store) Open(d digest.Digest) (io.ReadCloser, error) {
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("invalid digest %q: %w", d, err)
	}
	f, err := os.Open(s.blobPath(d))
	if err == nil {
		return f, nil
	}
	if l, ok := s.linked(d); ok {
		if c, cerr := os.Open(l.Chunk); cerr == nil {
			return sectionFile{io.NewSectionReader(c, l.Offset, l.Size), c}, nil
		}
	}
	return nil, fmt.Errorf("blob %s is not in the store %s: %w", d, s.dir, err)
}

// Mirror-to-disk writes a blob once, into its archive, not into the store
// (see diskDestination). The store links to it there, so that a later run
// of another workspace, or one whose archive builds on an older baseline,
// reads it from that archive instead of fetching it again, for as long as
// the archive stays where it was written. A link to a chunk that was moved,
// removed or replaced is ignored.
const storeLinks = "links"

func (s *Store) linkPath(d digest.Digest) string {
	return filepath.Join(s.dir, storeLinks, d.Algorithm().String(), d.Encoded())
}

// Link records that blob d lies at l.
func (s *Store) Link(d digest.Digest, l archive.Location) error {
	if err := d.Validate(); err != nil {
		return fmt.Errorf("invalid digest %q: %w", d, err)
	}
	if err := os.MkdirAll(filepath.Dir(s.linkPath(d)), 0o755); err != nil {
		return fmt.Errorf("linking blob %s in the store: %w", d, err)
	}
	data, _ := json.Marshal(l) // cannot fail: plain struct
	// No fsync (archive.ReplaceFile): a torn link fails to parse or to
	// match its chunk's size and is ignored, and what is read through one
	// is checked against its digest: a lost link costs a download.
	return archive.ReplaceFile(s.linkPath(d), data)
}

// linked is blob d's link, if it points at a chunk of the recorded size.
func (s *Store) linked(d digest.Digest) (archive.Location, bool) {
	data, err := os.ReadFile(s.linkPath(d))
	if err != nil {
		return archive.Location{}, false
	}
	var l archive.Location
	if json.Unmarshal(data, &l) != nil || !filepath.IsAbs(l.Chunk) || l.Offset < 0 || l.Size < 0 || l.Offset+l.Size > l.ChunkSize {
		return archive.Location{}, false
	}
	if st, err := os.Stat(l.Chunk); err != nil || !st.Mode().IsRegular() || st.Size() != l.ChunkSize {
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			os.Remove(s.linkPath(d)) // the archive moved on: the link never holds again
		}
		return archive.Location{}, false
	}
	return l, true
}

// LinkedUnder reports whether blob d is linked (not stored) to a file in dir.
func (s *Store) LinkedUnder(d digest.Digest, dir string) bool {
	if _, err := os.Stat(s.blobPath(d)); err == nil {
		return false
	}
	l, ok := s.linked(d)
	if !ok {
		return false
	}
	abs, err := filepath.Abs(dir)
	return err == nil && strings.HasPrefix(l.Chunk, abs+string(filepath.Separator))
}

// sectionFile reads a blob's section of a chunk file.
type sectionFile struct {
	*io.SectionReader
	f *os.File
}

func (s sectionFile) Close() error { return s.f.Close() }

// ReadBlob reads a small blob (a manifest or config) whole.
func (s *Store) ReadBlob(d digest.Digest) ([]byte, error) {
	rc, err := s.Open(d)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return nil, err
	}
	if digest.FromBytes(data) != d {
		return nil, fmt.Errorf("store blob %s does not match its digest: remove %s and run again", d, s.blobPath(d))
	}
	return data, nil
}

// Put writes the blob read from r, which must have digest d and size size
// (size < 0: unknown). The blob is published only once verified.
func (s *Store) Put(d digest.Digest, size int64, r io.Reader) error {
	if err := d.Validate(); err != nil {
		return fmt.Errorf("invalid digest %q: %w", d, err)
	}
	if s.Has(d) {
		_, err := io.Copy(io.Discard, r)
		return err
	}
	tmp, err := os.CreateTemp(filepath.Join(s.dir, storeIngest), d.Encoded()+"-*")
	if err != nil {
		return fmt.Errorf("writing blob %s into the store: %w", d, err)
	}
	defer os.Remove(tmp.Name())
	v := d.Verifier()
	n, err := io.Copy(io.MultiWriter(archive.FileWriter(tmp), v), r)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return archive.NoSpace(fmt.Errorf("writing blob %s into the store: %w", d, err), s.blobPath(d), max(size, n), true)
	}
	if size >= 0 && n != size {
		return &failure.DigestError{Digest: d, Msg: fmt.Sprintf("got %d bytes, expected %d", n, size)}
	}
	if !v.Verified() {
		return &failure.DigestError{Digest: d, Msg: "content does not match the digest"}
	}
	if err := os.Rename(tmp.Name(), s.blobPath(d)); err != nil {
		return fmt.Errorf("writing blob %s into the store: %w", d, err)
	}
	return nil
}

// Tag records ref (a destination such as "ubi9/ubi:9.4") as naming the
// manifest desc. It is kept in memory until SaveIndex.
func (s *Store) Tag(ref string, desc ocispec.Descriptor) {
	desc.Annotations = map[string]string{ocispec.AnnotationRefName: ref}
	desc.Platform = nil
	s.mu.Lock()
	s.refs[ref] = desc
	s.mu.Unlock()
}

// Resolve returns the manifest descriptor ref names, if any.
func (s *Store) Resolve(ref string) (ocispec.Descriptor, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.refs[ref]
	return d, ok
}

// SaveIndex writes index.json atomically with every ref recorded so far.
func (s *Store) SaveIndex() error {
	data, err := s.IndexJSON(nil)
	if err != nil {
		return err
	}
	return archive.WriteFileAtomic(filepath.Join(s.dir, ocispec.ImageIndexFile), data)
}

// IndexJSON returns an OCI index.json naming the refs given (all refs when
// refs is nil), sorted by name.
func (s *Store) IndexJSON(refs []string) ([]byte, error) {
	s.mu.Lock()
	var names []string
	if refs == nil {
		for n := range s.refs {
			names = append(names, n)
		}
	} else {
		names = append(names, refs...)
	}
	sort.Strings(names)
	idx := ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex, Manifests: []ocispec.Descriptor{}}
	for _, n := range names {
		d, ok := s.refs[n]
		if !ok {
			s.mu.Unlock()
			return nil, fmt.Errorf("image %s is not in the store", n)
		}
		idx.Manifests = append(idx.Manifests, d)
	}
	s.mu.Unlock()
	return json.MarshalIndent(idx, "", "  ")
}

func (s *Store) readIndex() (*ocispec.Index, error) {
	data, err := os.ReadFile(filepath.Join(s.dir, ocispec.ImageIndexFile))
	if errors.Is(err, fs.ErrNotExist) {
		return &ocispec.Index{}, nil
	}
	if err != nil {
		return nil, err
	}
	var idx ocispec.Index
	if err := json.Unmarshal(data, &idx); err != nil {
		return nil, fmt.Errorf("store %s: index.json is damaged (%v): remove it and run again, blobs will be reused", s.dir, err)
	}
	return &idx, nil
}

// CleanIngest removes half-written blobs left by an interrupted run.
func (s *Store) CleanIngest() error {
	entries, err := os.ReadDir(filepath.Join(s.dir, storeIngest))
	if err != nil {
		return err
	}
	for _, e := range entries {
		os.Remove(filepath.Join(s.dir, storeIngest, e.Name()))
	}
	return nil
}
