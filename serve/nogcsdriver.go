//go:build !gapmirror_gcs || gapmirror_nocloud

package serve

// gcsBuiltIn says whether this build serves storage.gcs (gcsdriver.go).
const gcsBuiltIn = false
