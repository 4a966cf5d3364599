package transfer

import (
	"context"
	"io"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/ocistore"
)

// builtSource reads the images gapmirror built (imageset.Image.Built) from
// the local store and every other image from the upstream source, except
// operator catalogs the store already holds: resolution copied them there
// to read their FBC, so they are not downloaded twice.
type builtSource struct {
	Source
	store *ocistore.Store
}

// local reports whether img is read from the store. A manifest in the store
// means its whole image is there (manifests are stored last).
func (b builtSource) local(img imageset.Image) bool {
	return img.Built || img.Kind == imageset.KindOperatorCatalog && b.store.Has(digest.Digest(img.Digest))
}

func (b builtSource) Manifest(ctx context.Context, img imageset.Image, d digest.Digest) ([]byte, string, error) {
	if b.local(img) {
		return StoreSource(b.store).Manifest(ctx, img, d)
	}
	return b.Source.Manifest(ctx, img, d)
}

func (b builtSource) Blob(ctx context.Context, img imageset.Image, desc ocispec.Descriptor) (io.ReadCloser, error) {
	if b.local(img) {
		return StoreSource(b.store).Blob(ctx, img, desc)
	}
	return b.Source.Blob(ctx, img, desc)
}

// WithStore reads the images gapmirror built, and the operator catalogs the
// store holds, from store, and every other image from up (see builtSource).
func WithStore(up Source, store *ocistore.Store) Source { return builtSource{up, store} }
