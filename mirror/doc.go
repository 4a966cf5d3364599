// Package mirror runs the trips (mirror-to-disk, disk-to-mirror,
// mirror-to-mirror): Trip holds what the user asked, resolution makes the
// workspace.Plan (with the contributors of each ImageSetConfiguration
// section, package sections, and the sigstore Search), and run executes it
// through the transfer engine, keeps the workspace's records, writes the
// archive or the cluster resources, prunes, and reports (Report, the
// summary). It wires the stages and is the only package that knows all of
// them; it holds no stage of its own.
//
// It may import every gapmirror package below cmd/gapmirror and serve:
// archive, failure, generate, imageset and its sub-packages,
// progress, prune, registryapi, sections, sigstore, transfer and workspace.
package mirror
