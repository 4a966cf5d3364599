package mirror

import (
	"context"
	"testing"
	"time"
)

// TestBlobLaneOrder: a free slot goes to the largest large blob waiting,
// but never to more large blobs at once than maxLarge: the other slots stay
// for small blobs, which go first come first served. A goroutine blocked in
// acquire goes before the transfers scheduled up front, and one whose
// context ends leaves the queue.
func TestBlobLaneOrder(t *testing.T) {
	const MiB = 1 << 20
	l := newBlobLane(4)
	if l.maxLarge != 3 {
		t.Fatalf("a lane of 4 slots lets %d large blobs run at once, want 3", l.maxLarge)
	}
	started := make(chan string, 16)
	sizes := map[string]int64{}
	add := func(name string, size int64) {
		sizes[name] = size
		l.add(size, func() { started <- name })
	}
	next := func() string {
		t.Helper()
		select {
		case name := <-started:
			return name
		case <-time.After(10 * time.Second):
			t.Fatal("no transfer started")
			return ""
		}
	}
	quiet := func() {
		t.Helper()
		select {
		case name := <-started:
			t.Fatalf("%s started though no slot was free for it", name)
		case <-time.After(50 * time.Millisecond):
		}
	}
	done := func(name string) { l.release(sizes[name]) }

	add("s1", 10)
	add("L2", 2*MiB)
	add("L5", 5*MiB)
	add("s2", 1000)
	add("L3", 3*MiB)
	add("L4", 4*MiB)
	add("s3", 5)
	quiet() // nothing runs before dispatch: the first slots go by size too
	l.dispatch()
	first := map[string]bool{}
	for range 4 {
		first[next()] = true
	}
	if !first["L5"] || !first["L4"] || !first["L3"] || !first["s1"] {
		t.Fatalf("the first four slots went to %v, want L5, L4, L3 (largest first, three at most) and s1", first)
	}
	quiet()
	done("s1") // three large blobs run: the slot stays with small blobs
	if got := next(); got != "s2" {
		t.Fatalf("a small blob's slot went to %s, want s2 (L2 waits: three large blobs run)", got)
	}
	done("s2")
	if got := next(); got != "s3" {
		t.Fatalf("slot went to %s, want s3", got)
	}
	done("s3")
	quiet() // L2 waits, the slot is kept for small blobs
	done("L5")
	if got := next(); got != "L2" {
		t.Fatalf("a large blob's slot went to %s, want L2", got)
	}

	// A goroutine blocked in acquire goes first; a cancelled one leaves.
	ctx := context.Background()
	if err := l.acquire(ctx, 1); err != nil { // the slot kept for small blobs
		t.Fatal(err)
	}
	add("s4", 1)
	cancelled, cancel := context.WithCancel(ctx)
	gone := make(chan error)
	go func() { gone <- l.acquire(cancelled, 1) }()
	got := make(chan error)
	go func() { got <- l.acquire(ctx, 2) }()
	waitQueued(t, l, 3)
	cancel()
	if err := <-gone; err == nil {
		t.Fatal("a cancelled waiter got a slot")
	}
	done("L4") // a large blob's slot, and no large blob waits
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	quiet() // s4 still waits
	l.release(2)
	if got := next(); got != "s4" {
		t.Fatalf("slot went to %s, want s4", got)
	}
}

func waitQueued(t *testing.T, l *blobLane, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		l.mu.Lock()
		q := l.big.Len() + l.small.Len()
		l.mu.Unlock()
		if q == n {
			return
		}
	}
	t.Fatalf("%d entries never queued", n)
}
