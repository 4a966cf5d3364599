package transfer

import (
	"context"
	"fmt"
	"io"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/gapmirror/gapmirror/imageset"
)

// BlobReader is what an archive offers: blobs by digest, verified as read.
type BlobReader interface {
	Has(d digest.Digest) bool
	Open(d digest.Digest) (io.ReadCloser, error)
}

// ArchiveSource reads the images of a Set straight out of archive chunks,
// without unpacking them. Blobs an earlier archive carried are not in it;
// the destination is expected to have them already.
type ArchiveSource struct {
	Archive BlobReader
	// Name names the archive in errors, e.g. its directory.
	Name string
	// Mirror, when set, gives manifests an earlier archive carried and the
	// mirror already has in the image's repository under another tag: an
	// unchanged release component gets a new tag with every release, and
	// the copy reads the manifest again to push that tag.
	Mirror Source
}

// Manifest implements Source.
func (a *ArchiveSource) Manifest(ctx context.Context, img imageset.Image, d digest.Digest) ([]byte, string, error) {
	if a.Mirror != nil && !a.Archive.Has(d) {
		if data, mt, err := a.Mirror.Manifest(ctx, img, d); err == nil && d.Validate() == nil && d.Algorithm().FromBytes(data) == d {
			return data, mt, nil
		}
	}
	rc, err := a.open(d)
	if err != nil {
		return nil, "", err
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return nil, "", err
	}
	return data, MediaTypeOf(data), nil
}

// Blob implements Source.
func (a *ArchiveSource) Blob(_ context.Context, _ imageset.Image, desc ocispec.Descriptor) (io.ReadCloser, error) {
	return a.open(desc.Digest)
}

func (a *ArchiveSource) open(d digest.Digest) (io.ReadCloser, error) {
	if !a.Archive.Has(d) {
		return nil, &MissingBlobError{Digest: d, Archive: a.Name}
	}
	return a.Archive.Open(d)
}

// Close implements Source.
func (a *ArchiveSource) Close() error { return nil }

// MissingBlobError says that an incremental archive relies on a blob that an
// earlier archive carried and the destination does not have.
type MissingBlobError struct {
	Digest  digest.Digest
	Archive string
}

func (e *MissingBlobError) Error() string {
	return fmt.Sprintf("blob %s is not in the archive %s and not at the destination: it came in an earlier archive; run disk-to-mirror with that archive first (or make a full archive with a new workspace)", e.Digest, e.Archive)
}
