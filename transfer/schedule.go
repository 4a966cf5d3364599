package transfer

import (
	"container/heap"
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/gapmirror/gapmirror/imageset"
)

// largeBlob is the size from which a blob's transfer is its bytes rather
// than its round trip: at 40 ms a request and 200 Mbit/s shared by a dozen
// transfers, 256 KiB take three round trips' time. Such blobs start
// largest first, so the long transfers do not end the run; below it blobs
// start in the order of their images, so that images finish one after the
// other. At 1 MiB, the 0.5 MiB layers carrying 204 of the mixed workload's
// 221 MiB went in image order with its 1,843 tiny blobs, which then ran
// last, 4 s at 40 ms each, with the link idle.
const largeBlob = 256 << 10

// blobLane is the bounded queue the blob transfers between one source
// registry and one destination wait in (see copier.lane): a bounded number
// run at once. A free slot goes to the largest large blob waiting, up to
// maxLarge of them at once while small blobs wait (first come first
// served), and beyond that when none does. So large blobs start first and small
// images do not wait behind them, and a run's wall time approaches the
// larger of bytes ÷ bandwidth and requests ÷ request rate. Manifests and
// existence checks do not queue here at all.
//
// Two kinds of entries wait: a goroutine blocked in acquire (urgent: an
// image worker moving a blob in its image's turn, or a transfer trying
// again, which other images already wait on; these go before the
// transfers scheduled up front), and a scheduled transfer (add), which
// costs no goroutine until its slot is free and then runs in a new one.
type blobLane struct {
	mu       sync.Mutex
	free     int
	large    int // large blobs transferring
	maxLarge int
	big      laneQueue // large blobs: largest first
	small    laneQueue // small blobs: first come first served
	seq      int64
}

// newBlobLane is a lane of slots transfers at once, at most maxLarge of
// them large blobs while small ones wait.
func newBlobLane(slots, maxLarge int) *blobLane {
	slots = max(slots, 1)
	return &blobLane{free: slots, maxLarge: min(max(maxLarge, 1), slots), big: laneQueue{bySize: true}}
}

// laneSlots are the slots of a lane for a copy of parallelBlobs
// (Options.ParallelBlobs): that many again beside them for small blobs,
// and at most three quarters of parallelBlobs (at least one less) large
// at once. A large blob's time is its bytes, and a few at once fill a
// link; a small one's is its round trip, which over a WAN (40 ms a
// request) bytes do not hide (with a quarter of 16 slots left to small
// blobs, mirror-to-disk's copy phase there took 14.3 s; with these, 12.0).
func laneSlots(parallelBlobs int) (slots, maxLarge int) {
	n := max(parallelBlobs, 1)
	return 2 * n, max(n-max(n/4, 1), 1)
}

type laneEntry struct {
	size   int64
	urgent bool
	seq    int64 // first come first served among equals
	ready  chan struct{}
	start  func() // a scheduled transfer; it releases its slot when done
	index  int
}

type laneQueue struct {
	bySize bool
	items  []*laneEntry
}

func (q *laneQueue) Len() int { return len(q.items) }
func (q *laneQueue) Less(i, j int) bool {
	a, b := q.items[i], q.items[j]
	if a.urgent != b.urgent {
		return a.urgent
	}
	if q.bySize && a.size != b.size {
		return a.size > b.size
	}
	return a.seq < b.seq
}
func (q *laneQueue) Swap(i, j int) {
	q.items[i], q.items[j] = q.items[j], q.items[i]
	q.items[i].index, q.items[j].index = i, j
}
func (q *laneQueue) Push(x any) {
	e := x.(*laneEntry)
	e.index = len(q.items)
	q.items = append(q.items, e)
}
func (q *laneQueue) Pop() any {
	old := q.items
	e := old[len(old)-1]
	old[len(old)-1] = nil
	q.items = old[:len(old)-1]
	e.index = -1
	return e
}

func (l *blobLane) queue(size int64) *laneQueue {
	if size >= largeBlob {
		return &l.big
	}
	return &l.small
}

// push queues e; l.mu is held.
func (l *blobLane) push(e *laneEntry) {
	l.seq++
	e.seq = l.seq
	heap.Push(l.queue(e.size), e)
}

// add schedules start, the transfer of a blob of size bytes, to run in a
// goroutine of its own once a slot is free; it must release the slot. The
// copy adds all its scheduled transfers and then calls dispatch, so the
// first slots, too, go by size.
func (l *blobLane) add(size int64, start func()) {
	l.mu.Lock()
	l.push(&laneEntry{size: size, start: start})
	l.mu.Unlock()
}

// dispatch hands free slots to the entries waiting.
func (l *blobLane) dispatch() {
	l.mu.Lock()
	l.grant()
	l.mu.Unlock()
}

// grant hands free slots out; l.mu is held.
func (l *blobLane) grant() {
	for l.free > 0 {
		var e *laneEntry
		switch {
		case l.big.Len() > 0 && (l.large < l.maxLarge || l.small.Len() == 0):
			e = heap.Pop(&l.big).(*laneEntry)
		case l.small.Len() > 0:
			e = heap.Pop(&l.small).(*laneEntry)
		default:
			return
		}
		l.free--
		if e.size >= largeBlob {
			l.large++
		}
		if e.start != nil {
			go e.start()
		} else {
			close(e.ready)
		}
	}
}

// acquire waits for a slot for a blob of size bytes; release frees it.
func (l *blobLane) acquire(ctx context.Context, size int64) error {
	e := &laneEntry{size: size, urgent: true, ready: make(chan struct{})}
	l.mu.Lock()
	l.push(e)
	l.grant()
	l.mu.Unlock()
	select {
	case <-e.ready:
		return nil
	case <-ctx.Done():
		l.mu.Lock()
		if e.index >= 0 {
			heap.Remove(l.queue(size), e.index)
			l.mu.Unlock()
			return ctx.Err()
		}
		l.mu.Unlock()
		l.release(size) // handed a slot as the context ended: pass it on
		return ctx.Err()
	}
}

// release frees the slot a blob of size bytes held.
func (l *blobLane) release(size int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.free++
	if size >= largeBlob {
		l.large--
	}
	l.grant()
}

// schedule is a planned copy's blob transfers, queued for all its images
// at once: each distinct blob of the plan once, for the first image that
// needs it (its owner), in the lane of that image's registries. An image
// is handed to the copy's image workers (ready) once every scheduled
// transfer it waits on has ended; its worker then pushes its manifests,
// mounting the blobs other images brought into its repository. So image
// workers never wait for bytes, and a small image is not held up by the
// large layers of the images ahead of it in the set.
//
// What it keeps per image is a counter and a failure; per blob, the images
// needing it. Goroutines run only for transfers holding a slot.
type schedule struct {
	images  []imageset.Image
	pending []atomic.Int32 // scheduled transfers each image waits on
	ready   chan int       // images (indices) whose transfers have ended
	left    atomic.Int64   // images not yet handed out
	blobs   map[digest.Digest]*scheduled

	mu     sync.Mutex
	failed map[int32]error // images whose own scheduled transfer failed
}

// scheduled is one blob transfer of the schedule.
type scheduled struct {
	desc ocispec.Descriptor
	lane *blobLane // of the first image's registries
	deps []int32   // the images waiting on it, in set order
	f    *flight
	// owner is the image it is transferred for: the first of deps that
	// has not failed when the transfer starts.
	owner atomic.Int32
	// claimed: the owner's worker has taken the transfer as its own
	// (counted once, by the transfer).
	claimed atomic.Bool
}

// errNotNeeded ends a scheduled transfer whose images all failed already.
var errNotNeeded = errors.New("not transferred: every image needing it failed")

// schedule hands out the images of set in the order the copy may start
// them. Without a plan, that is every image, in set order, each moving its
// blobs in its own turn (as a plain Copy does). With one (the blobs of each
// image by destination, as CopyPlanned read them), the transfers of those
// blobs are queued at once, and an image comes out when they have ended.
func (c *copier) schedule(ctx context.Context, set *imageset.Set, planned map[string][]ocispec.Descriptor) <-chan int {
	n := len(set.Images)
	s := &schedule{images: set.Images, ready: make(chan int, n)}
	s.left.Store(int64(n))
	if n == 0 {
		close(s.ready)
		return s.ready
	}
	var order []*scheduled
	if len(planned) > 0 {
		s.pending = make([]atomic.Int32, n)
		s.blobs = map[digest.Digest]*scheduled{}
		for i, img := range set.Images {
			descs := planned[img.Destination]
			if len(descs) == 0 {
				continue
			}
			var lane *blobLane
			for _, d := range descs {
				b := s.blobs[d.Digest]
				if b == nil {
					if lane == nil {
						lane = c.lane(img)
					}
					b = &scheduled{desc: d, lane: lane, f: &flight{done: make(chan struct{})}}
					b.owner.Store(int32(i))
					s.blobs[d.Digest] = b
					order = append(order, b)
				}
				if last := len(b.deps) - 1; last >= 0 && b.deps[last] == int32(i) {
					continue // the image names it twice (two instances of an index)
				}
				b.deps = append(b.deps, int32(i))
				s.pending[i].Add(1)
			}
		}
		c.mu.Lock()
		for _, b := range order {
			c.flights[b.desc.Digest] = b.f // images outside the schedule wait on it
		}
		c.mu.Unlock()
		c.sched = s
	}
	for i := range set.Images {
		if s.pending == nil || s.pending[i].Load() == 0 {
			s.hand(i)
		}
	}
	lanes := map[*blobLane]bool{}
	for _, b := range order {
		b.lane.add(b.desc.Size, func() { c.run(ctx, s, b) })
		lanes[b.lane] = true
	}
	for lane := range lanes {
		lane.dispatch()
	}
	return s.ready
}

// hand gives image i to the image workers.
func (s *schedule) hand(i int) {
	s.ready <- i
	if s.left.Add(-1) == 0 {
		close(s.ready)
	}
}

// failure is the error of image i's own scheduled transfer, if one failed.
func (s *schedule) failure(i int) error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed[int32(i)]
}

// run is the scheduled transfer b, holding a slot of its lane. It is made
// for the first image needing it that has not failed yet (the blob goes
// into that image's repository, and the others mount it from there), and
// not made when every such image failed or the registries it would use
// already failed for good.
func (c *copier) run(ctx context.Context, s *schedule, b *scheduled) {
	err := ctx.Err()
	if err == nil {
		s.mu.Lock()
		err = errNotNeeded
		for _, i := range b.deps {
			if s.failed[i] == nil {
				b.owner.Store(i)
				err = nil
				break
			}
		}
		s.mu.Unlock()
	}
	owner := s.images[b.owner.Load()]
	if err == nil {
		err = c.stopped(owner)
	}
	skipped := err != nil
	if skipped {
		b.lane.release(b.desc.Size)
	} else {
		err = c.transfer(ctx, owner, b.desc, b.lane)
	}
	f := b.f
	f.err, f.cancelled = err, skipped || ctx.Err() != nil
	if err != nil {
		c.mu.Lock()
		if c.flights[b.desc.Digest] == f {
			delete(c.flights, b.desc.Digest) // let another image try again
		}
		c.mu.Unlock()
		if !skipped {
			c.breaker.trip(err)
			s.mu.Lock()
			if s.failed == nil {
				s.failed = map[int32]error{}
			}
			if i := b.owner.Load(); s.failed[i] == nil {
				s.failed[i] = err
			}
			s.mu.Unlock()
		}
	}
	close(f.done)
	for _, i := range b.deps {
		if s.pending[i].Add(-1) == 0 {
			s.hand(int(i))
		}
	}
}

// claim takes the scheduled transfer of desc as img's own when img is its
// owner and has not taken it yet: ok, and the transfer's outcome. A
// transfer skipped (not tried) is not img's to report: img then moves the
// blob as any image would.
func (c *copier) claim(ctx context.Context, img imageset.Image, desc ocispec.Descriptor) (ok bool, err error) {
	s := c.sched
	if s == nil {
		return false, nil
	}
	b := s.blobs[desc.Digest]
	if b == nil {
		return false, nil
	}
	select {
	case <-b.f.done: // the owner is settled
	case <-ctx.Done():
		return true, ctx.Err()
	}
	if s.images[b.owner.Load()].Destination != img.Destination || !b.claimed.CompareAndSwap(false, true) {
		return false, nil
	}
	if b.f.err != nil && b.f.cancelled && ctx.Err() == nil {
		return false, nil
	}
	return true, b.f.err
}

// lane is the queue of blob transfers between img's source registry and
// its destination registry (one lane where either side is local).
func (c *copier) lane(img imageset.Image) *blobLane {
	from, to := c.hosts(img)
	key := from + " " + to
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.lanes[key]
	if l == nil {
		l = newBlobLane(laneSlots(c.opts.ParallelBlobs))
		c.lanes[key] = l
	}
	return l
}
