// Package companion finds and runs gapmirror-full, the build of gapmirror
// with the registry server (serve) and Helm's template engine linked in.
//
// The gapmirror executable of a release is built without them (the
// gapmirror_lean build tag): together they are about half of the program's
// code and most of what its package initialisers touch at start-up
// (Kubernetes' API scheme, the cloud SDKs), so a mirror run that needs
// neither starts at half the memory. `gapmirror serve` and the rendering of
// Helm charts run gapmirror-full instead.
package companion

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// Name is the companion executable's file name.
const Name = "gapmirror-full"

// viaEnv marks the companion's environment with the lean executable that
// started it: a lean build found under the companion's name would
// otherwise start itself again and again.
const viaEnv = "GAPMIRROR_COMPANION_OF"

// UnavailableError is a companion that could not be found or run: the
// request itself was never answered, so no advice about it applies.
type UnavailableError struct{ msg string }

func (e *UnavailableError) Error() string { return e.msg }

func unavailable(format string, args ...any) error {
	return &UnavailableError{msg: fmt.Sprintf(format, args...)}
}

// Path returns the companion: beside the running executable (as a release
// archive installs the two), else on PATH.
func Path() (string, error) {
	if via := os.Getenv(viaEnv); via != "" {
		self, _ := os.Executable()
		return "", unavailable("%s (started by %s as %s) is itself a lean build: install the %s of the same release archive", self, via, Name, Name)
	}
	self, err := os.Executable()
	if err == nil {
		if resolved, err := filepath.EvalSymlinks(self); err == nil {
			self = resolved
		}
		beside := filepath.Join(filepath.Dir(self), Name)
		if fi, err := os.Stat(beside); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return beside, nil
		}
	}
	if p, err := exec.LookPath(Name); err == nil {
		return p, nil
	}
	where := "the gapmirror executable"
	if self != "" {
		where = filepath.Dir(self)
	}
	return "", unavailable("%s is neither beside gapmirror (in %s) nor on PATH: install the two executables of the same release archive side by side (or build gapmirror as one program with `go build ./cmd/gapmirror`, without the gapmirror_lean tag)", Name, where)
}

// Run runs the companion with args, stdin as its input, and returns what
// it wrote to stdout. A failure returns what it wrote to stderr as the
// error, so its messages reach the user as they would from one program.
func Run(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	p, err := Path()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, p, args...)
	cmd.Env = environ()
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if err == nil {
		return stdout.Bytes(), nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	msg := strings.TrimSpace(stderr.String())
	msg = strings.TrimPrefix(msg, "error: ") // gapmirror's own prefix; the caller adds context
	var exit *exec.ExitError
	if !errors.As(err, &exit) || msg == "" {
		return nil, unavailable("running %s %s: %v", p, strings.Join(args, " "), err)
	}
	if strings.Contains(msg, "unknown command") {
		return nil, unavailable("%s does not know %q (%s): it is not from the same release as this gapmirror; install the two from one release archive", p, args[0], msg)
	}
	return nil, errors.New(msg)
}

// Exec replaces this process with the companion, given args (without the
// program name): same process, so signals, exit code and standard streams
// are the companion's, as for `gapmirror serve` under systemd.
func Exec(args []string) error {
	p, err := Path()
	if err != nil {
		return err
	}
	if err := syscall.Exec(p, append([]string{p}, args...), environ()); err != nil {
		return unavailable("starting %s: %v", p, err)
	}
	return nil // not reached
}

// environ is this process's environment with viaEnv set.
func environ() []string {
	self, err := os.Executable()
	if err != nil {
		self = "gapmirror"
	}
	return append(os.Environ(), viaEnv+"="+self)
}
