// Package fbc is the OLM file-based catalog (FBC) as data: its model,
// reading it and writing it back.
//
// A catalog is a tree of JSON and YAML files holding blobs (olm.package,
// olm.channel, olm.bundle, olm.deprecations and any other schema). LoadFS
// reads such a tree as opm does into a Catalog, whose structural rules
// NewCatalog checks, and WriteFiles and WriteDir write a Catalog back as FBC
// that opm serves. Blobs keep every field they were read with, known or
// not, so writing back loses nothing. It also parses version ranges in
// OLM's two dialects (ParseSkipRange for skipRange and
// olm.package.required, which the structural checks need;
// ParseVersionRange for OLM v1's, which filters use) and lists the images a
// catalog's bundles need (RelatedImages).
//
// Pipeline stage: resolution, the data the operators contributor works on:
// imageset/catalog filters a Catalog into a smaller one, and
// imageset/catalogimage takes the FBC out of a catalog image and rebuilds
// the image around the filtered one. It knows nothing of image sets,
// filtering or upgrade graphs, and holds no image code.
//
// It may import, of gapmirror's packages, only imageset/yamlbudget.
package fbc
