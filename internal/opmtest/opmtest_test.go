package opmtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const pkg = `{"schema":"olm.package","name":"p","defaultChannel":"stable"}
{"schema":"olm.channel","package":"p","name":"stable","entries":[{"name":"p.v1.0.0"},{"name":"p.v1.1.0","replaces":"p.v1.0.0"}]}
{"schema":"olm.bundle","package":"p","name":"p.v1.0.0","image":"quay.example.com/p/bundle:v1.0.0","properties":[{"type":"olm.package","value":{"packageName":"p","version":"1.0.0"}}]}
`

func writeCatalog(t *testing.T, content string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "p"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "p", "catalog.json"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestOracle checks that the oracle tells a valid catalog from a broken one
// and that opm serve starts, with and without a prepared cache.
func TestOracle(t *testing.T) {
	opm := path(t)
	if v := Version(opm); !strings.Contains(v, "v1.65.0") {
		t.Logf("opm is not the pinned release: %q", v)
	}
	good := writeCatalog(t, pkg+`{"schema":"olm.bundle","package":"p","name":"p.v1.1.0","image":"quay.example.com/p/bundle:v1.1.0","properties":[{"type":"olm.package","value":{"packageName":"p","version":"1.1.0"}}]}
`)
	if err := ValidateErr(opm, good); err != nil {
		t.Errorf("valid catalog rejected: %v", err)
	}
	// The channel names p.v1.1.0, which has no olm.bundle.
	bad := writeCatalog(t, pkg)
	err := ValidateErr(opm, bad)
	if err == nil || !strings.Contains(err.Error(), "p.v1.1.0") {
		t.Errorf("broken catalog: %v, want a complaint about p.v1.1.0", err)
	}

	if err := serveErr(opm, good); err != nil {
		t.Error(err)
	}
	cache := t.TempDir()
	if err := CacheOnly(opm, good, cache); err != nil {
		t.Fatal(err)
	}
	if err := serveErr(opm, good, "--cache-dir", cache); err != nil {
		t.Error(err)
	}
	if err := serveErr(opm, bad); err == nil || !strings.Contains(err.Error(), "exited before serving") {
		t.Errorf("serving a broken catalog: %v", err)
	}
}

func TestFindHonoursEnv(t *testing.T) {
	t.Setenv("GAPMIRROR_OPM", filepath.Join(t.TempDir(), "missing-opm"))
	if _, err := Find(); err == nil || !strings.Contains(err.Error(), "GAPMIRROR_OPM=") {
		t.Errorf("Find with a missing $GAPMIRROR_OPM: %v", err)
	}
	exe := filepath.Join(t.TempDir(), "opm")
	if err := os.WriteFile(exe, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GAPMIRROR_OPM", exe)
	if p, err := Find(); err != nil || p != exe {
		t.Errorf("Find = %q, %v; want %q", p, err, exe)
	}
}
