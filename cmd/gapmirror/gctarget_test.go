package main

import (
	"context"
	"io"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"testing"
)

// TestProcessSetsCollectorTarget: the binary's entry sets the collector's
// target itself (gctarget), unless GOGC is in the environment, which then
// stays as the user set it (docs/flags.md, "Memory").
func TestProcessSetsCollectorTarget(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	target := func() int {
		s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
		metrics.Read(s)
		return int(s[0].Value.Uint64())
	}
	version := func() {
		t.Helper()
		if code := runProcess(context.Background(), []string{"version", "--short"}, io.Discard, io.Discard); code != 0 {
			t.Fatalf("gapmirror version exited %d", code)
		}
	}

	t.Setenv("GOGC", "") // restored after the test
	os.Unsetenv("GOGC")
	debug.SetGCPercent(77)
	version()
	if got := target(); got == 77 {
		t.Fatalf("without GOGC in the environment the target stayed %d: gctarget did not start", got)
	}

	t.Setenv("GOGC", "77")
	debug.SetGCPercent(77)
	version()
	if got := target(); got != 77 {
		t.Fatalf("with GOGC=77 in the environment the target became %d", got)
	}
}
