// Package sections holds the contributors: the code that resolves the
// ImageSetConfiguration sections that need more than a tag lookup into
// images and plan files. Operators filter catalogs and rebuild them,
// releases walk update graphs and verify signatures, helm renders charts
// (from repositories and OCI registries), layouts read OCI layouts on
// disk.
//
// Stage: resolution. Each contributor speaks only through
// imageset.Resolving (the images it adds) and the workspace.Plan's files
// (what travels with them); Env is all it sees of a trip's options.
//
// It may import archive, generate, imageset and its subpackages,
// registryapi, transfer (to read sources and fill the store) and
// workspace; never the trips (mirror).
package sections
