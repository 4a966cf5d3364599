package mirror

import (
	"container/heap"
	"context"
	"sync"
)

// blobSlots is the one queue every blob transfer of a copy waits in: a
// bounded number run at once, and a free slot goes to the largest blob
// waiting, so the long transfers start early and the run's wall time
// approaches the larger of bytes ÷ bandwidth and requests ÷ request rate.
// Manifests and existence checks do not queue here: an image whose blobs
// are in place pushes its manifest without waiting behind other images'
// layers.
type blobSlots struct {
	mu      sync.Mutex
	free    int
	waiting waiters
	seq     int64
}

func newBlobSlots(n int) *blobSlots { return &blobSlots{free: n} }

type waiter struct {
	size  int64
	seq   int64 // first come first served among equal sizes
	ready chan struct{}
	index int
}

type waiters []*waiter

func (w waiters) Len() int { return len(w) }
func (w waiters) Less(i, j int) bool {
	if w[i].size != w[j].size {
		return w[i].size > w[j].size
	}
	return w[i].seq < w[j].seq
}
func (w waiters) Swap(i, j int) { w[i], w[j] = w[j], w[i]; w[i].index = i; w[j].index = j }
func (w *waiters) Push(x any)   { x.(*waiter).index = len(*w); *w = append(*w, x.(*waiter)) }
func (w *waiters) Pop() any {
	old := *w
	x := old[len(old)-1]
	*w = old[:len(old)-1]
	x.index = -1
	return x
}

// acquire waits for a slot for a blob of size bytes.
func (s *blobSlots) acquire(ctx context.Context, size int64) error {
	s.mu.Lock()
	if s.free > 0 && len(s.waiting) == 0 {
		s.free--
		s.mu.Unlock()
		return nil
	}
	s.seq++
	w := &waiter{size: size, seq: s.seq, ready: make(chan struct{})}
	heap.Push(&s.waiting, w)
	s.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		if w.index >= 0 {
			heap.Remove(&s.waiting, w.index)
			s.mu.Unlock()
			return ctx.Err()
		}
		s.mu.Unlock()
		s.release() // handed a slot as the context ended: pass it on
		return ctx.Err()
	}
}

// release frees a slot, to the largest blob waiting if any.
func (s *blobSlots) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.waiting) > 0 {
		w := heap.Pop(&s.waiting).(*waiter)
		close(w.ready)
		return
	}
	s.free++
}
