package sigstore

import (
	"context"
	"sync/atomic"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/transfer"
)

// target is an image of the Set looked at for what is attached to it: its
// upstream repository and manifest.
type target struct {
	img      imageset.Image
	repo     string
	manifest digest.Digest
}

// subjects are the images of set that things may be attached to upstream:
// not built here, not themselves attached.
func subjects(set *imageset.Set) []target {
	var images []target
	for _, img := range set.Images {
		if img.Built || img.Kind.Attached() {
			continue // built here: nobody upstream signed it
		}
		named, err := reference.ParseNormalizedNamed(img.Source)
		if err != nil {
			continue // cannot happen for a resolved image; the copy reports it
		}
		images = append(images, target{img: img, repo: named.Name(), manifest: digest.Digest(img.Digest)})
	}
	return images
}

// platformManifests are the platform manifests of the indexes among
// images (kidsOf, by position; none for a single manifest), and by image
// digest for the workspace's record, with the number of manifests read:
// from the workspace's record of earlier runs (a manifest by digest never
// changes), the store, the tag resolution's read, else upstream. One read
// per manifest: images sharing one (release components of several
// payloads, an image listed twice) take the first's answer. (By repository
// too: one whose repository does not hold the manifest must not take
// another's answer, nor give its failure to another.)
func (s Search) platformManifests(ctx context.Context, images []target, known map[digest.Digest][]digest.Digest) ([][]digest.Digest, map[digest.Digest][]digest.Digest, int) {
	first := map[signatureLookup]int{}
	var distinct []int
	for i, tg := range images {
		if _, ok := first[signatureLookup{tg.repo, tg.manifest}]; !ok {
			first[signatureLookup{tg.repo, tg.manifest}] = i
			distinct = append(distinct, i)
		}
	}
	kidsOf := make([][]digest.Digest, len(images))
	have := make([]bool, len(images))
	var reads atomic.Int64
	// Small reads, each a round trip over a WAN, before the copy: as many
	// at once as the two lookups that follow have together beside it (64
	// by default; at 32, the mixed workload's 525 top manifests took 0.8 s
	// under a 40 ms WAN).
	parallelDo(len(distinct), 4*s.Parallel, func(j int) {
		i := distinct[j]
		tg := images[i]
		if kids, ok := known[tg.manifest]; ok {
			kidsOf[i], have[i] = kids, true
			return
		}
		data, err := signatureManifest(ctx, s.Upstream, s.Store, tg.img, tg.manifest, &reads)
		if err != nil {
			// The copy meets the same error and reports it with the image.
			return
		}
		have[i] = true
		if transfer.IsIndex(transfer.MediaTypeOf(data)) {
			kids, err := transfer.Children(data)
			if err == nil {
				for _, k := range kids {
					kidsOf[i] = append(kidsOf[i], k.Digest)
				}
			}
		}
	})
	for i, tg := range images {
		if f := first[signatureLookup{tg.repo, tg.manifest}]; f != i {
			kidsOf[i], have[i] = kidsOf[f], have[f]
		}
	}
	platforms := map[digest.Digest][]digest.Digest{}
	for i, tg := range images {
		if have[i] {
			platforms[tg.manifest] = append([]digest.Digest{}, kidsOf[i]...)
		}
	}
	return kidsOf, platforms, int(reads.Load())
}

// sparse narrows kidsOf to the platform manifests a sparse image copies
// (its Platforms): what is attached to a platform manifest left out has
// nothing to attach to at the destination. The index is read again only
// for sparse images, mostly from the resolution's read; one that cannot
// be read keeps every platform (the copy reports it).
func (s Search) sparse(ctx context.Context, images []target, kidsOf [][]digest.Digest) [][]digest.Digest {
	out := make([][]digest.Digest, len(kidsOf))
	copy(out, kidsOf)
	var reads atomic.Int64
	for i, tg := range images {
		if len(tg.img.Platforms) == 0 || len(kidsOf[i]) == 0 {
			continue
		}
		data, err := signatureManifest(ctx, s.Upstream, s.Store, tg.img, tg.manifest, &reads)
		if err != nil {
			continue
		}
		kids, err := transfer.Children(data)
		if err != nil {
			continue
		}
		out[i] = nil
		for _, k := range kids {
			if tg.img.WantsPlatform(k.Platform) {
				out[i] = append(out[i], k.Digest)
			}
		}
	}
	return out
}
