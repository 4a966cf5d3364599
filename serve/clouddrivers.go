//go:build !gapmirror_nocloud

package serve

// The object storage drivers for a --registry-config that names s3 or
// azure; build with -tags gapmirror_nocloud to leave them out. gcs is in
// gcsdriver.go, opted in.
import (
	_ "github.com/distribution/distribution/v3/registry/storage/driver/azure"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/s3-aws"
)
