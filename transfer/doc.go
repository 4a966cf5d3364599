// Package transfer is the copy engine, the stage every trip ends in: it
// moves the images of an imageset.Set from a Source to a Destination by
// digest. Sources and destinations are the registries (Registry), the local
// OCI store (an ocistore.Store as StoreSource and StoreDestination), an
// archive's chunks (ArchiveSource) and mirror-to-disk's staging
// (NewDiskDestination). CopyPlanned plans every image first (what
// the destination lacks, every blob of every image), then runs one bounded
// blob lane per source and destination host, mounts and retries, and
// accounts for progress (Tally, the Progress a run shows).
//
// It knows nothing of ImageSetConfiguration sections, trips or the
// workspace's records. It may import archive, backoff, failure, imageset,
// ocistore and registryapi.
package transfer
