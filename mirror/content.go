package mirror

import (
	"context"
	"io"
	"sync"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/gapmirror/gapmirror/archive"
	"github.com/gapmirror/gapmirror/imageset"
)

// content is what a trip carries besides image blobs: small files that
// travel in the archive (release signatures, update graphs) and what the
// cluster resources need besides the Set. Contributors fill it while the
// configuration is resolved; disk-to-mirror refills it from the archive.
type content struct {
	mu     sync.Mutex
	extras []archive.Extra
	// signatures maps a release digest to its verified signatures, in order.
	signatures map[string][][]byte
	// catalogTemplates maps a catalog's destination to its
	// targetCatalogSourceTemplate file.
	catalogTemplates map[string]string
	// pinnedCatalogs maps a catalog entry's config path to the digest it
	// was resolved to, for the pinned configuration.
	pinnedCatalogs map[string]string
}

// addExtra queues a file for the archive; a later file of the same name wins.
func (c *content) addExtra(name string, data []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.extras {
		if c.extras[i].Name == name {
			c.extras[i].Data = data
			return
		}
	}
	c.extras = append(c.extras, archive.Extra{Name: name, Data: data})
}

func (c *content) addSignatures(releaseDigest string, sigs [][]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.signatures == nil {
		c.signatures = map[string][][]byte{}
	}
	c.signatures[releaseDigest] = sigs
}

func (c *content) setCatalogTemplate(dest, path string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.catalogTemplates == nil {
		c.catalogTemplates = map[string]string{}
	}
	c.catalogTemplates[dest] = path
}

// builtSource reads the images gapmirror built (imageset.Image.Built) from
// the local store and every other image from the upstream source, except
// operator catalogs the store already holds: resolution copied them there
// to read their FBC, so they are not downloaded twice.
type builtSource struct {
	Source
	store *Store
}

// local reports whether img is read from the store. A manifest in the store
// means its whole image is there (manifests are stored last).
func (b builtSource) local(img imageset.Image) bool {
	return img.Built || img.Kind == imageset.KindOperatorCatalog && b.store.Has(digest.Digest(img.Digest))
}

func (b builtSource) Manifest(ctx context.Context, img imageset.Image, d digest.Digest) ([]byte, string, error) {
	if b.local(img) {
		return b.store.Source().Manifest(ctx, img, d)
	}
	return b.Source.Manifest(ctx, img, d)
}

func (b builtSource) Blob(ctx context.Context, img imageset.Image, desc ocispec.Descriptor) (io.ReadCloser, error) {
	if b.local(img) {
		return b.store.Source().Blob(ctx, img, desc)
	}
	return b.Source.Blob(ctx, img, desc)
}

func (b builtSource) ImageDone(img imageset.Image) {
	if d, ok := b.Source.(imageDone); ok && !b.local(img) {
		d.ImageDone(img)
	}
}
