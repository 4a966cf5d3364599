package transfer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/gapmirror/gapmirror/archive"
	"github.com/gapmirror/gapmirror/failure"
	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/ocistore"
)

// diskDestination is mirror-to-disk's destination. Manifests go into the
// store, where later runs and the archive's index read them; every other
// blob streams straight into its place in the archive being staged, so its
// bytes are written once (into the store and then the archive before).
// Blobs an earlier archive of the workspace carried count as present: the
// air gap has them.
type diskDestination struct {
	storeEndpoint
	stage   *archive.Staging
	carried map[digest.Digest]bool
	// stop ends the run: a blob too large for a strict archive size fails
	// the archive, not one image (nothing else would make it fit).
	stop context.CancelCauseFunc
}

// NewDiskDestination is mirror-to-disk's destination: manifests into store,
// other blobs into stage; carried are the blobs earlier archives carried;
// stop ends the run when a blob cannot fit any chunk.
func NewDiskDestination(store *ocistore.Store, stage *archive.Staging, carried map[digest.Digest]bool, stop context.CancelCauseFunc) Destination {
	return diskDestination{storeEndpoint{store}, stage, carried, stop}
}

// has reports whether blob d needs no transfer.
func (e diskDestination) has(d digest.Digest) bool {
	return e.carried[d] || e.stage.Has(d) || e.s.Has(d)
}

// HasManifest reports whether img is whole: its manifests in the store and
// each blob they name stored, staged or carried earlier.
func (e diskDestination) HasManifest(_ context.Context, img imageset.Image, d digest.Digest) (bool, error) {
	descs, err := StoreBlobsWalk(e.s, img, d, e.has)
	if err != nil || len(descs) == 0 {
		return false, nil // missing or damaged: the copy fetches it again
	}
	if desc, ok := e.s.Resolve(img.Destination); !ok || desc.Digest != d {
		e.s.Tag(img.Destination, ocispec.Descriptor{MediaType: descs[0].MediaType, Digest: d, Size: descs[0].Size})
	}
	return true, nil
}

func (e diskDestination) HasBlob(_ context.Context, _ imageset.Image, desc ocispec.Descriptor) (bool, error) {
	return e.has(desc.Digest), nil
}

// copyBuffers keep the buffers blobs stream through into the archive: 64
// KiB for blobs under 1 MiB, which over a WAN stream side by side for
// seconds each (at 256 KiB, mirror-to-disk's peak RSS under the bench's WAN
// rose 8 MiB), 256 KiB for larger ones (fewer system calls on a fast link).
var copyBuffers = [2]sync.Pool{{New: func() any { b := make([]byte, 64<<10); return &b }}, {New: func() any { b := make([]byte, 256<<10); return &b }}}

// copyBuffersFor is the pool of copyBuffers for a blob of size bytes.
func copyBuffersFor(size int64) *sync.Pool {
	if size >= 1<<20 {
		return &copyBuffers[1]
	}
	return &copyBuffers[0]
}

// PutBlob streams the blob into its place in the staged archive. The copy
// hands a verifyingReader, which fails instead of ending when the content
// does not match the digest; any other reader is verified here. Only a
// blob read whole and verified is marked staged.
func (e diskDestination) PutBlob(_ context.Context, _ imageset.Image, desc ocispec.Descriptor, r io.Reader) error {
	slot, err := e.stage.Reserve(desc.Digest, desc.Size)
	if errors.Is(err, archive.ErrStaged) {
		// Another image's transfer staged it meanwhile; the copy checks
		// that the content it handed was read whole.
		_, err = io.Copy(io.Discard, r)
		return err
	}
	var strict *archive.StrictError
	if errors.As(err, &strict) && e.stop != nil {
		e.stop(err)
	}
	if err != nil {
		return err
	}
	var v digest.Verifier
	if _, ok := r.(*verifyingReader); !ok {
		v = desc.Digest.Verifier()
		r = io.TeeReader(r, v)
	}
	pool := copyBuffersFor(desc.Size)
	buf := pool.Get().(*[]byte)
	n, err := io.CopyBuffer(slot.Writer(), r, *buf)
	pool.Put(buf)
	switch {
	case err != nil:
	case n != desc.Size:
		err = &failure.DigestError{Digest: desc.Digest, Msg: fmt.Sprintf("got %d bytes, expected %d", n, desc.Size)}
	case v != nil && !v.Verified():
		err = &failure.DigestError{Digest: desc.Digest, Msg: "content does not match the digest"}
	}
	if err != nil {
		slot.Release()
		return err
	}
	slot.Done()
	return nil
}
