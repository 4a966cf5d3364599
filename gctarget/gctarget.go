// Package gctarget sets the garbage collector's target (GOGC) from the live
// heap after each collection: a low target while the live heap is small, Go's
// default once it is large.
//
// Most of a run's heap is buffers and manifests that live for one transfer, so
// a low target lowers every peak of a run that holds little (the mixed
// workload: 6 to 11 MiB at 50 against 100). But each collection marks the
// whole live heap: at 10,000 images, where the workspace records and the plan
// stay live, a fixed 50 made no-change reruns 1.6 to 1.9 times as long.
// Following the live heap, as Uber's GOGC tuner does, keeps both: the bounds
// sit above an ordinary run's live heap (about 13 MiB at the mixed workload's peak)
// and below that of 10,000 images (about 95 MiB).
package gctarget

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// Policy is the target for a live heap: Low while the live heap is under
// Small bytes, High once it is over Large, unchanged in between (so a heap
// that hovers about one bound does not flip the target every collection).
type Policy struct {
	Low, High    int
	Small, Large uint64
}

// Default is the binary's policy.
var Default = Policy{Low: 50, High: 100, Small: 24 << 20, Large: 40 << 20}

// Next returns the target after a collection that left live bytes, given
// the current target.
func (p Policy) Next(current int, live uint64) int {
	switch {
	case live < p.Small:
		return p.Low
	case live > p.Large:
		return p.High
	}
	return current
}

// Start applies p after every collection until the returned stop is
// called. It does nothing when GOGC is set in the environment: a user's
// setting wins.
func Start(p Policy) (stop func()) {
	if _, set := os.LookupEnv("GOGC"); set {
		return func() {}
	}
	t := &tuner{policy: p, samples: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	t.current.Store(int32(p.Low))
	debug.SetGCPercent(p.Low)
	t.arm()
	return func() { t.stopped.Store(true) }
}

// tuner has one cleanup pending at a time, so its steps never overlap; they
// may run on different goroutines, hence the atomics.
type tuner struct {
	policy  Policy
	samples []metrics.Sample
	current atomic.Int32
	stopped atomic.Bool
}

// sentinel is allocated for its cleanup to run after the next collection;
// its pointer keeps it out of the tiny allocator, whose blocks are freed
// late.
type sentinel struct {
	_ *int
	_ [2]uint64
}

// arm registers the tuner's step on a fresh sentinel: the cleanup runs after
// the collection that finds it unreachable, which is the next one.
func (t *tuner) arm() {
	runtime.AddCleanup(new(sentinel), (*tuner).step, t)
}

func (t *tuner) step() {
	if t.stopped.Load() {
		return
	}
	metrics.Read(t.samples)
	if t.samples[0].Value.Kind() == metrics.KindUint64 {
		current := int(t.current.Load())
		if next := t.policy.Next(current, t.samples[0].Value.Uint64()); next != current {
			debug.SetGCPercent(next)
			t.current.Store(int32(next))
		}
	}
	t.arm()
}
