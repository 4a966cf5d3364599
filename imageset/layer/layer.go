// Package layer reads the tar stream of an image layer, for the scans of
// resolution (a catalog image's FBC, a release payload's manifests).
//
// It imports no gapmirror package.
package layer

import (
	"bufio"
	"bytes"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"go.podman.io/image/v5/pkg/compression"
)

var (
	gzipMagic = []byte{0x1f, 0x8b}
	zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}
)

// Decompress returns the uncompressed stream of a layer: gzip, zstd or any
// format containers/image's compression.AutoDecompress knows, detected from
// the first bytes. gzip and zstd get single-stream decoders: AutoDecompress's
// gzip reader (pgzip) allocates about 9 MiB per stream to decompress ahead
// in parallel, which made the catalog scan mirror-to-disk's largest
// allocation, and these layers are read once, in step with a tar reader.
func Decompress(r io.Reader) (io.ReadCloser, error) {
	br := bufio.NewReader(r)
	magic, err := br.Peek(4)
	if err != nil && err != io.EOF {
		return nil, err
	}
	switch {
	case bytes.HasPrefix(magic, gzipMagic):
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("reading the gzip header: %w", err)
		}
		return zr, nil
	case bytes.HasPrefix(magic, zstdMagic):
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
		if err != nil {
			return nil, err
		}
		return zr.IOReadCloser(), nil
	}
	rc, _, err := compression.AutoDecompress(br)
	return rc, err
}
