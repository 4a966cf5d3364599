package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// startProfile writes a CPU profile of the whole run to the file
// $GAPMIRROR_CPUPROFILE names, if set (for docs/benchmarks.md's profile;
// `go tool pprof bin/gapmirror FILE` reads it). The returned function stops it.
func startProfile() func() {
	path := os.Getenv("GAPMIRROR_CPUPROFILE")
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
