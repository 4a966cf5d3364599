//go:build !gapmirror_nocloud

package serve

// The object storage drivers, for a --registry-config that names s3, azure
// or gcs. They are most of the registry's weight in the binary (about 30 of
// its 42 MB); build with -tags gapmirror_nocloud to leave them out.
import (
	_ "github.com/distribution/distribution/v3/registry/storage/driver/azure"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/gcs"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/s3-aws"
)
