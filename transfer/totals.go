package transfer

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/singleflight"

	"github.com/gapmirror/gapmirror/imageset"
)

// CopyPlanned copies set from src to dst after a planning pass that asks
// the destination which images it lacks and reads their manifests, so that
// progress shows the true blob and byte totals from its first frame. The
// copy is handed the answers the pass got, so no request is made twice.
func CopyPlanned(ctx context.Context, set *imageset.Set, src Source, dst Destination, opts Options) *Result {
	o := opts.WithDefaults()
	// The planning pass makes the existence checks, so the destination
	// learns here which repositories the run fills (Copy's own call cannot
	// reach it through plannedDestination): a repository several images go
	// to then costs one tag listing, not a manifest HEAD per image.
	if e, ok := dst.(expecter); ok {
		e.Expect(set)
	}
	ps, pd := newPlannedSource(src), &plannedDestination{Destination: dst, has: map[string]bool{}}
	o.Progress.Phase("planning", len(set.Images)-set.Signatures(), Totals{})
	of := map[string][]ocispec.Descriptor{}
	var mu sync.Mutex
	for _, phase := range AttachedLast(set.Images) {
		g, gctx := errgroup.WithContext(ctx)
		// Manifest reads and existence checks, as many at a time as the
		// blob transfers that follow: each waits a round trip.
		slots, _ := laneSlots(o.ParallelBlobs)
		g.SetLimit(slots)
		for _, img := range phase {
			g.Go(func() error {
				blobs, ok := planImage(gctx, img, src, dst, o.Force, ps, pd)
				if ok {
					mu.Lock()
					of[img.Destination] = blobs
					mu.Unlock()
				}
				o.Progress.ImageDone(img, false, nil)
				return nil // the copy meets and reports any failure
			})
		}
		g.Wait()
	}
	opts.Totals = TotalsOf(of)
	return copySet(ctx, set, ps, pd, opts, of)
}

// planImage asks dst whether it has img and, when not, reads img's
// manifests from src; ok is false when it could not tell (the copy will).
func planImage(ctx context.Context, img imageset.Image, src Source, dst Destination, force bool, ps *plannedSource, pd *plannedDestination) (blobs []ocispec.Descriptor, ok bool) {
	d := digest.Digest(img.Digest)
	if d.Validate() != nil {
		return nil, false
	}
	if !force {
		has, err := dst.HasManifest(ctx, img, d)
		if err != nil {
			return nil, false
		}
		pd.remember(img, has)
		if has {
			return nil, true // nothing to move; found blobs are counted as met
		}
	}
	read := PlanReader(src, img)
	var walk func(d digest.Digest, top bool) ([]ocispec.Descriptor, error)
	walk = func(d digest.Digest, top bool) ([]ocispec.Descriptor, error) {
		m, err := ps.read(ctx, img, d, read)
		if err != nil {
			return nil, err
		}
		data, mt := m.data, m.mt
		ps.remember(img, d, data, mt)
		if guessed := MediaTypeOf(data); guessed != "" {
			mt = guessed
		}
		if !IsIndex(mt) {
			return blobsOf(data)
		}
		kids, err := Children(data)
		if err == nil && top {
			kids, err = instances(img, d, kids)
		}
		if err != nil {
			return nil, err
		}
		// The platforms side by side: one round trip for all of them, not
		// one each. No context to cancel: a failure leaves the others to
		// finish, as their reads are shared with other images.
		parts := make([][]ocispec.Descriptor, len(kids))
		var g errgroup.Group
		g.SetLimit(maxPlatformReads)
		for i, k := range kids {
			g.Go(func() (err error) {
				parts[i], err = walk(k.Digest, false)
				return err
			})
		}
		if err := g.Wait(); err != nil {
			return nil, err
		}
		return slices.Concat(parts...), nil
	}
	blobs, err := walk(d, true)
	return blobs, err == nil
}

// maxPlatformReads bounds the platform manifests of one index the planning
// pass reads at once (beside the images it plans at once).
const maxPlatformReads = 8

// PlanReader is how the planning pass reads img's manifests: from local
// sources directly; from a registry through the run's one client for its
// host (or its registries.conf pull sources), taking the manifest the
// resolution read where it has it: from there the pass keeps it
// (plannedSource), for every image naming it.
func PlanReader(src Source, img imageset.Image) func(context.Context, digest.Digest) ([]byte, string, error) {
	direct := func(ctx context.Context, d digest.Digest) ([]byte, string, error) { return src.Manifest(ctx, img, d) }
	var r *Registry
	switch s := src.(type) {
	case *Registry:
		r = s
	case builtSource:
		if reg, ok := s.Source.(*Registry); ok && !s.local(img) {
			r = reg
		}
	}
	if r == nil {
		return direct
	}
	return func(ctx context.Context, d digest.Digest) ([]byte, string, error) {
		if data, ok := r.KeptManifest(img, d, true); ok {
			return data, MediaTypeOf(data), nil
		}
		return r.readManifest(ctx, img, d)
	}
}

type manifestRead struct {
	data []byte
	mt   string
}

// plannedSource serves the manifests the planning pass read, by digest
// (an image's top manifest by its source repository too, see key). A
// manifest is kept until every image the pass read it for has taken it:
// the release components several payloads share are read upstream once,
// and memory holds each manifest once.
type plannedSource struct {
	Source
	mu        sync.Mutex
	manifests map[manifestKey]*plannedManifest
	reading   singleflight.Group // images planned at once that share a manifest wait for one read
}

type plannedManifest struct {
	manifestRead
	takers int // reads the copy is still expected to make
}

// key is where manifest d of img is kept. Platform manifests are shared by
// digest across repositories (a registry holds an index's platform
// manifests in the index's repository), top manifests are not: an image
// named by a digest its repository does not hold must fail with its
// registry's answer, not be served the manifest another repository gave.
func (p *plannedSource) key(img imageset.Image, d digest.Digest) manifestKey {
	if d == digest.Digest(img.Digest) {
		return manifestKey{repoOf(img.Source), d}
	}
	return manifestKey{d: d}
}

func newPlannedSource(src Source) *plannedSource {
	return &plannedSource{Source: src, manifests: map[manifestKey]*plannedManifest{}}
}

// read returns manifest d, checked against d: the one the pass already
// read for another image, else read's answer, which images planned at the
// same time share. The caller then remembers it for its own image.
func (p *plannedSource) read(ctx context.Context, img imageset.Image, d digest.Digest, read func(context.Context, digest.Digest) ([]byte, string, error)) (manifestRead, error) {
	k := p.key(img, d)
	p.mu.Lock()
	m, ok := p.manifests[k]
	p.mu.Unlock()
	if ok {
		return m.manifestRead, nil
	}
	v, err, _ := p.reading.Do(k.repo+"@"+string(d), func() (any, error) {
		data, mt, err := read(ctx, d)
		if err != nil {
			return nil, err
		}
		if digest.FromBytes(data) != d {
			return nil, fmt.Errorf("manifest %s: the registry sent other bytes", d)
		}
		return manifestRead{data, mt}, nil
	})
	if err != nil {
		return manifestRead{}, err
	}
	return v.(manifestRead), nil
}

// remember keeps data, manifest d, for one read by the copy. The caller
// has checked that data hashes to d: it is served to every image naming d.
func (p *plannedSource) remember(img imageset.Image, d digest.Digest, data []byte, mt string) {
	k := p.key(img, d)
	p.mu.Lock()
	defer p.mu.Unlock()
	if m, ok := p.manifests[k]; ok {
		m.takers++
		return
	}
	p.manifests[k] = &plannedManifest{manifestRead: manifestRead{data, mt}, takers: 1}
}

func (p *plannedSource) Manifest(ctx context.Context, img imageset.Image, d digest.Digest) ([]byte, string, error) {
	k := p.key(img, d)
	p.mu.Lock()
	m, ok := p.manifests[k]
	if ok {
		if m.takers--; m.takers <= 0 {
			delete(p.manifests, k)
		}
	}
	p.mu.Unlock()
	if ok {
		return m.data, m.mt, nil
	}
	return p.Source.Manifest(ctx, img, d)
}

func (p *plannedSource) Blob(ctx context.Context, img imageset.Image, desc ocispec.Descriptor) (io.ReadCloser, error) {
	return p.Source.Blob(ctx, img, desc)
}

func (p *plannedSource) unwrap() Source { return p.Source }

// plannedDestination answers the copy's first HasManifest of an image from
// the planning pass. It does not offer Expect (CopyPlanned called it before
// planning; a second call would count each image twice) but does pass on
// HeadBlob, which the copy asks for blobs an incremental archive left out.
type plannedDestination struct {
	Destination
	mu  sync.Mutex
	has map[string]bool
}

func (p *plannedDestination) remember(img imageset.Image, has bool) {
	p.mu.Lock()
	p.has[img.Destination+"@"+img.Digest] = has
	p.mu.Unlock()
}

func (p *plannedDestination) HasManifest(ctx context.Context, img imageset.Image, d digest.Digest) (bool, error) {
	k := img.Destination + "@" + d.String()
	p.mu.Lock()
	has, ok := p.has[k]
	delete(p.has, k)
	p.mu.Unlock()
	if ok {
		return has, nil
	}
	return p.Destination.HasManifest(ctx, img, d)
}

func (p *plannedDestination) unwrap() Destination { return p.Destination }

func (p *plannedDestination) HeadBlob(ctx context.Context, img imageset.Image, desc ocispec.Descriptor) (bool, error) {
	if h, ok := p.Destination.(blobHeader); ok {
		return h.HeadBlob(ctx, img, desc)
	}
	return false, nil
}
