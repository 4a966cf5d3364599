package transfer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/image/v5/manifest"
	"golang.org/x/sync/errgroup"

	"github.com/gapmirror/gapmirror/failure"
	"github.com/gapmirror/gapmirror/imageset"
)

// Options tune a copy.
type Options struct {
	// ParallelImages is how many images are copied at once (default 8):
	// checked at the destination, their manifests read and pushed. In a
	// planned copy (CopyPlanned) the transfers of their blobs do not wait
	// for an image's turn: they are all queued up front (see schedule).
	ParallelImages int
	// ParallelLayers is how many blobs of one image are copied at once
	// (default 6) where an image moves its blobs in its own turn.
	ParallelLayers int
	// ParallelBlobs is how many blobs are transferred at once between one
	// source registry and the destination (default 2 × ParallelImages, at
	// most ParallelImages × ParallelLayers), at most three quarters of
	// them large (1 MiB or more, largest first); small blobs have as many
	// slots again beside them (see laneSlots).
	ParallelBlobs int
	// Retries is how often a failed manifest or blob transfer is retried
	// with exponential backoff (default 5; negative: none).
	Retries int
	// RetryDelay is the first backoff delay (default 500ms).
	RetryDelay time.Duration
	// Progress receives progress events; nil: none.
	Progress Progress
	// Force copies images even when the destination already has them.
	Force bool
	// Totals are the blobs and bytes of the set, when known before the
	// copy, so that progress shows the true total from the start.
	Totals Totals
}

// WithDefaults fills in the parallelism, retries and progress left unset.
func (o Options) WithDefaults() Options {
	if o.ParallelImages <= 0 {
		o.ParallelImages = 8
	}
	if o.ParallelLayers <= 0 {
		o.ParallelLayers = 6
	}
	if o.ParallelBlobs <= 0 {
		o.ParallelBlobs = min(2*o.ParallelImages, o.ParallelImages*o.ParallelLayers)
	}
	if o.Retries == 0 {
		o.Retries = 5
	} else if o.Retries < 0 {
		o.Retries = 0
	}
	if o.RetryDelay <= 0 {
		o.RetryDelay = 500 * time.Millisecond
	}
	if o.Progress == nil {
		o.Progress = nopProgress{}
	}
	return o
}

// Failure is an image that could not be copied, and why.
type Failure struct {
	Image imageset.Image
	Err   error
}

// Result tells what a copy did.
type Result struct {
	Copied  []imageset.Image // images written to the destination
	Skipped []imageset.Image // images the destination already had
	Failed  []Failure
	// Blobs and Bytes count the blobs transferred (not reused or mounted).
	Blobs int64
	Bytes int64
	// Reused counts blobs the destination already had or mounted.
	Reused int64
	// Tally sorts the blobs of the set: distinct blobs moved or already
	// there, and further references reused (see BlobTally).
	Tally BlobTally
	// Retries counts transfers tried again after a transient error.
	Retries  int64
	Duration time.Duration
	// Locations maps each blob this copy transferred or found to a
	// destination repository that holds it; later runs mount from there.
	Locations map[digest.Digest]string
}

// Add adds the figures of another copy of the same trip to r (what was
// attached to the images, copied after them).
func (r *Result) Add(more *Result) {
	r.Copied = append(r.Copied, more.Copied...)
	r.Skipped = append(r.Skipped, more.Skipped...)
	r.Failed = append(r.Failed, more.Failed...)
	r.Blobs, r.Bytes, r.Reused = r.Blobs+more.Blobs, r.Bytes+more.Bytes, r.Reused+more.Reused
	r.Retries, r.Duration = r.Retries+more.Retries, r.Duration+more.Duration
	r.Tally.Add(more.Tally)
	if len(more.Locations) > 0 && r.Locations == nil {
		r.Locations = map[digest.Digest]string{}
	}
	for d, repo := range more.Locations {
		r.Locations[d] = repo
	}
}

// Err summarises the failures, or is nil.
func (r *Result) Err() error {
	if len(r.Failed) == 0 {
		return nil
	}
	errs := make([]error, 0, len(r.Failed))
	for _, f := range r.Failed {
		errs = append(errs, f.Err)
	}
	return fmt.Errorf("%d of %d images failed: %w", len(r.Failed), len(r.Failed)+len(r.Copied)+len(r.Skipped), errors.Join(errs...))
}

// Copy copies every image of set from src to dst by digest. One image
// failing does not stop the others. Each blob is transferred at most once
// per call: images sharing a blob wait for the first transfer and then
// reuse (mount) it. Every manifest and blob is verified against its digest
// before the destination is asked to keep it.
func Copy(ctx context.Context, set *imageset.Set, src Source, dst Destination, opts Options) *Result {
	return copySet(ctx, set, src, dst, opts, nil)
}

// copySet is Copy; planned, when not nil, holds the blobs of each image
// (by destination) a planning pass found to copy, whose transfers are then
// scheduled all at once (see schedule).
func copySet(ctx context.Context, set *imageset.Set, src Source, dst Destination, opts Options, planned map[string][]ocispec.Descriptor) *Result {
	opts = opts.WithDefaults()
	c := &copier{src: src, dst: dst, opts: opts, flights: map[digest.Digest]*flight{}, reuses: map[string]*flight{}, locations: map[digest.Digest]string{}, lanes: map[string]*blobLane{}, tally: NewTally(opts.Totals)}
	start := time.Now()
	res := &Result{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	opts.Progress.Phase("copying", len(set.Images)-set.Signatures(), opts.Totals)
	if e, ok := dst.(expecter); ok {
		e.Expect(set)
	}
	ready := c.schedule(ctx, set, planned)
	work := func(img imageset.Image, err error) {
		var skipped bool
		if err == nil {
			skipped, err = c.image(ctx, img)
		}
		c.trip(img, err)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			res.Failed = append(res.Failed, Failure{Image: img, Err: fmt.Errorf("%s (%s): %w", img.Origin, img.Destination, err)})
		case skipped:
			res.Skipped = append(res.Skipped, img)
		default:
			res.Copied = append(res.Copied, img)
		}
		c.settled(img, skipped, err)
	}
	for range min(opts.ParallelImages, len(set.Images)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range ready {
				work(set.Images[i], c.sched.failure(i))
			}
		}()
	}
	wg.Wait()
	res.Blobs, res.Bytes, res.Reused, res.Retries = c.blobs.Load(), c.bytes.Load(), c.reused.Load(), c.retries.Load()
	res.Tally = c.tally.Counts()
	res.Locations = c.locations
	res.Duration = time.Since(start)
	opts.Progress.Finish()
	return res
}

type copier struct {
	src  Source
	dst  Destination
	opts Options

	// sched is a planned copy's blob transfers (nil: none scheduled); set
	// before the image workers start.
	sched *schedule

	mu        sync.Mutex
	lanes     map[string]*blobLane // blob transfers queue here, by source and destination registry
	hostsOf   sync.Map             // hosts' answers, by image source and destination
	flights   map[digest.Digest]*flight
	reuses    map[string]*flight // by destination repository@digest
	locations map[digest.Digest]string

	blobs, bytes, reused, retries atomic.Int64
	breaker                       breaker
	tally                         *Tally
}

// flight is one transfer of a blob; images needing the same blob wait on it.
type flight struct {
	done chan struct{}
	err  error
	// cancelled: the transfer stopped because its image's context ended
	// (the error is then that context's cause, not context.Canceled).
	cancelled bool
}

func (c *copier) image(ctx context.Context, img imageset.Image) (skipped bool, err error) {
	d := digest.Digest(img.Digest)
	if err := d.Validate(); err != nil {
		return false, fmt.Errorf("image has no valid digest %q", img.Digest)
	}
	if err := c.stopped(img); err != nil {
		return false, err
	}
	if !c.opts.Force {
		var has bool
		err := c.retry(ctx, func() (err error) { has, err = c.dst.HasManifest(ctx, img, d); return err })
		if err != nil {
			return false, fmt.Errorf("checking the destination: %w", err)
		}
		if has {
			return true, nil
		}
	}
	return false, c.manifest(ctx, img, d, true)
}

// manifest copies the manifest d of img with everything it references.
func (c *copier) manifest(ctx context.Context, img imageset.Image, d digest.Digest, top bool) error {
	var sparse bool // top is an index of which only some instances were copied
	var data []byte
	var mt string
	err := c.retry(ctx, func() (err error) {
		data, mt, err = c.src.Manifest(ctx, img, d)
		if err == nil && digest.FromBytes(data) != d {
			err = &failure.DigestError{Digest: d, Msg: fmt.Sprintf("manifest content has digest %s", digest.FromBytes(data))}
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("reading manifest %s: %w", d, err)
	}
	if guessed := MediaTypeOf(data); guessed != "" {
		mt = guessed
	}
	switch {
	case IsIndex(mt):
		kids, err := Children(data)
		if err != nil {
			return fmt.Errorf("parsing index %s: %w", d, err)
		}
		if top {
			all := len(kids)
			if kids, err = instances(img, d, kids); err != nil {
				return err
			}
			sparse = len(kids) < all
		}
		for _, k := range kids {
			if err := c.manifest(ctx, img, k.Digest, false); err != nil {
				return err
			}
		}
	case mt == manifest.DockerV2Schema1MediaType || mt == manifest.DockerV2Schema1SignedMediaType:
		return fmt.Errorf("manifest %s is Docker schema 1, which registries no longer accept: rebuild or re-push the image with a current tool", d)
	default:
		blobs, err := blobsOf(data)
		if err != nil {
			return fmt.Errorf("parsing manifest %s: %w", d, err)
		}
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(c.opts.ParallelLayers)
		for _, b := range blobs {
			g.Go(func() error { return c.blob(gctx, img, b) })
		}
		if err := g.Wait(); err != nil {
			return err
		}
	}
	desc := ocispec.Descriptor{MediaType: mt, Digest: d, Size: int64(len(data))}
	if err := c.retry(ctx, func() error { return c.dst.PutManifest(ctx, img, desc, data, top) }); err != nil {
		if sparse && refusedSparse(err) {
			return &sparseRefusedError{Platforms: img.Platforms, Err: err}
		}
		return fmt.Errorf("writing manifest %s: %w", d, err)
	}
	return nil
}

// instances are the instances of img's index d to copy: all of them, or
// those of img.Platforms (a sparse copy). None matching is an error, since
// an index without any of its images is of no use to a cluster.
func instances(img imageset.Image, d digest.Digest, kids []ocispec.Descriptor) ([]ocispec.Descriptor, error) {
	if len(img.Platforms) == 0 {
		return kids, nil
	}
	var out []ocispec.Descriptor
	var have []string
	for _, k := range kids {
		if img.WantsPlatform(k.Platform) {
			out = append(out, k)
		}
		if k.Platform != nil && k.Platform.OS != "unknown" {
			have = append(have, k.Platform.OS+"/"+k.Platform.Architecture)
		}
	}
	if len(out) == 0 {
		slices.Sort(have)
		return nil, fmt.Errorf("index %s has none of the platforms %s (it has %s): list one of its platforms in the platforms field, or remove the field", d, strings.Join(img.Platforms, ", "), strings.Join(slices.Compact(have), ", "))
	}
	return out, nil
}

// sparseRefusedError says that the destination registry would not store an
// index whose unselected instances are missing.
type sparseRefusedError struct {
	Platforms []string
	Err       error
}

func (e *sparseRefusedError) Error() string {
	return fmt.Sprintf("the destination refused the sparse manifest list (only %s copied; the index keeps its digest and lists every platform): "+
		"configure the registry to accept image indexes whose platform manifests are missing "+
		"(distribution/registry: validation.manifests.indexes.platforms: none, or REGISTRY_VALIDATION_MANIFESTS_INDEXES_PLATFORMS=none; "+
		"other registries: their sparse index or sparse manifest list setting), or remove the platforms field to copy every platform: %v",
		strings.Join(e.Platforms, ", "), e.Err)
}

func (e *sparseRefusedError) Unwrap() error { return e.Err }

// refusedSparse reports a registry's answer to an index whose instances are
// not all in the repository (distribution: 400 MANIFEST_BLOB_UNKNOWN).
func refusedSparse(err error) bool {
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "manifest_blob_unknown") || strings.Contains(msg, "manifest blob unknown") || strings.Contains(msg, "blob unknown to registry")
}

// blob makes desc available to img at the destination, transferring it
// only if no other image of this copy is doing or has done so.
func (c *copier) blob(ctx context.Context, img imageset.Image, desc ocispec.Descriptor) error {
	if ok, err := c.claim(ctx, img, desc); ok {
		return err // the schedule transferred it for img (and counted it)
	}
	for {
		c.mu.Lock()
		f := c.flights[desc.Digest]
		if f == nil {
			f = &flight{done: make(chan struct{})}
			c.flights[desc.Digest] = f
			c.mu.Unlock()
			f.err = c.transfer(ctx, img, desc, nil)
			f.cancelled = ctx.Err() != nil
			if f.err != nil {
				c.mu.Lock()
				delete(c.flights, desc.Digest) // let a later image try again
				c.mu.Unlock()
			}
			close(f.done)
			return f.err
		}
		c.mu.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if f.err != nil {
			// The transfer was cancelled for its own image (another of
			// that image's blobs failed), not for this one: try again,
			// now as the one transferring.
			if ctx.Err() == nil && f.cancelled {
				continue
			}
			return f.err
		}
		// Transferred for another image: reuse it (same repository in a
		// store, a cross-repository mount in a registry), once per
		// repository: images of one repository wait for the first mount.
		return c.reuse(ctx, img, desc)
	}
}

func (c *copier) reuse(ctx context.Context, img imageset.Image, desc ocispec.Descriptor) error {
	key := img.DestinationRepo() + "@" + desc.Digest.String()
	c.mu.Lock()
	f := c.reuses[key]
	if f == nil {
		f = &flight{done: make(chan struct{})}
		c.reuses[key] = f
		c.mu.Unlock()
		f.err = c.transfer(ctx, img, desc, nil)
		if f.err != nil {
			c.mu.Lock()
			delete(c.reuses, key)
			c.mu.Unlock()
		}
		close(f.done)
		return f.err
	}
	c.mu.Unlock()
	select {
	case <-f.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if f.err == nil {
		c.reused.Add(1)
		return nil
	}
	return c.transfer(ctx, img, desc, nil) // the first failed: try on our own
}

// transfer makes desc available to img at the destination: found or
// mounted there, else read from the source and written, holding a slot of
// img's lane while the bytes move. held is the lane whose slot the caller
// holds (a scheduled transfer; nil: none), which serves the first attempt
// and is released here.
func (c *copier) transfer(ctx context.Context, img imageset.Image, desc ocispec.Descriptor, held *blobLane) error {
	return c.retry(ctx, func() error {
		slot := held
		held = nil
		defer func() {
			if slot != nil {
				slot.release(desc.Size)
			}
		}()
		has, err := c.dst.HasBlob(ctx, img, desc)
		if err != nil {
			return fmt.Errorf("checking blob %s at the destination: %w", desc.Digest, err)
		}
		if has {
			c.reused.Add(1)
			c.located(desc.Digest, img)
			c.counted(img, desc, BlobFound)
			return nil
		}
		if slot == nil {
			lane := c.lane(img)
			if err := lane.acquire(ctx, desc.Size); err != nil {
				return err
			}
			slot = lane
		}
		c.opts.Progress.Sending(desc)
		rc, err := c.src.Blob(ctx, img, desc)
		var missing *MissingBlobError
		if errors.As(err, &missing) {
			// An incremental archive leaves out what an earlier one carried;
			// HasBlob may not have asked the mirror about a small blob.
			if h, ok := c.dst.(blobHeader); ok {
				if has, herr := h.HeadBlob(ctx, img, desc); herr == nil && has {
					c.opts.Progress.Sent(desc, false)
					c.reused.Add(1)
					c.located(desc.Digest, img)
					c.counted(img, desc, BlobFound)
					return nil
				}
			}
		}
		if err != nil {
			c.opts.Progress.Sent(desc, false)
			return fmt.Errorf("reading blob %s: %w", desc.Digest, err)
		}
		defer rc.Close()
		vr := &verifyingReader{r: rc, desc: desc, v: desc.Digest.Verifier(), progress: c.opts.Progress}
		if err := c.dst.PutBlob(ctx, img, desc, vr); err != nil {
			c.opts.Progress.Add(-vr.n)
			c.opts.Progress.Sent(desc, false)
			if vr.err != nil {
				return vr.err
			}
			return fmt.Errorf("writing blob %s: %w", desc.Digest, err)
		}
		if vr.n != desc.Size || !vr.v.Verified() {
			c.opts.Progress.Sent(desc, false)
			return &failure.DigestError{Digest: desc.Digest, Msg: "the destination accepted a blob that was not read whole"}
		}
		c.opts.Progress.Sent(desc, true)
		c.blobs.Add(1)
		c.bytes.Add(vr.n)
		c.located(desc.Digest, img)
		c.counted(img, desc, BlobMoved)
		return nil
	})
}

// expecter is a destination that wants to know the images a copy is about
// to push before it is asked whether it has them (see Registry.Expect).
type expecter interface {
	Expect(set *imageset.Set)
}

// blobHeader is a destination whose HasBlob may answer "no" without asking
// (see Registry.HasBlob); HeadBlob asks.
type blobHeader interface {
	HeadBlob(ctx context.Context, img imageset.Image, desc ocispec.Descriptor) (bool, error)
}

func (c *copier) located(d digest.Digest, img imageset.Image) {
	c.mu.Lock()
	if _, ok := c.locations[d]; !ok {
		c.locations[d] = img.DestinationRepo()
	}
	c.mu.Unlock()
}

// verifyingReader yields desc's content and fails, instead of reporting EOF,
// when the content does not match desc's digest and size; so a destination
// never commits a corrupt blob.
type verifyingReader struct {
	r        io.Reader
	desc     ocispec.Descriptor
	v        digest.Verifier
	n        int64
	err      error
	progress Progress
}

func (r *verifyingReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	n, err := r.r.Read(p)
	if n > 0 {
		r.v.Write(p[:n])
		r.n += int64(n)
		r.progress.Add(int64(n))
		if r.n > r.desc.Size {
			r.err = &failure.DigestError{Digest: r.desc.Digest, Msg: fmt.Sprintf("source sent more than the %d bytes the manifest declares", r.desc.Size)}
			return 0, r.err
		}
	}
	if err == io.EOF {
		if r.n != r.desc.Size {
			r.err = &failure.DigestError{Digest: r.desc.Digest, Msg: fmt.Sprintf("source sent %d bytes, the manifest declares %d", r.n, r.desc.Size)}
			return n, r.err
		}
		if !r.v.Verified() {
			r.err = &failure.DigestError{Digest: r.desc.Digest, Msg: "content does not match the digest"}
			return n, r.err
		}
	}
	return n, err
}
