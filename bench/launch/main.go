// Command launch runs a command and reports its wall time and peak RSS,
// for the bench (see measure in ../catalogs.go).
//
// It is its own small program, not the bench binary in a launcher mode:
// Go starts children with CLONE_VM|CLONE_VFORK, and Linux carries the
// parent's peak RSS into the child's maxrss at exec, so a child reports
// at least the peak of whatever started it. The bench binary links the
// registries and starts at about 70 MiB, over a lean gapmirror's whole
// run; this program starts at about 2 MiB.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Env names the file that receives "<wall ns> <maxrss KiB>" of the child.
const Env = "GAPMIRROR_BENCH_LAUNCH"

func main() {
	result := os.Getenv(Env)
	os.Unsetenv(Env)
	if len(os.Args) < 2 || result == "" {
		fmt.Fprintln(os.Stderr, "usage: "+Env+"=FILE launch COMMAND [ARG...]")
		os.Exit(2)
	}
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if cmd.ProcessState == nil {
		fmt.Fprintf(os.Stderr, "bench launcher: %v\n", err)
		os.Exit(1)
	}
	var rss int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rss = ru.Maxrss // KiB on Linux
	}
	if werr := os.WriteFile(result, fmt.Appendf(nil, "%d %d\n", wall.Nanoseconds(), rss), 0o644); werr != nil {
		fmt.Fprintf(os.Stderr, "bench launcher: %v\n", werr)
		os.Exit(1)
	}
	os.Exit(cmd.ProcessState.ExitCode())
}
