package transfer

import (
	"context"
	"encoding/json"
	"io"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/image/v5/manifest"

	"github.com/gapmirror/gapmirror/imageset"
)

// Source is where the images of a Set are read from: an upstream registry,
// the local store or an archive. Each finds an image by whichever name of
// imageset.Image it is keyed by (upstream: Source; store, archive: Destination).
type Source interface {
	// Manifest returns the manifest with digest d of img (d is img's digest
	// or one of its index's instances) and its media type.
	Manifest(ctx context.Context, img imageset.Image, d digest.Digest) ([]byte, string, error)
	// Blob opens a config or layer blob of img.
	Blob(ctx context.Context, img imageset.Image, desc ocispec.Descriptor) (io.ReadCloser, error)
	Close() error
}

// Destination is where the images of a Set are written to.
type Destination interface {
	// HasManifest reports whether img's destination already names manifest
	// d, so the image can be skipped.
	HasManifest(ctx context.Context, img imageset.Image, d digest.Digest) (bool, error)
	// HasBlob reports whether the blob is already available to img's
	// destination repository; it may make it so cheaply (a cross-repository
	// mount) and then reports true.
	HasBlob(ctx context.Context, img imageset.Image, desc ocispec.Descriptor) (bool, error)
	// PutBlob writes a blob of img; r yields exactly desc's content.
	PutBlob(ctx context.Context, img imageset.Image, desc ocispec.Descriptor, r io.Reader) error
	// PutManifest writes a manifest of img, after everything it references.
	// top is set for the image's own manifest, which is also tagged.
	PutManifest(ctx context.Context, img imageset.Image, desc ocispec.Descriptor, data []byte, top bool) error
	Close() error
}

// MediaTypeOf guesses a manifest's media type from its content.
func MediaTypeOf(data []byte) string {
	return manifest.GuessMIMEType(data)
}

// IsIndex reports whether mt is a manifest list or image index.
func IsIndex(mt string) bool {
	return mt == ocispec.MediaTypeImageIndex || mt == manifest.DockerV2ListMediaType
}

// Children returns the manifests an index references.
func Children(data []byte) ([]ocispec.Descriptor, error) {
	var idx ocispec.Index
	if err := json.Unmarshal(data, &idx); err != nil {
		return nil, err
	}
	return idx.Manifests, nil
}

// ImageBlobs returns the config and layers an image manifest references,
// foreign layers left out (see blobsOf).
func ImageBlobs(data []byte) ([]ocispec.Descriptor, error) { return blobsOf(data) }

// blobsOf returns the config and layers an image manifest references, in
// order, skipping foreign (non-distributable) layers.
func blobsOf(data []byte) ([]ocispec.Descriptor, error) {
	var m ocispec.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	out := make([]ocispec.Descriptor, 0, len(m.Layers)+1)
	if m.Config.Digest != "" {
		out = append(out, m.Config)
	}
	for _, l := range m.Layers {
		if len(l.URLs) > 0 {
			continue // foreign layer: pulled from its URLs by the runtime
		}
		out = append(out, l)
	}
	return out, nil
}
