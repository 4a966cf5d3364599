package main

import (
	"fmt"
	"os"
	"runtime/metrics"
	"runtime/pprof"
	"time"
)

// startProfile writes a CPU profile of the whole run to the file
// $GAPMIRROR_CPUPROFILE names, and the heap profile as it is at the run's
// peak to the file $GAPMIRROR_HEAPPROFILE names, if set (for
// docs/benchmarks.md's profiles; `go tool pprof bin/gapmirror FILE` reads
// them). The returned function stops both.
func startProfile() func() {
	stopCPU, stopHeap := cpuProfile(os.Getenv("GAPMIRROR_CPUPROFILE")), heapProfile(os.Getenv("GAPMIRROR_HEAPPROFILE"))
	return func() {
		stopCPU()
		stopHeap()
	}
}

func cpuProfile(path string) func() {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "GAPMIRROR_CPUPROFILE: %v\n", err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

// heapProfile polls the live heap twice a second and writes the heap
// profile each time it is 5% above the largest seen: the file ends up
// showing what the heap held at its peak (as of the last collection).
func heapProfile(path string) func() {
	if path == "" {
		return func() {}
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		var peak uint64
		write := func() {
			metrics.Read(sample)
			if live := sample[0].Value.Uint64(); live > peak+peak/20 {
				peak = live
				f, err := os.Create(path)
				if err == nil {
					err = pprof.Lookup("heap").WriteTo(f, 0)
					if cerr := f.Close(); err == nil {
						err = cerr
					}
				}
				if err != nil {
					fmt.Fprintf(os.Stderr, "GAPMIRROR_HEAPPROFILE: %v\n", err)
				}
			}
		}
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				write()
				return
			case <-t.C:
				write()
			}
		}
	}()
	return func() {
		close(stop)
		<-done
	}
}
