package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/distribution/distribution/v3/configuration"

	"github.com/gapmirror/gapmirror/internal/s3fake"
)

// s3Config writes a distribution configuration for bucket of s (with the
// given endpoint and secret key, when not empty) and returns its path.
func s3Config(t *testing.T, s *s3fake.Server, bucket, endpoint, secretKey, httpSecret string) string {
	t.Helper()
	if endpoint == "" {
		endpoint = s.Endpoint
	}
	if secretKey == "" {
		secretKey = s.SecretKey
	}
	conf := "version: 0.1\n"
	if httpSecret != "" {
		conf += "http:\n  secret: " + httpSecret + "\n"
	}
	conf += fmt.Sprintf("storage:\n  s3:\n    region: %s\n    regionendpoint: %s\n    forcepathstyle: true\n    bucket: %s\n    accesskey: %s\n    secretkey: %s\n    rootdirectory: /registry\n  redirect:\n    disable: true\n",
		s3fake.Region, endpoint, bucket, s.AccessKey, secretKey)
	f := filepath.Join(t.TempDir(), "registry.yml")
	if err := os.WriteFile(f, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestServeS3Refusals: serve checks object storage at start and says what
// is wrong, naming the bucket and endpoint: a bucket that does not exist,
// a secret key the store refuses, an endpoint nobody answers at; nothing
// is served then. A second replica with another http.secret is refused
// while the first runs (an upload could not cross them), as is serve gc;
// once the replica stopped its lease is gone and gc runs. A lease left by
// a replica killed without stopping keeps gc off until it expires.
func TestServeS3Refusals(t *testing.T) {
	s, err := s3fake.Start("mirror")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nobody := "http://" + ln.Addr().String()
	_ = ln.Close()
	for _, c := range []struct {
		name, conf string
		want       []string
	}{
		{"wrong bucket", s3Config(t, s, "mirorr", "", "", ""), []string{`s3 bucket "mirorr" at ` + s.Endpoint, "NoSuchBucket", "the bucket (or container) does not exist: create it, or correct its name"}},
		{"wrong secret key", s3Config(t, s, "mirror", "", "not-the-secret", ""), []string{`s3 bucket "mirror" at ` + s.Endpoint, "SignatureDoesNotMatch", "the store refused the credentials"}},
		{"unreachable endpoint", s3Config(t, s, "mirror", nobody, "", ""), []string{`s3 bucket "mirror" at ` + nobody, "the store's endpoint cannot be reached: check regionendpoint"}},
	} {
		start := time.Now()
		srv, err := New(ctx, Options{Root: t.TempDir(), Address: "127.0.0.1:0", PlainHTTP: true, RegistryConfig: c.conf})
		if err == nil {
			_ = srv.Shutdown(ctx)
			t.Errorf("%s: serve started", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: the error does not say %q:\n%v", c.name, w, err)
			}
		}
		t.Logf("%s (%v): %v", c.name, time.Since(start).Round(time.Millisecond), err)
	}
	if keys, _ := s.Objects("mirror", ""); len(keys) != 0 {
		t.Errorf("refused starts left objects in the bucket: %v", keys)
	}

	conf := s3Config(t, s, "mirror", "", "", "shared-secret-1")
	srv := startPlain(t, Options{RegistryConfig: conf})
	keys, _ := s.Objects("mirror", "registry/gapmirror/leases/")
	if len(keys) != 1 {
		t.Fatalf("leases of one running replica: %v", keys)
	}
	other := s3Config(t, s, "mirror", "", "", "shared-secret-2")
	if srv2, err := New(ctx, Options{Root: t.TempDir(), Address: "127.0.0.1:0", PlainHTTP: true, RegistryConfig: other}); err == nil {
		_ = srv2.Shutdown(ctx)
		t.Error("a replica with another http.secret started")
	} else if !strings.Contains(err.Error(), "runs with another http.secret: an upload started on one replica would fail on the other; give every replica the same http.secret") {
		t.Errorf("replica with another http.secret: %v", err)
	}
	// A configuration without http.secret: the replica makes one up, and says so.
	if srv2, err := New(ctx, Options{Root: t.TempDir(), Address: "127.0.0.1:0", PlainHTTP: true, RegistryConfig: s3Config(t, s, "mirror", "", "", "")}); err == nil {
		_ = srv2.Shutdown(ctx)
		t.Error("a replica without http.secret started next to one with")
	} else if !strings.Contains(err.Error(), "has no http.secret, so this replica made up its own") {
		t.Errorf("replica without http.secret: %v", err)
	}
	same := startPlain(t, Options{RegistryConfig: conf})
	if _, err := CollectGarbage(ctx, GCOptions{Root: t.TempDir(), RegistryConfig: conf}); err == nil || !strings.Contains(err.Error(), "in use by a running gapmirror serve on ") || !strings.Contains(err.Error(), "stop every replica serving this storage first") {
		t.Errorf("gc while two replicas run: %v", err)
	}
	for _, r := range []*Server{srv, same} {
		if err := r.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if keys, _ := s.Objects("mirror", "registry/gapmirror/leases/"); len(keys) != 0 {
		t.Errorf("leases left by stopped replicas: %v", keys)
	}
	res, err := CollectGarbage(ctx, GCOptions{Root: t.TempDir(), RegistryConfig: conf})
	if err != nil || !res.NothingPushed {
		t.Errorf("gc once the replicas stopped: %+v, %v", res, err)
	}

	// A replica killed without stopping: its lease stays until it expires.
	d, err := openStorage(ctx, mustParse(t, conf), "test")
	if err != nil {
		t.Fatal(err)
	}
	killed := lease{Kind: "serve", Host: "gone.example", PID: 4242, Started: time.Now().Add(-time.Hour), Renewed: time.Now(), Expires: time.Now().Add(time.Minute)}
	data, _ := json.Marshal(killed)
	if err := d.PutContent(ctx, leaseDir+"/serve-gone", data); err != nil {
		t.Fatal(err)
	}
	if _, err := CollectGarbage(ctx, GCOptions{Root: t.TempDir(), RegistryConfig: conf}); err == nil || !strings.Contains(err.Error(), "gapmirror serve on gone.example (pid 4242") {
		t.Errorf("gc with the lease of a killed replica: %v", err)
	}
	killed.Expires = time.Now().Add(-time.Second)
	data, _ = json.Marshal(killed)
	if err := d.PutContent(ctx, leaseDir+"/serve-gone", data); err != nil {
		t.Fatal(err)
	}
	if _, err := CollectGarbage(ctx, GCOptions{Root: t.TempDir(), RegistryConfig: conf}); err != nil {
		t.Errorf("gc once the killed replica's lease expired: %v", err)
	}
}

func mustParse(t *testing.T, file string) *configuration.Configuration {
	t.Helper()
	cfg, _, err := parseConfiguration("", file)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
