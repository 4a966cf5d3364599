// Package catalog filters OLM file-based catalogs (FBC): Filter keeps what
// an image set asks for while keeping every channel's upgrade graph valid,
// and reports why each bundle is kept.
//
// It works on the catalogs of imageset/fbc, which reads and writes them:
// Filter takes an fbc.Catalog and a FilterSpec and returns the smaller
// fbc.Catalog with its Report; Validate checks every channel's upgrade
// graph as opm does before it serves a catalog; Packages summarises each
// package's channels and versions for discovery (list operators);
// Generate makes synthetic catalogs for tests and benchmarks.
//
// Pipeline stage: resolution, the operators contributor's choice of what
// to mirror: filtering (with the report of why each bundle is kept) and
// the upgrade graphs it keeps valid. It holds no image code and no FBC
// reading or writing: the FBC model is imageset/fbc, and getting the FBC
// out of a catalog image and rebuilding the image around the filtered FBC
// is imageset/catalogimage.
//
// It may import imageset/fbc and imageset/spelling.
package catalog
