package transfer

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/ocistore"
)

// StoreSource is the store s as a Source of the images of a Set, found by
// their destination names.
func StoreSource(s *ocistore.Store) Source { return storeEndpoint{s} }

// StoreDestination is the store s as a Destination.
func StoreDestination(s *ocistore.Store) Destination { return storeEndpoint{s} }

type storeEndpoint struct{ s *ocistore.Store }

func (e storeEndpoint) String() string { return "oci:" + e.s.Dir() }

func (e storeEndpoint) Manifest(_ context.Context, _ imageset.Image, d digest.Digest) ([]byte, string, error) {
	data, err := e.s.ReadBlob(d)
	if err != nil {
		return nil, "", err
	}
	return data, MediaTypeOf(data), nil
}

func (e storeEndpoint) Blob(_ context.Context, _ imageset.Image, desc ocispec.Descriptor) (io.ReadCloser, error) {
	return e.s.Open(desc.Digest)
}

func (e storeEndpoint) HasManifest(_ context.Context, img imageset.Image, d digest.Digest) (bool, error) {
	// One read of the manifest serves the instance check and the tag.
	data, err := e.s.ReadBlob(d)
	if err != nil || !hasInstancesOf(e.s, img, d, data) {
		return false, nil
	}
	if desc, ok := e.s.Resolve(img.Destination); !ok || desc.Digest != d {
		e.s.Tag(img.Destination, ocispec.Descriptor{MediaType: MediaTypeOf(data), Digest: d, Size: int64(len(data))})
	}
	return true, nil
}

func (e storeEndpoint) HasBlob(_ context.Context, _ imageset.Image, desc ocispec.Descriptor) (bool, error) {
	return e.s.Has(desc.Digest), nil
}

func (e storeEndpoint) PutBlob(_ context.Context, _ imageset.Image, desc ocispec.Descriptor, r io.Reader) error {
	return e.s.Put(desc.Digest, desc.Size, r)
}

func (e storeEndpoint) PutManifest(_ context.Context, img imageset.Image, desc ocispec.Descriptor, data []byte, top bool) error {
	if err := e.s.Put(desc.Digest, int64(len(data)), bytes.NewReader(data)); err != nil {
		return err
	}
	if top {
		e.s.Tag(img.Destination, desc)
	}
	return nil
}

func (e storeEndpoint) Close() error { return e.s.SaveIndex() }

// missingError is a blob of a stored manifest that is not at hand.
type missingError struct{ blob, manifest digest.Digest }

func (e *missingError) Error() string {
	return fmt.Sprintf("store is missing blob %s of manifest %s: run mirror-to-disk again to fetch it", e.blob, e.manifest)
}

// hasInstances reports whether the store holds every instance img needs of
// the manifest d, when d is an index. The index alone no longer proves the
// image whole: an earlier run may have stored it sparse, for fewer platforms.
func hasInstances(s *ocistore.Store, img imageset.Image, d digest.Digest) bool {
	data, err := s.ReadBlob(d)
	return err == nil && hasInstancesOf(s, img, d, data)
}

// hasInstancesOf is hasInstances for the manifest d already read as data.
func hasInstancesOf(s *ocistore.Store, img imageset.Image, d digest.Digest, data []byte) bool {
	if !IsIndex(MediaTypeOf(data)) {
		return true
	}
	kids, err := Children(data)
	if err != nil {
		return false
	}
	kids, err = instances(img, d, kids)
	if err != nil {
		return false // the copy reports it
	}
	for _, k := range kids {
		if !hasInstances(s, imageset.Image{}, k.Digest) { // a missing blob fails the read
			return false
		}
	}
	return true
}

// StoreBlobs returns every blob img references in the store s,
// transitively, including the manifests themselves: what an archive must
// carry for it. Of a sparse image's index only the instances of its
// platforms count.
func StoreBlobs(s *ocistore.Store, img imageset.Image) ([]ocispec.Descriptor, error) {
	return StoreBlobsWalk(s, img, digest.Digest(img.Digest), s.Has)
}

// StoreBlobsWalk walks img's manifests in the store s from d; every blob
// they reference must pass have (the manifests themselves are read, so
// they must be in the store).
func StoreBlobsWalk(s *ocistore.Store, img imageset.Image, d digest.Digest, have func(digest.Digest) bool) ([]ocispec.Descriptor, error) {
	data, err := s.ReadBlob(d)
	if err != nil {
		return nil, err
	}
	mt := MediaTypeOf(data)
	out := []ocispec.Descriptor{{MediaType: mt, Digest: d, Size: int64(len(data))}}
	if IsIndex(mt) {
		kids, err := Children(data)
		if err != nil {
			return nil, fmt.Errorf("store manifest %s: %w", d, err)
		}
		if kids, err = instances(img, d, kids); err != nil {
			return nil, err
		}
		for _, k := range kids {
			// The filter applies to the image's own index only.
			more, err := StoreBlobsWalk(s, imageset.Image{}, k.Digest, have)
			if err != nil {
				return nil, err
			}
			out = append(out, more...)
		}
		return out, nil
	}
	blobs, err := blobsOf(data)
	if err != nil {
		return nil, fmt.Errorf("store manifest %s: %w", d, err)
	}
	for _, b := range blobs {
		if !have(b.Digest) {
			return nil, &missingError{blob: b.Digest, manifest: d}
		}
	}
	return append(out, blobs...), nil
}
