package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gapmirror/gapmirror/companion"
	"github.com/gapmirror/gapmirror/internal/helmtest"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// buildTags are the Makefile's TAGS: the containers libraries' choices
// that keep the build free of cgo.
const buildTags = "containers_image_openpgp containers_image_storage_stub containers_image_docker_daemon_stub"

// buildRelease builds what a release archive installs into dir: gapmirror
// (the lean build) and gapmirror-full beside it.
func buildRelease(t *testing.T, dir string) (lean, full string) {
	t.Helper()
	lean, full = filepath.Join(dir, "gapmirror"), filepath.Join(dir, companion.Name)
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	for out, tags := range map[string]string{lean: buildTags + " gapmirror_lean", full: buildTags} {
		cmd := exec.Command(gobin, "build", "-tags", tags, "-o", out, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build -tags %q: %v\n%s", tags, err, b)
		}
	}
	return lean, full
}

// binary runs the executable bin with the world's isolation flags, as
// gapmirrorCtx runs the CLI in-process, and PATH without a gapmirror-full.
func (w *world) binary(ctx context.Context, bin string, args ...string) (code int, stdout, stderr string) {
	w.t.Helper()
	full := append(append([]string{args[0]}, w.isolation()...), args[1:]...)
	cmd := exec.CommandContext(ctx, bin, full...)
	cmd.Env = append(os.Environ(), "PATH=/usr/bin:/bin")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code = cmd.ProcessState.ExitCode()
	if err != nil && code < 0 {
		w.t.Fatalf("%s: %v", bin, err)
	}
	w.t.Logf("%s %s → exit %d\nstdout:\n%s\nstderr:\n%s", bin, strings.Join(args, " "), code, out.String(), errb.String())
	return code, out.String(), errb.String()
}

// TestLeanBuildRunsCompanion drives the two executables of a release
// archive: gapmirror, built without the registry server and Helm's engine,
// renders and packages charts through gapmirror-full and becomes
// gapmirror-full for `serve` (same process: SIGTERM stops the registry);
// without gapmirror-full beside it, both say what to install.
func TestLeanBuildRunsCompanion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the two executables")
	}
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	lean, full := buildRelease(t, filepath.Join(w.dir, "release"))
	if code, out, _ := w.binary(t.Context(), lean, "version"); code != 0 || !strings.Contains(out, "serve and helm charts: "+full+"\n") {
		t.Errorf("version of the lean build does not name %s: exit %d\n%s", full, code, out)
	}
	if code, out, _ := w.binary(t.Context(), full, "version"); code != 0 || strings.Contains(out, "serve and helm charts") {
		t.Errorf("version of the whole program names a companion: exit %d\n%s", code, out)
	}

	// Charts: a repository chart (rendered by gapmirror-full) and a local
	// chart directory (packaged and rendered by gapmirror-full).
	for i, name := range []string{"web", "init", "operand", "worker"} {
		w.expectApp(name, "v1", uint64(300+i))
	}
	w.expectApp("local", "v2", 310)
	reg := w.up.Host()
	repo := helmtest.Serve(t, helmtest.Web("1.2.0", reg, "v1"))
	local := helmtest.Pod("mine", "0.3.0", reg+"/apps/local:v2").WriteDir(t, filepath.Join(w.dir, "charts"))
	isc := w.writeISC("helm.yaml", fmt.Sprintf(`  helm:
    repositories:
    - name: demo
      url: %s
      charts:
      - name: web
        imagePaths:
        - "{.spec.template.spec.containers[*].env[*].value}"
    local:
    - name: mine
      path: %s
`, repo.URL(), local))
	ctx := t.Context()
	code, out, _ := w.binary(ctx, lean, "mirror", "-c", isc, "--workspace", "file://"+filepath.Join(w.dir, "ws"), "docker://"+w.dst.Host()+"/lean")
	if code != 0 || !strings.Contains(out, "5 copied") {
		t.Fatalf("lean mirror-to-mirror of two charts' images: exit %d\n%s", code, out)
	}
	w.assertMirrored(w.dst, "lean")
	assertCharts(t, filepath.Join(w.dir, "ws", "working-dir"), map[string][]byte{"demo/web-1.2.0.tgz": helmtest.Web("1.2.0", reg, "v1").Archive(), "local/mine-0.3.0.tgz": nil})

	// A chart that does not render: gapmirror-full's message, as the whole program gives it.
	bad := helmtest.NeedsValues("bad", "0.1.0").WriteDir(t, filepath.Join(w.dir, "charts"))
	badISC := w.writeISC("bad.yaml", fmt.Sprintf("  helm:\n    local:\n    - name: bad\n      path: %s\n", bad))
	code, out, _ = w.binary(ctx, lean, "mirror", "-c", badISC, "--workspace", "file://"+filepath.Join(w.dir, "ws-bad"), "docker://"+w.dst.Host()+"/bad")
	if code != 16 || !strings.Contains(out, "cannot render the templates with the default values: ") || !strings.Contains(out, "set image.tag; gapmirror renders charts with their default values only") {
		t.Errorf("a chart that does not render, through gapmirror-full: exit %d, want 16 and the template's message", code)
	}

	// serve: the registry answers (as itself), and SIGTERM to the process started as
	// gapmirror stops it cleanly.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	addr := l.Addr().String()
	must(t, l.Close())
	srv := exec.Command(lean, "serve", "--no-progress", "--root", filepath.Join(w.dir, "srv"), "--plain-http", "--address", addr)
	var serveErr bytes.Buffer
	srv.Stdout, srv.Stderr = &serveErr, &serveErr
	must(t, srv.Start())
	up, last := false, ""
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/v2/")
		if err != nil {
			last = err.Error()
			continue
		}
		resp.Body.Close()
		last = resp.Status
		// Anonymous pulls take a token first: a 401 from the registry is an answer.
		if up = resp.Header.Get("Docker-Distribution-Api-Version") == "registry/2.0"; up {
			break
		}
	}
	if !up {
		_ = srv.Process.Kill()
		_ = srv.Wait()
		t.Fatalf("gapmirror serve never answered /v2/ on %s (last: %s):\n%s", addr, last, serveErr.String())
	}
	must(t, srv.Process.Signal(syscall.SIGTERM))
	if err := srv.Wait(); err != nil {
		t.Errorf("gapmirror serve after SIGTERM: %v\n%s", err, serveErr.String())
	}

	// Alone, the lean gapmirror names what is missing; the other sections still run.
	alone := filepath.Join(w.dir, "alone", "gapmirror")
	must(t, os.MkdirAll(filepath.Dir(alone), 0o755))
	data, err := os.ReadFile(lean)
	must(t, err)
	must(t, os.WriteFile(alone, data, 0o755))
	want := "gapmirror-full is neither beside gapmirror (in " + filepath.Dir(alone) + ") nor on PATH: install the two executables of the same release archive side by side"
	if code, out, _ := w.binary(ctx, alone, "version"); code != 0 || !strings.Contains(out, "serve and helm charts: not available: "+want) {
		t.Errorf("version of a lean build alone: exit %d\n%s", code, out)
	}
	code, _, stderr := w.binary(ctx, alone, "serve", "--root", filepath.Join(w.dir, "srv"))
	if code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("serve without gapmirror-full: exit %d, want 1 and %q", code, want)
	}
	code, out, _ = w.binary(ctx, alone, "mirror", "-c", isc, "--workspace", "file://"+filepath.Join(w.dir, "ws-alone"), "docker://"+w.dst.Host()+"/alone")
	if code != 16 || !strings.Contains(out, "FAILED 2 images (other): "+want) || !strings.Contains(out, "helm chart mine (local, ") || !strings.Contains(out, "helm chart web 1.2.0 from repository demo") ||
		strings.Contains(out, "fix mirror.helm.local[0].path") || strings.Contains(out, "default values only") {
		t.Errorf("charts without gapmirror-full: exit %d, want 16 (helm) and %q for both charts, without advice about the charts", code, want)
	}
}
