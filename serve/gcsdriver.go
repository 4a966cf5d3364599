//go:build gapmirror_gcs && !gapmirror_nocloud

package serve

// The GCS storage driver, opted in with -tags gapmirror_gcs: the Google
// Cloud Storage client links gRPC with its xDS and Envoy packages, whose
// initialisation at every start of every gapmirror command costs about 15 MiB
// of peak memory (gapmirror version: 67 MiB with it, 52 MiB without).
import _ "github.com/distribution/distribution/v3/registry/storage/driver/gcs"

const gcsBuiltIn = true
