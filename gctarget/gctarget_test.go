package gctarget

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestPolicyNext(t *testing.T) {
	p := Policy{Low: 50, High: 100, Small: 10, Large: 20}
	for _, c := range []struct {
		current int
		live    uint64
		want    int
	}{
		{100, 5, 50},
		{50, 25, 100},
		{50, 15, 50},   // between the bounds: unchanged
		{100, 15, 100}, // likewise
		{100, 10, 100}, // at Small is not under it
		{50, 20, 50},   // at Large is not over it
	} {
		if got := p.Next(c.current, c.live); got != c.want {
			t.Errorf("Next(%d, %d) = %d, want %d", c.current, c.live, got, c.want)
		}
	}
}

func gogc(t *testing.T) int {
	t.Helper()
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// waitFor collects until the target is want: the tuner steps on the
// cleanup goroutine after a collection, not within runtime.GC.
func waitFor(t *testing.T, want int, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for gogc(t) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s: GOGC is %d, want %d (live heap %d bytes)", what, gogc(t), want, liveHeap())
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

var hold [][]byte

// TestStartFollowsLiveHeap drives the tuner with the runtime's own
// collections: the low target at start, the high one once the live heap
// grows past Large, the low one again when it is freed, and none after stop.
func TestStartFollowsLiveHeap(t *testing.T) {
	t.Setenv("GOGC", "") // restored after the test
	os.Unsetenv("GOGC")
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	runtime.GC()
	base := liveHeap()
	p := Policy{Low: 30, High: 120, Small: base + 8<<20, Large: base + 32<<20}
	stop := Start(p)
	waitFor(t, 30, "at start")

	for range 64 {
		hold = append(hold, make([]byte, 1<<20))
	}
	waitFor(t, 120, "with 64 MiB more live")

	hold = nil
	waitFor(t, 30, "after that was freed")

	stop()
	debug.SetGCPercent(75)
	for range 64 {
		hold = append(hold, make([]byte, 1<<20))
	}
	for range 3 {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	hold = nil
	if got := gogc(t); got != 75 {
		t.Fatalf("after stop the tuner set GOGC to %d", got)
	}
}

// TestUserGOGCWins: with GOGC in the environment the tuner leaves the
// target as the user set it.
func TestUserGOGCWins(t *testing.T) {
	t.Setenv("GOGC", "77")
	defer debug.SetGCPercent(debug.SetGCPercent(77))
	stop := Start(Policy{Low: 10, High: 20, Small: 1 << 40, Large: 1 << 41})
	defer stop()
	for range 3 {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if got := gogc(t); got != 77 {
		t.Fatalf("GOGC is %d with GOGC=77 in the environment", got)
	}
}
