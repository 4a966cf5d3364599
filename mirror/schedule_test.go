package mirror

import (
	"context"
	"testing"
	"time"
)

// TestBlobSlotsLargestFirst: with every slot taken, a freed slot goes to
// the largest blob waiting, whatever the order they queued in; a waiter
// whose context ends leaves the queue.
func TestBlobSlotsLargestFirst(t *testing.T) {
	s := newBlobSlots(1)
	ctx := context.Background()
	if err := s.acquire(ctx, 5); err != nil {
		t.Fatal(err)
	}
	order := make(chan int64, 3)
	cancelled, cancel := context.WithCancel(ctx)
	gone := make(chan error)
	go func() { gone <- s.acquire(cancelled, 1000) }()
	for _, size := range []int64{1, 100, 10} {
		go func() {
			if err := s.acquire(ctx, size); err == nil {
				order <- size
				time.Sleep(10 * time.Millisecond)
				s.release()
			}
		}()
	}
	for { // all four queued
		s.mu.Lock()
		n := len(s.waiting)
		s.mu.Unlock()
		if n == 4 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-gone; err == nil {
		t.Fatal("a cancelled waiter got a slot")
	}
	s.release()
	for _, want := range []int64{100, 10, 1} {
		if got := <-order; got != want {
			t.Fatalf("slot went to a blob of %d bytes, want %d", got, want)
		}
	}
}
