// Command gapmirror mirrors operator catalogs, release payloads and
// additional images into air-gapped registries, by digest.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/gapmirror/gapmirror/audit"
	"github.com/gapmirror/gapmirror/gctarget"
	"github.com/gapmirror/gapmirror/mirror"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runProcess(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// runProcess is run with what belongs to the process rather than to one
// command: the collector's target (gctarget) and the profiles.
func runProcess(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	defer gctarget.Start(gctarget.Default)()
	defer startProfile()()
	return run(ctx, args, stdout, stderr)
}

// run executes gapmirror with args and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newRootCommand(stderr)
	if err := mistypedCommand(cmd, args); err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "error:", err)
	return exitCode(err)
}

// exitCode maps an error to gapmirror's exit codes (oc-mirror v2's bits):
// 1 generic, 2 release, 4 operator, 8 additional images, 16 helm, OR-ed.
func exitCode(err error) int {
	var fe *mirror.FailedError
	if errors.As(err, &fe) {
		return fe.ExitCode()
	}
	var ae *audit.Error
	if errors.As(err, &ae) {
		return ae.ExitCode()
	}
	return 1
}
