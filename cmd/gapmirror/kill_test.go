package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// buildBinary gives the path of a gapmirror executable for tests that
// must kill a real process: this test binary (built with the same tags and
// code), which runs gapmirror's main when GAPMIRROR_TEST_AS_CLI is set (see
// TestMain), behind a one-line script that sets it and execs, so the
// process killed is gapmirror itself. A go build per test cost a minute of
// CPU on a loaded 2-core machine.
func buildBinary(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatalf("finding the test binary: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "gapmirror")
	script := "#!/bin/sh\nGAPMIRROR_TEST_AS_CLI=1 exec '" + self + "' \"$@\"\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestMain lets this test binary stand in for gapmirror (buildBinary).
func TestMain(m *testing.M) {
	if os.Getenv("GAPMIRROR_TEST_AS_CLI") == "1" {
		main()
	}
	os.Exit(m.Run())
}

// blobLog records which blobs the upstream served and can slow them down.
type blobLog struct {
	mu     sync.Mutex
	served map[digest.Digest]int
	delay  time.Duration
}

func (l *blobLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, d, ok := registrytest.BlobPath(r.URL.Path); ok && r.Method == http.MethodGet {
			l.mu.Lock()
			l.served[d]++
			delay := l.delay
			l.mu.Unlock()
			time.Sleep(delay)
		}
		next.ServeHTTP(w, r)
	})
}

// reset forgets what was served and serves without delay from now on.
func (l *blobLog) reset() {
	l.mu.Lock()
	l.served, l.delay = map[digest.Digest]int{}, 0
	l.mu.Unlock()
}

// count is how many times blob d was served.
func (l *blobLog) count(d digest.Digest) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.served[d]
}

// TestKilledRunResumes kills a mirror-to-disk run with SIGKILL half-way;
// the rerun completes, fetches no blob the killed run had staged whole (its
// journal lists them; each is checked before it is kept), and the archive
// it writes mirrors correctly.
func TestKilledRunResumes(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(12, 512<<10)
	isc := w.isc("")
	log := &blobLog{served: map[digest.Digest]int{}, delay: 300 * time.Millisecond}
	w.up.SetWrap(log.wrap)
	bin := buildBinary(t)

	out := filepath.Join(w.dir, "a")
	cmd := exec.Command(bin, "mirror", "--src-tls-verify=false", "--no-progress", "--registries-conf", w.regsConf,
		"--authfile", w.authFile, "--cache-dir", filepath.Join(w.dir, "cache"), "--parallel-images", "2", "--parallel-layers", "1", "-c", isc, "file://"+out)
	must(t, cmd.Start())
	// The run journals each blob it has whole in the archive it stages;
	// kill it once a few are.
	journaled := func() map[digest.Digest]bool {
		had := map[digest.Digest]bool{}
		files, _ := filepath.Glob(filepath.Join(out, "mirror_*.journal.partial"))
		for _, f := range files {
			data, _ := os.ReadFile(f)
			for _, line := range strings.Split(string(data), "\n") {
				var e struct{ Digest digest.Digest }
				if json.Unmarshal([]byte(line), &e) == nil && e.Digest != "" {
					had[e.Digest] = true
				}
			}
		}
		return had
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && len(journaled()) < 6 {
		time.Sleep(20 * time.Millisecond)
	}
	must(t, cmd.Process.Signal(syscall.SIGKILL))
	cmd.Wait()
	had := journaled()
	if len(had) < 6 {
		t.Fatalf("the run was not half-way when killed: %d blobs staged", len(had))
	}
	if chunks, _ := filepath.Glob(filepath.Join(out, "mirror_*.tar")); len(chunks) > 0 {
		t.Fatalf("a killed run left archive chunks: %v", chunks)
	}

	log.reset()
	code, stdout, _ := w.gapmirror("mirror", "-c", isc, "file://"+out)
	var images, copied, there, built, failed int
	fmt.Sscanf(stdout[strings.Index(stdout, "mirror-to-disk: "):], "mirror-to-disk: %d images: %d copied, %d already at the destination, %d built by gapmirror, %d failed", &images, &copied, &there, &built, &failed)
	if code != 0 || copied+there != 12 || failed != 0 || copied == 0 {
		t.Fatalf("rerun: exit %d\n%s", code, stdout)
	}
	for d := range had {
		if log.served[d] > 0 {
			t.Errorf("blob %s was staged whole before the kill but fetched again", d)
		}
	}
	if code, _, _ := w.gapmirror("mirror", "--from", "file://"+out, "docker://"+w.dst.Host()+"/m"); code != 0 {
		t.Fatalf("d2m after the resumed run: exit %d", code)
	}
	w.assertMirrored(w.dst, "m")
}
