// Package opmtest finds and runs opm, the reference implementation of
// file-based catalogs, as an oracle for gapmirror's catalog tests: what
// gapmirror writes must pass `opm validate` and start under `opm serve`.
//
// opm is built from the separate module tools/opm by `make opm` into bin/opm
// (operator-registry v1.65.0, CGO_ENABLED=0 -tags containers_image_openpgp).
// The module proxy this project uses refuses the version list of
// operator-registry, so `go install …/cmd/opm@v1.65.0` and `go list -m
// -versions` fail (2026-11-23: "reading …/operator-registry/@v/list: 403
// Forbidden, server response: This module version is not available"). The
// exact version is served: `go get github.com/operator-framework/
// operator-registry@v1.65.0` in tools/opm succeeded, and `go build` took
// 3m36s with a cold build cache on 2 cores, seconds with a warm one.
//
// Tests find opm at $GAPMIRROR_OPM, else at bin/opm under the module root;
// never on PATH, so that the oracle is the pinned release. Without it they
// skip, unless GAPMIRROR_REQUIRE_OPM=1 (set by CI, which builds it) makes a
// missing opm a failure: an oracle that silently does not run checks nothing.
package opmtest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// module is the path in gapmirror's go.mod, to tell its root from tools/opm.
const module = "module github.com/gapmirror/gapmirror\n"

// Find returns the path of the opm binary: $GAPMIRROR_OPM when set, else
// bin/opm under the root of the gapmirror module that holds the working
// directory. The error says how to get one.
func Find() (string, error) {
	if p := os.Getenv("GAPMIRROR_OPM"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("GAPMIRROR_OPM=%s: %w", p, err)
		}
		return filepath.Abs(p)
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	p := filepath.Join(root, "bin", "opm")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s is not built: run `make opm` (builds operator-registry v1.65.0 from tools/opm, about 4 minutes cold) or set GAPMIRROR_OPM", p)
	}
	return p, nil
}

// moduleRoot walks up from the working directory to gapmirror's go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(data, []byte(module)) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no gapmirror go.mod above the working directory: set GAPMIRROR_OPM")
		}
		dir = parent
	}
}

// required reports whether a missing opm fails the tests instead of skipping them.
func required() bool { return os.Getenv("GAPMIRROR_REQUIRE_OPM") == "1" }

// path returns opm for a test, or skips the test with the reason when there
// is none (fails it when Required).
func path(t testing.TB) string {
	t.Helper()
	p, err := Find()
	if err != nil {
		if required() {
			t.Fatalf("opm oracle required (GAPMIRROR_REQUIRE_OPM=1) but missing: %v", err)
		}
		t.Skipf("skipping the opm oracle: %v", err)
	}
	return p
}

// Oracle returns opm for oracle checks inside tests that check more than
// opm: "" (with a note in the log, once) when it is not built, so the rest
// of the test still runs; a failure when Required.
func Oracle(t testing.TB) string {
	t.Helper()
	opm, err := Find()
	if err != nil {
		if required() {
			t.Fatalf("opm oracle required (GAPMIRROR_REQUIRE_OPM=1) but missing: %v", err)
		}
		oracleMissing.Do(func() { t.Logf("not checking with opm: %v", err) })
		return ""
	}
	return opm
}

var (
	oracleMissing sync.Once
	versionOnce   sync.Once
	versionText   string
)

// Version is what `opm version` prints, for messages; "" when it fails.
func Version(opm string) string {
	versionOnce.Do(func() {
		out, err := exec.Command(opm, "version").Output()
		if err == nil {
			versionText = strings.TrimSpace(string(out))
		}
	})
	return versionText
}

// Validate runs `opm validate dir` and fails the test with opm's output when
// opm rejects the catalog.
func Validate(t testing.TB, opm, dir string) {
	t.Helper()
	if err := ValidateErr(opm, dir); err != nil {
		t.Errorf("%v", err)
	}
}

// ValidateErr runs `opm validate dir` and returns opm's complaint, if any.
func ValidateErr(opm, dir string) error {
	out, err := exec.Command(opm, "validate", dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("opm validate %s: %v\n%s", dir, err, out)
	}
	return nil
}

// Serve starts `opm serve dir args...` on a free port, waits until opm says
// it is serving and the port accepts a connection, then stops it. It fails
// the test with opm's output when opm exits or does not get there in time.
func Serve(t testing.TB, opm, dir string, args ...string) {
	t.Helper()
	if err := serveErr(opm, dir, args...); err != nil {
		t.Errorf("%v", err)
	}
}

// serveErr is Serve returning the error.
func serveErr(opm, dir string, args ...string) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// No pprof endpoint (its default port would clash between runs) and
	// the termination log in a temporary file rather than /dev.
	term, err := os.CreateTemp("", "opm-termination-log-")
	if err != nil {
		return err
	}
	term.Close()
	defer os.Remove(term.Name())
	full := append([]string{"serve", dir, "--port", strconv.Itoa(port), "--pprof-addr", "", "--termination-log", term.Name()}, args...)
	cmd := exec.CommandContext(ctx, opm, full...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting opm serve: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); pw.Close() }()

	var out strings.Builder
	serving := make(chan struct{})
	lines := make(chan struct{})
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(pr)
		once := sync.Once{}
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "serving registry") {
				once.Do(func() { close(serving) })
			}
		}
	}()
	desc := "opm serve " + strings.Join(full[1:], " ")
	select {
	case <-serving:
	case err := <-exited:
		<-lines
		return fmt.Errorf("%s exited before serving: %v\n%s", desc, err, out.String())
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-exited
		<-lines
		return fmt.Errorf("%s did not start serving in time\n%s", desc, out.String())
	}
	// opm logs before Serve; the listener is open by then, so this only
	// confirms the port is really its.
	conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 10*time.Second)
	if err == nil {
		conn.Close()
	}
	_ = cmd.Process.Kill()
	<-exited
	<-lines
	if err != nil {
		return fmt.Errorf("%s said it serves, but port %d refuses: %v\n%s", desc, port, err, out.String())
	}
	return nil
}

// CacheOnly runs `opm serve dir --cache-dir cache --cache-only`, as a
// catalog image's build does, to fill the cache a later serve checks.
func CacheOnly(opm, dir, cache string) error {
	out, err := exec.Command(opm, "serve", dir, "--cache-dir", cache, "--cache-only", "--pprof-addr", "", "--termination-log", os.DevNull).CombinedOutput()
	if err != nil {
		return fmt.Errorf("opm serve %s --cache-dir %s --cache-only: %v\n%s", dir, cache, err, out)
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
