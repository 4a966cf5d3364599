package main

import (
	"runtime/debug"
	"testing"
)

// TestTuneGC: without GOGC the collector runs at gcPercent; a GOGC the
// user set is left as it is.
func TestTuneGC(t *testing.T) {
	saved := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(saved) })
	tuneGC(func(string) (string, bool) { return "", false })
	if got := debug.SetGCPercent(100); got != gcPercent {
		t.Errorf("GOGC unset: the collector's target is %d%%, want %d%%", got, gcPercent)
	}
	tuneGC(func(k string) (string, bool) { return "200", k == "GOGC" })
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC set: the target was changed to %d%%", got)
	}
}
