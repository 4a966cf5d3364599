// Package catalogimage reads the file-based catalog (FBC) out of an operator
// catalog image held in a content-addressed blob store, and rebuilds the
// image around a filtered FBC.
//
// A catalog image is an ordinary container image (usually opm as entrypoint)
// whose config label operators.operatorframework.io.index.configs.v1 names
// the directory holding the FBC, normally /configs. Extraction applies the
// layers in order but writes only that directory. Rebuild appends two layers
// to every platform image: one that removes the old configs directory and
// the stale opm serve cache, and one that holds the filtered FBC.
//
// Pipeline stage: resolution, on both sides of the catalog filter. Once a
// catalog image is in the store, ExtractFBC hands its FBC to imageset/fbc
// to load and imageset/catalog to filter; Rebuild then makes the filtered
// catalog image that the Plan mirrors in place of the original (the
// operators contributor in sections, and disk-to-mirror's subset of an
// archived catalog).
// It copies no image between registries: the blobs it reads and writes are
// all in the Blobs it is given.
//
// Imports: no gapmirror package. It reads and writes the FBC as a directory
// tree of files, so it needs neither imageset/fbc nor imageset/catalog
// (should it ever, it sits above them, never the reverse).
package catalogimage
