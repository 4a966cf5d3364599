package registryapi

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.podman.io/image/v5/types"

	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// TestClientContainersConventions: with TLS verification left undecided the
// client follows the containers configuration as skopeo does: a TLS
// registry is trusted through its certs.d directory (<dir>/<host:port>/ca.crt),
// a plain-HTTP one only when registries.conf marks it insecure, and an
// explicit setting overrides the file. Every request carries the configured
// User-Agent.
func TestClientContainersConventions(t *testing.T) {
	var mu sync.Mutex
	agents := map[string]bool{}
	record := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			agents[r.UserAgent()] = true
			mu.Unlock()
			next.ServeHTTP(w, r)
		})
	}
	tlsReg := registrytest.Start(t, registrytest.Options{TLS: true, Wrap: record})
	plain := registrytest.Start(t, registrytest.Options{Wrap: record})
	ctx := context.Background()
	img, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(1, 512)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*registrytest.Registry{tlsReg, plain} {
		if err := imagebuilder.Push(ctx, imagebuilder.Target{URL: r.URL(), Client: r.Client()}, "apps/a", "v1", img); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	certs := filepath.Join(dir, "certs.d")
	if err := os.MkdirAll(filepath.Join(certs, tlsReg.Host()), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(certs, tlsReg.Host(), "ca.crt"), tlsReg.CAPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "registries.conf")
	if err := os.WriteFile(conf, []byte("[[registry]]\nlocation = \""+plain.Host()+"\"\ninsecure = true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.conf")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	sys := func(conf string, verify types.OptionalBool) *types.SystemContext {
		return &types.SystemContext{AuthFilePath: filepath.Join(dir, "none.json"), SystemRegistriesConfPath: conf,
			DockerPerHostCertDirPath: certs, DockerRegistryUserAgent: "gapmirror/test", DockerInsecureSkipTLSVerify: verify}
	}
	for _, c := range []struct {
		name    string
		reg     *registrytest.Registry
		sys     *types.SystemContext
		wantErr string
	}{
		{"TLS, CA from certs.d", tlsReg, sys(empty, types.OptionalBoolUndefined), ""},
		{"plain HTTP marked insecure", plain, sys(conf, types.OptionalBoolUndefined), ""},
		{"plain HTTP not marked", plain, sys(empty, types.OptionalBoolUndefined), "HTTP response to HTTPS client"},
		{"marked insecure, verification forced", plain, sys(conf, types.OptionalBoolFalse), "HTTP response to HTTPS client"},
		{"not marked, verification off", plain, sys(empty, types.OptionalBoolTrue), ""},
	} {
		cl, err := NewClient(c.reg.Host(), c.sys)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		d, _, err := cl.Head(ctx, "apps/a", "v1")
		switch {
		case c.wantErr == "" && (err != nil || d != img.Digest):
			t.Errorf("%s: HEAD = %s, %v; want %s", c.name, d, err, img.Digest)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%s: HEAD error %v, want %q", c.name, err, c.wantErr)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !agents["gapmirror/test"] {
		t.Errorf("no request carried the configured User-Agent; saw %v", agents)
	}
	for a := range agents {
		if strings.HasPrefix(a, "gapmirror") && a != "gapmirror/test" {
			t.Errorf("request with User-Agent %q, want gapmirror/test", a)
		}
	}
}
