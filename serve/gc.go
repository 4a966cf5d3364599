package serve

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/distribution/distribution/v3/registry/storage"
	"github.com/distribution/distribution/v3/registry/storage/driver"
	"github.com/distribution/distribution/v3/registry/storage/driver/factory"
	"github.com/opencontainers/go-digest"
)

// GCOptions configures CollectGarbage.
type GCOptions struct {
	// Root and RegistryConfig name the storage as they do for Options.
	Root, RegistryConfig string
	// RemoveUntagged also deletes manifests no tag reaches (and not
	// referenced by an index that a tag reaches).
	RemoveUntagged bool
	// Debug lets distribution log every blob, link and manifest it deletes.
	Debug bool
}

// GCResult is what a collection found.
type GCResult struct {
	// BlobsBefore and BlobsAfter count the blobs (layers, configs,
	// manifests) in storage around the sweep; BytesBefore and BytesAfter
	// add up their sizes.
	BlobsBefore, BlobsAfter int
	BytesBefore, BytesAfter int64
	// ManifestsBefore and ManifestsAfter count the manifests the
	// repositories hold (revisions: one per repository a manifest is in).
	ManifestsBefore, ManifestsAfter int
	// NothingPushed: the storage holds no repository, so there was nothing
	// to collect.
	NothingPushed bool
	// CacheKeysCleared counts the keys of the Redis blob-descriptor cache
	// deleted after the sweep (storage.cache.blobdescriptor: redis).
	CacheKeysCleared int
}

// Storage paths of distribution's layout, under the driver's root.
const (
	registryDir = "/docker/registry/v2"
	// blobsDir keeps blob data: blobs/sha256/ab/abcd…/data.
	blobsDir = registryDir + "/blobs"
	// reposDir keeps the repositories: their manifest revisions, tags and
	// layer links; made by the first push.
	reposDir = registryDir + "/repositories"
)

// lockFile, under the root, is held by a running registry and by garbage
// collection, which must not sweep while pushes are under way (on unix:
// see lockRoot).
const lockFile = "serve.lock"

// rootEntries are what a gapmirror serve makes under its root (and the
// htpasswd file serve htpasswd --root writes).
var rootEntries = []string{"docker", "tls", lockFile, htpasswdFile}

// CollectGarbage deletes the blobs no manifest references, with
// distribution's mark-and-sweep. The registry must not be running on the
// same storage (pushes under way would lose blobs): the root's lock keeps
// a gapmirror serve on the same root out. A root that does not exist or
// holds no repository yet has nothing to collect.
func CollectGarbage(ctx context.Context, opts GCOptions) (GCResult, error) {
	var res GCResult
	if opts.Root == "" {
		return res, errors.New("serve gc: no root directory: give --root DIR")
	}
	root, err := filepath.Abs(opts.Root)
	if err != nil {
		return res, err
	}
	cfg, source, err := parseConfiguration(root, opts.RegistryConfig)
	if err != nil {
		return res, err
	}
	switch exists, err := checkGCRoot(root); {
	case err != nil:
		return res, err
	case !exists && opts.RegistryConfig == "":
		res.NothingPushed = true // and nothing to make a lock in
		return res, nil
	case !exists:
		return res, fmt.Errorf("--root %s does not exist: give the --root the registry serves with (it holds the lock that keeps gc off a running registry)", root)
	}
	unlock, err := lockRoot(root)
	if err != nil {
		return res, err
	}
	defer unlock()
	// distribution logs every blob it deletes: only in debug.
	registryLogs(opts.Debug)
	name, params := cfg.Storage.Type(), cfg.Storage.Parameters()
	d, err := factory.Create(ctx, name, params)
	if err != nil {
		return res, fmt.Errorf("opening the %s storage: %w", name, err)
	}
	if usesLeases(name) {
		// Replicas elsewhere hold no lock here: their leases say they run.
		h, err := takeLease(ctx, d, describeStorage(cfg, source), lease{Kind: "gc"}, func(o lease) string {
			expiry := "a replica killed without stopping holds its lease until it expires, at " + o.Expires.UTC().Format(time.RFC3339)
			switch o.Kind {
			case "serve":
				return fmt.Sprintf("in use by a running %s: stop every replica serving this storage first (%s)", o, expiry)
			case "gc":
				return fmt.Sprintf("another garbage collection is running (%s)", o)
			}
			return fmt.Sprintf("%s holds this storage: delete that object if no gapmirror uses the storage", o.Kind)
		})
		if err != nil {
			return res, fmt.Errorf("serve gc: %w", err)
		}
		defer h.release()
	}
	var cache *redisCache
	if usesRedisCache(cfg) {
		// Checked before anything is deleted: the cache must be cleared after.
		if cache, err = openRedisCache(cfg); err != nil {
			return res, fmt.Errorf("serve gc: %s: %w", source, err)
		}
		defer cache.close()
		if err := cache.ping(ctx); err != nil {
			return res, fmt.Errorf("serve gc: %w: garbage collection must clear the cache after deleting blobs (else the registry would still say they exist); nothing was deleted", err)
		}
	}
	reg, err := storage.NewRegistry(ctx, d, storage.EnableDelete)
	if err != nil {
		return res, err
	}
	if res.BlobsBefore, res.BytesBefore, err = countBlobs(ctx, d); err != nil {
		return res, err
	}
	if res.ManifestsBefore, err = countManifests(ctx, d); err != nil {
		return res, err
	}
	if _, err := d.Stat(ctx, reposDir); err != nil {
		if errors.As(err, new(driver.PathNotFoundError)) {
			// Nothing was pushed (distribution's mark fails on the missing directory).
			res.NothingPushed = true
			res.BlobsAfter, res.BytesAfter, res.ManifestsAfter = res.BlobsBefore, res.BytesBefore, res.ManifestsBefore
			return res, nil
		}
		return res, fmt.Errorf("reading the %s storage: %w", name, err)
	}
	if opts.RemoveUntagged {
		if err := removeTaglessManifests(ctx, d); err != nil {
			return res, fmt.Errorf("garbage collection: %w", err)
		}
	}
	if err := storage.MarkAndSweep(ctx, d, reg, storage.GCOpts{RemoveUntagged: opts.RemoveUntagged, Quiet: true}); err != nil {
		return res, fmt.Errorf("garbage collection: %w", err)
	}
	if cache != nil {
		// The registries are stopped; cached descriptors of deleted blobs
		// would outlive them.
		if res.CacheKeysCleared, err = cache.clear(ctx); err != nil {
			return res, fmt.Errorf("serve gc: blobs were deleted, but %w: clear it (the keys blobs::* and repository::*) before starting the registry, or run serve gc again", err)
		}
	}
	if res.BlobsAfter, res.BytesAfter, err = countBlobs(ctx, d); err != nil {
		return res, err
	}
	res.ManifestsAfter, err = countManifests(ctx, d)
	return res, err
}

// checkGCRoot reports whether root exists, and refuses a root that is a
// file, or a directory with content none of which a serve made (so that gc
// pointed at the wrong directory leaves no lock file there).
func checkGCRoot(root string) (bool, error) {
	entries, err := os.ReadDir(root)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	case err != nil:
		if fi, serr := os.Stat(root); serr == nil && !fi.IsDir() {
			return true, fmt.Errorf("--root %s is a file, not a directory: give the --root the registry serves with", root)
		}
		return true, fmt.Errorf("--root %s: %w", root, err)
	}
	if len(entries) == 0 {
		return true, nil
	}
	var names []string
	for _, e := range entries {
		for _, want := range rootEntries {
			if e.Name() == want {
				return true, nil
			}
		}
		if len(names) < 3 {
			names = append(names, e.Name())
		}
	}
	return true, fmt.Errorf("--root %s does not look like a gapmirror serve root (it holds %s…, and none of %s): give the --root the registry serves with", root, strings.Join(names, ", "), strings.Join(rootEntries, ", "))
}

// countBlobs counts the blobs in storage and adds up their sizes.
func countBlobs(ctx context.Context, d driver.StorageDriver) (n int, size int64, err error) {
	err = d.Walk(ctx, blobsDir, func(fi driver.FileInfo) error {
		if !fi.IsDir() && path.Base(fi.Path()) == "data" {
			n++
			size += fi.Size()
		}
		return nil
	})
	if errors.As(err, new(driver.PathNotFoundError)) {
		return 0, 0, nil
	}
	return n, size, err
}

// removeTaglessManifests deletes the manifests of every repository that has
// no tag at all. distribution's mark, told to remove untagged manifests,
// skips such a repository (listing its tags fails) without marking its
// manifests, so its sweep deleted their blobs and left the manifests listed
// with their content gone (distribution/distribution#4282). Every manifest
// of a repository without tags is untagged, and a manifest is referenced
// only from its own repository: all of them go, before the mark.
func removeTaglessManifests(ctx context.Context, d driver.StorageDriver) error {
	var repos []string
	err := d.Walk(ctx, reposDir, func(fi driver.FileInfo) error {
		if !fi.IsDir() {
			return nil
		}
		switch path.Base(fi.Path()) {
		case "_manifests":
			repos = append(repos, strings.TrimPrefix(path.Dir(fi.Path()), reposDir+"/"))
			return driver.ErrSkipDir
		case "_layers", "_uploads":
			return driver.ErrSkipDir
		}
		return nil
	})
	if errors.As(err, new(driver.PathNotFoundError)) {
		return nil
	}
	if err != nil {
		return err
	}
	vacuum := storage.NewVacuum(ctx, d)
	for _, repo := range repos {
		manifests := path.Join(reposDir, repo, "_manifests")
		tags, err := d.List(ctx, path.Join(manifests, "tags"))
		if err != nil && !errors.As(err, new(driver.PathNotFoundError)) {
			return err
		}
		if len(tags) > 0 {
			continue
		}
		revisions, err := d.List(ctx, path.Join(manifests, "revisions", "sha256"))
		if errors.As(err, new(driver.PathNotFoundError)) {
			continue
		}
		if err != nil {
			return err
		}
		for _, r := range revisions {
			dgst := digest.NewDigestFromEncoded(digest.SHA256, path.Base(r))
			if dgst.Validate() != nil {
				continue // not distribution's: left alone
			}
			if err := vacuum.RemoveManifest(repo, dgst, nil); err != nil {
				return fmt.Errorf("deleting the untagged manifest %s of %s: %w", dgst, repo, err)
			}
		}
	}
	return nil
}

// countManifests counts the manifest revisions of every repository:
// repositories/NAME/_manifests/revisions/sha256/HEX/link.
func countManifests(ctx context.Context, d driver.StorageDriver) (int, error) {
	n := 0
	err := d.Walk(ctx, reposDir, func(fi driver.FileInfo) error {
		p := fi.Path()
		if fi.IsDir() {
			// Layer links and uploads hold no manifests.
			if b := path.Base(p); b == "_layers" || b == "_uploads" {
				return driver.ErrSkipDir
			}
			return nil
		}
		if path.Base(p) == "link" && strings.Contains(p, "/_manifests/revisions/") {
			n++
		}
		return nil
	})
	if errors.As(err, new(driver.PathNotFoundError)) {
		return 0, nil
	}
	return n, err
}
