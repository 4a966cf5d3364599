// Package fuzzguard runs a fuzz target's body so that a hang or a panic is
// reported as the input's failure. The body runs on a goroutine of its own
// (a hang must not stop the worker from answering), and a panic there would
// otherwise kill the fuzzing process: the fuzzer then reports only "fuzzing
// process hung or terminated unexpectedly", without the panic or its stack.
package fuzzguard

import (
	"fmt"
	"runtime/debug"
	"testing"
	"time"
)

// Limit is how long one input may take before it counts as a hang.
const Limit = 10 * time.Second

// Within runs fn and fails t when fn panics (with the panic and its stack)
// or takes longer than Limit.
func Within(t testing.TB, fn func()) {
	t.Helper()
	done := make(chan string, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Sprintf("panic: %v\n%s", r, debug.Stack())
				return
			}
			done <- ""
		}()
		fn()
	}()
	select {
	case p := <-done:
		if p != "" {
			t.Fatal(p)
		}
	case <-time.After(Limit):
		t.Fatalf("took more than %s", Limit)
	}
}
