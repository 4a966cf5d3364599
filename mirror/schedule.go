package mirror

import (
	"container/heap"
	"context"
	"sync"

	"github.com/gapmirror/gapmirror/imageset"
)

// largeBlob is the size from which a blob's transfer time is its bytes
// rather than its requests: such blobs start largest first, so the long
// transfers do not end the run. Below it, the order of the bytes changes
// nothing of a run's length, and blobs start in the order of their images,
// so that images finish (their manifests pushed) one after the other.
const largeBlob = 1 << 20

// blobLane is the bounded queue the blob transfers between one source
// registry and one destination wait in (see copier.lane): a bounded number
// run at once. A free slot goes to the largest large blob waiting, up to
// maxLarge of them at once; the slots left are kept for small blobs, which
// start first come first served. So large blobs start first and small
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

func newBlobLane(n int) *blobLane {
	n = max(n, 1)
	return &blobLane{free: n, maxLarge: max(n-max(n/4, 1), 1), big: laneQueue{bySize: true}}
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
		case l.big.Len() > 0 && l.large < l.maxLarge:
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

// lane is the queue of blob transfers between img's source registry and
// its destination registry (one lane where either side is local).
func (c *copier) lane(img imageset.Image) *blobLane {
	from, to := c.hosts(img)
	key := from + " " + to
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.lanes[key]
	if l == nil {
		l = newBlobLane(c.opts.ParallelBlobs)
		c.lanes[key] = l
	}
	return l
}
