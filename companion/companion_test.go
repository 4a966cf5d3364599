package companion

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fake puts an executable script named gapmirror-full into a fresh
// directory on PATH (the test binary's own directory has none).
func fake(t *testing.T, script string) string {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, Name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":/usr/bin:/bin")
	t.Setenv(viaEnv, "")
	return p
}

func TestRunPassesStdinAndReturnsStdout(t *testing.T) {
	fake(t, `[ "$1 $2" = "companion echo" ] || exit 3; [ -n "$`+viaEnv+`" ] || exit 4; cat`)
	out, err := Run(t.Context(), []byte("chart bytes"), "companion", "echo")
	if err != nil || string(out) != "chart bytes" {
		t.Fatalf("Run = %q, %v", out, err)
	}
}

func TestRunErrors(t *testing.T) {
	for _, tc := range []struct {
		script, want string
		unavailable  bool
	}{
		// The companion's own message reaches the user as its own.
		{`echo "error: template pod.yaml: set image.tag" >&2; exit 1`, "template pod.yaml: set image.tag", false},
		{`echo 'error: unknown command "companion" for "gapmirror"' >&2; exit 1`, "is not from the same release as this gapmirror", true},
		{`exit 2`, "running ", true},
	} {
		fake(t, tc.script)
		_, err := Run(t.Context(), nil, "companion", "helm-template")
		var u *UnavailableError
		if err == nil || !strings.Contains(err.Error(), tc.want) || errors.As(err, &u) != tc.unavailable {
			t.Errorf("script %q: got %v (unavailable %v), want %q (unavailable %v)", tc.script, err, u != nil, tc.want, tc.unavailable)
		}
	}
}

func TestPathMissingAndLoop(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv(viaEnv, "")
	_, err := Path()
	var u *UnavailableError
	if !errors.As(err, &u) || !strings.Contains(err.Error(), "gapmirror-full is neither beside gapmirror") || !strings.Contains(err.Error(), "nor on PATH") {
		t.Errorf("no companion: %v", err)
	}
	p := fake(t, "exit 0")
	if got, err := Path(); err != nil || got != p {
		t.Errorf("Path = %q, %v; want %q", got, err, p)
	}
	// Started by a lean gapmirror under the companion's name: a lean build itself.
	t.Setenv(viaEnv, "/usr/local/bin/gapmirror")
	if _, err := Path(); !errors.As(err, &u) || !strings.Contains(err.Error(), "is itself a lean build") {
		t.Errorf("started by a lean gapmirror: %v", err)
	}
}
