// Package prune deletes from a mirror registry the manifests that gapmirror
// pushed there and that are no longer wanted, and nothing else: never a
// manifest gapmirror did not record pushing, never one a kept tag or a kept
// index still references.
//
// Deletion is in one place: planning what to delete (ComputeAfter, from the
// workspace's record of what each mirror root holds), executing the plan
// (Execute), the --prune of the trips (Candidates, KeepNames, Forget), and
// the delete command (Delete: Generate reads a
// DeleteImageSetConfiguration, resolved with the sections' catalog
// filtering and release ranges; Execute applies the list it wrote).
//
// Stage: deletion, after the copy. It may import archive, imageset and its
// catalog and release packages, registryapi, sections, transfer (to read
// catalogs back from the mirror) and workspace; never the trips (mirror).
package prune
