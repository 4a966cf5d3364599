package imagebuilder

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"runtime"
	"strconv"
	"sync"

	"github.com/opencontainers/go-digest"
)

// Fleet describes a deterministic set of Count images that share base layers:
// image i is repository RepoPrefix+NN (e.g. "example/app-07") with tag Tag,
// made of the platform's base layer (shared by every image of that platform)
// and one layer of its own. Every MultiArchEvery-th image is multi-arch.
type Fleet struct {
	// Count is the number of images.
	Count int
	// Seed varies every layer; the same Fleet always gives the same digests.
	Seed uint64
	// RepoPrefix starts every repository name; empty means "example/app-".
	RepoPrefix string
	// Tag is every image's tag; empty means "v1".
	Tag string
	// BaseLayerSize is the size of the shared base layer; 0 means no base layer.
	BaseLayerSize int64
	// UniqueLayerSize is the size of each image's own layer; 0 means 1 KiB.
	UniqueLayerSize int64
	// MultiArchEvery makes images MultiArchEvery-1, 2*MultiArchEvery-1, …
	// multi-arch indexes over Platforms; 0 means none, 1 means all.
	MultiArchEvery int
	// Platforms are the platforms of multi-arch images; single-arch images use
	// the first. Empty means OpenShiftPlatforms.
	Platforms []Platform
	// Format is the manifest flavour; the zero value is OCI.
	Format Format
	// Uncompressed stores layers as plain tar.
	Uncompressed bool
	// Labels go into every image config.
	Labels map[string]string
}

// FleetImage is one image of a fleet: exactly one of Image and Index is set.
type FleetImage struct {
	// Repo is the repository name, e.g. "example/app-07".
	Repo string
	// Tag is the image's tag.
	Tag string
	// Image is set for a single-platform image.
	Image *Image
	// Index is set for a multi-platform image.
	Index *Index
}

// Digest is the manifest (or index) digest; empty for a zero FleetImage.
func (fi FleetImage) Digest() digest.Digest {
	switch {
	case fi.Index != nil:
		return fi.Index.Digest
	case fi.Image != nil:
		return fi.Image.Digest
	default:
		return ""
	}
}

// MediaType is the manifest (or index) media type; empty for a zero FleetImage.
func (fi FleetImage) MediaType() string {
	switch {
	case fi.Index != nil:
		return fi.Index.MediaType
	case fi.Image != nil:
		return fi.Image.MediaType
	default:
		return ""
	}
}

// Ref is host/repo:tag.
func (fi FleetImage) Ref(host string) string {
	return host + "/" + fi.Repo + ":" + fi.Tag
}

// Blobs is every distinct blob of the image.
func (fi FleetImage) Blobs() []Blob {
	switch {
	case fi.Index != nil:
		return fi.Index.Blobs()
	case fi.Image != nil:
		return fi.Image.Blobs()
	default:
		return nil
	}
}

// defaults returns f with empty fields filled in.
func (f Fleet) defaults() Fleet {
	if f.RepoPrefix == "" {
		f.RepoPrefix = "example/app-"
	}
	if f.Tag == "" {
		f.Tag = "v1"
	}
	if f.UniqueLayerSize == 0 {
		f.UniqueLayerSize = 1 << 10
	}
	if len(f.Platforms) == 0 {
		f.Platforms = OpenShiftPlatforms
	}
	return f
}

// layerSeed derives a layer seed from the fleet seed and a purpose.
func layerSeed(seed uint64, parts ...any) uint64 {
	h := fnv.New64a()
	_ = binary.Write(h, binary.LittleEndian, seed)
	for _, p := range parts {
		_, _ = fmt.Fprint(h, "/", p)
	}
	return h.Sum64()
}

// Build makes the fleet's images. Layers are generated in parallel, once each.
func (f Fleet) Build() ([]FleetImage, error) {
	if f.Count < 0 {
		return nil, fmt.Errorf("Fleet.Count is %d: must not be negative", f.Count)
	}
	if f.BaseLayerSize < 0 || f.UniqueLayerSize < 0 {
		return nil, fmt.Errorf("Fleet.BaseLayerSize and Fleet.UniqueLayerSize must not be negative")
	}
	if f.MultiArchEvery < 0 {
		return nil, fmt.Errorf("Fleet.MultiArchEvery is %d: must not be negative", f.MultiArchEvery)
	}
	if err := checkFormat(f.Format); err != nil {
		return nil, fmt.Errorf("Fleet.%w", err)
	}
	f = f.defaults()
	width := max(2, len(strconv.Itoa(f.Count-1)))

	type planned struct {
		repo  string
		multi bool
		specs []ImageSpec
	}
	plan := make([]planned, f.Count)
	var layers []LayerSpec // distinct, in first-use order
	seen := map[layerKey]bool{}
	for i := range f.Count {
		multi := f.MultiArchEvery > 0 && (i+1)%f.MultiArchEvery == 0
		platforms := f.Platforms[:1]
		if multi {
			platforms = f.Platforms
		}
		p := planned{repo: fmt.Sprintf("%s%0*d", f.RepoPrefix, width, i), multi: multi}
		for pi, platform := range platforms {
			var ls []LayerSpec
			if f.BaseLayerSize > 0 {
				ls = append(ls, LayerSpec{Seed: layerSeed(f.Seed, "base", platform), Size: f.BaseLayerSize, Uncompressed: f.Uncompressed})
			}
			ls = append(ls, LayerSpec{Seed: layerSeed(f.Seed, "image", i, pi), Size: f.UniqueLayerSize, Uncompressed: f.Uncompressed})
			for _, l := range ls {
				if k := (layerKey{seed: l.Seed, size: l.Size, uncompressed: l.Uncompressed}); !seen[k] {
					seen[k] = true
					layers = append(layers, l)
				}
			}
			p.specs = append(p.specs, ImageSpec{
				Format:   f.Format,
				Platform: platform,
				Layers:   ls,
				Labels:   f.Labels,
				Cmd:      []string{"/bin/sh"},
			})
		}
		plan[i] = p
	}

	cache := newLayerCache()
	if err := cache.prebuild(layers, f.Format); err != nil {
		return nil, err
	}
	images := make([]FleetImage, f.Count)
	for i, p := range plan {
		fi := FleetImage{Repo: p.repo, Tag: f.Tag}
		var err error
		if p.multi {
			fi.Index, err = cache.buildIndex(IndexSpec{Format: f.Format, Images: p.specs})
		} else {
			fi.Image, err = cache.buildImage(p.specs[0])
		}
		if err != nil {
			return nil, fmt.Errorf("fleet image %s: %w", p.repo, err)
		}
		images[i] = fi
	}
	return images, nil
}

// prebuild generates the given layers with one worker per CPU.
func (c *layerCache) prebuild(layers []LayerSpec, format Format) error {
	work := make(chan LayerSpec)
	errs := make(chan error, len(layers))
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), max(len(layers), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ls := range work {
				if _, err := c.layer(ls, format); err != nil {
					errs <- err
				}
			}
		}()
	}
	for _, ls := range layers {
		work <- ls
	}
	close(work)
	wg.Wait()
	close(errs)
	return <-errs // nil when the channel is empty
}

// PushFleet pushes every fleet image to t as repo:tag. A blob already pushed
// to one repository is mounted into the next rather than uploaded again.
func PushFleet(ctx context.Context, t Target, images []FleetImage) error {
	p, err := newPusher(t)
	if err != nil {
		return err
	}
	for _, fi := range images {
		switch {
		case fi.Index != nil:
			err = p.pushIndex(ctx, fi.Repo, fi.Tag, fi.Index)
		default:
			err = p.pushImage(ctx, fi.Repo, fi.Tag, fi.Image)
		}
		if err != nil {
			return fmt.Errorf("pushing %s: %w", fi.Ref(p.base.Host), err)
		}
	}
	return nil
}

// DistinctBytes is the total size of the distinct blobs of images: what a
// registry stores for them.
func DistinctBytes(images []FleetImage) int64 {
	seen := map[digest.Digest]bool{}
	var total int64
	for _, fi := range images {
		for _, b := range fi.Blobs() {
			if !seen[b.Digest] {
				seen[b.Digest] = true
				total += b.Size
			}
		}
	}
	return total
}
