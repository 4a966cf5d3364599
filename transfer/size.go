package transfer

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sync/errgroup"

	"github.com/gapmirror/gapmirror/imageset"
)

// Size reads the manifests of images through src, parallel at a time, and
// adds up the distinct blobs and manifests a copy moves, leaving out those
// in skip. An image it cannot read is counted in unreadable (and logged),
// not an error: a dry run reports what it can.
func Size(ctx context.Context, src Source, images []imageset.Image, skip map[digest.Digest]bool, parallel int, log *slog.Logger) (blobs int, bytes int64, unreadable int) {
	var mu sync.Mutex
	seen := map[digest.Digest]bool{}
	add := func(descs []ocispec.Descriptor) {
		mu.Lock()
		defer mu.Unlock()
		for _, d := range descs {
			if !seen[d.Digest] && !skip[d.Digest] {
				blobs++
				bytes += d.Size
			}
			seen[d.Digest] = true
		}
	}
	var g errgroup.Group
	g.SetLimit(max(parallel, 1))
	for _, img := range images {
		g.Go(func() error {
			descs, err := imageBlobs(ctx, src, img, digest.Digest(img.Digest), true)
			if err != nil {
				mu.Lock()
				unreadable++
				mu.Unlock()
				log.Debug("dry run: cannot read the image to size it", "image", img.Origin, "error", err)
				return nil
			}
			add(descs)
			return nil
		})
	}
	_ = g.Wait() // unreadable images are counted, not errors
	return blobs, bytes, unreadable
}

// imageBlobs lists the manifests and blobs of img's manifest d that a copy
// moves (for a sparse image, only the instances of its platforms).
func imageBlobs(ctx context.Context, src Source, img imageset.Image, d digest.Digest, top bool) ([]ocispec.Descriptor, error) {
	data, mt, err := src.Manifest(ctx, img, d)
	if err != nil {
		return nil, err
	}
	if guessed := MediaTypeOf(data); guessed != "" {
		mt = guessed
	}
	out := []ocispec.Descriptor{{MediaType: mt, Digest: d, Size: int64(len(data))}}
	if !IsIndex(mt) {
		bs, err := blobsOf(data)
		if err != nil {
			return nil, fmt.Errorf("parsing manifest %s: %w", d, err)
		}
		return append(out, bs...), nil
	}
	kids, err := Children(data)
	if err != nil {
		return nil, fmt.Errorf("parsing index %s: %w", d, err)
	}
	if top {
		if kids, err = instances(img, d, kids); err != nil {
			return nil, err
		}
	}
	for _, k := range kids {
		more, err := imageBlobs(ctx, src, img, k.Digest, false)
		if err != nil {
			return nil, err
		}
		out = append(out, more...)
	}
	return out, nil
}
