package transfer

import (
	"reflect"
	"strings"

	"github.com/opencontainers/go-digest"
	"go.podman.io/image/v5/types"
)

// recordCompression tells containers/image's in-memory blob-info cache how a
// blob is compressed. The docker destination offers a known location of a
// blob for a cross-repository mount only when the cache knows its
// compression, and only copy.Image records that, through an interface
// internal to containers/image. The method itself is exported on the cache
// type, so it is called by reflection; TestSharedLayerIsMounted catches a
// containers/image upgrade that changes it (uploads still work then, just
// without mounts).
func recordCompression(cache types.BlobInfoCache, d digest.Digest, mediaType string) {
	m := reflect.ValueOf(cache).MethodByName("RecordDigestCompressorData")
	if !m.IsValid() || m.Type().NumIn() != 2 || m.Type().In(1).Kind() != reflect.Struct {
		return
	}
	data := reflect.New(m.Type().In(1)).Elem()
	base := data.FieldByName("BaseVariantCompressor")
	specific := data.FieldByName("SpecificVariantCompressor")
	if !base.IsValid() || base.Kind() != reflect.String || !specific.IsValid() || specific.Kind() != reflect.String {
		return
	}
	base.SetString(compressionOf(mediaType))
	specific.SetString("unknown")
	m.Call([]reflect.Value{reflect.ValueOf(d), data})
}

// compressionOf names the compression of a blob of this media type in
// containers/image's terms.
func compressionOf(mediaType string) string {
	switch {
	case strings.HasSuffix(mediaType, "gzip"):
		return "gzip"
	case strings.HasSuffix(mediaType, "zstd"):
		return "zstd"
	default:
		return "uncompressed"
	}
}
