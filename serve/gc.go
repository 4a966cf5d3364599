package serve

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"

	"github.com/distribution/distribution/v3/registry/storage"
	"github.com/distribution/distribution/v3/registry/storage/driver"
	"github.com/distribution/distribution/v3/registry/storage/driver/factory"
)

// GCOptions configures CollectGarbage.
type GCOptions struct {
	// Root and RegistryConfig name the storage as they do for Options.
	Root, RegistryConfig string
	// RemoveUntagged also deletes manifests no tag reaches (and not
	// referenced by an index that a tag reaches).
	RemoveUntagged bool
}

// GCResult is what a collection found.
type GCResult struct {
	// BlobsBefore and BlobsAfter count the blobs (layers, configs,
	// manifests) in storage around the sweep.
	BlobsBefore, BlobsAfter int
}

// CollectGarbage deletes the blobs no manifest references, with
// distribution's mark-and-sweep. The registry must not be running on the
// same storage (pushes under way would lose blobs): the root's lock keeps
// a gapmirror serve on the same root out.
func CollectGarbage(ctx context.Context, opts GCOptions) (GCResult, error) {
	var res GCResult
	if opts.Root == "" {
		return res, errors.New("serve gc: no root directory: give --root DIR")
	}
	root, err := filepath.Abs(opts.Root)
	if err != nil {
		return res, err
	}
	if _, err := os.Stat(root); err != nil {
		return res, fmt.Errorf("--root: %w", err)
	}
	unlock, err := lockRoot(root)
	if err != nil {
		return res, err
	}
	defer unlock()
	cfg, _, err := parseConfiguration(root, opts.RegistryConfig)
	if err != nil {
		return res, err
	}
	name, params := cfg.Storage.Type(), cfg.Storage.Parameters()
	d, err := factory.Create(ctx, name, params)
	if err != nil {
		return res, fmt.Errorf("opening the %s storage: %w", name, err)
	}
	reg, err := storage.NewRegistry(ctx, d, storage.EnableDelete)
	if err != nil {
		return res, err
	}
	if res.BlobsBefore, err = countBlobs(ctx, d); err != nil {
		return res, err
	}
	if err := storage.MarkAndSweep(ctx, d, reg, storage.GCOpts{RemoveUntagged: opts.RemoveUntagged, Quiet: true}); err != nil {
		return res, fmt.Errorf("garbage collection: %w", err)
	}
	res.BlobsAfter, err = countBlobs(ctx, d)
	return res, err
}

// blobsDir is where distribution keeps blob data: blobs/sha256/ab/abcd…/data.
const blobsDir = "/docker/registry/v2/blobs"

func countBlobs(ctx context.Context, d driver.StorageDriver) (int, error) {
	n := 0
	err := d.Walk(ctx, blobsDir, func(fi driver.FileInfo) error {
		if !fi.IsDir() && path.Base(fi.Path()) == "data" {
			n++
		}
		return nil
	})
	var notFound driver.PathNotFoundError
	if errors.As(err, &notFound) {
		return 0, nil
	}
	return n, err
}
