package main

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// TestAnonymous404: registries that answer requests without credentials
// with 404 (hiding private repositories) instead of a 401 challenge: an
// image the auth file has credentials for is asked for again with them
// before it counts as absent, on both sides and in all three trips.
func TestAnonymous404(t *testing.T) {
	w := newWorld(t, registrytest.Options{TLS: true, Username: "pusher", Password: upPush, HideFromAnonymous: true,
		Token: &registrytest.TokenAuth{Users: []registrytest.TokenUser{{Username: "puller", Password: upPull, Actions: []string{"pull"}}}}})
	w.upUser, w.upPassword = "pusher", upPush
	w.dst = registrytest.Start(t, registrytest.Options{Username: "admin", Password: dstAdmin, HideFromAnonymous: true, Token: &registrytest.TokenAuth{}})
	w.pushFleetTo(w.upTarget(), 5, 16<<10)
	w.setAuth(login{w.up.Host(), "puller", upPull, ""}, login{w.dst.Host(), "admin", dstAdmin, ""})
	isc := w.isc("")
	if code, _, _ := w.gapmirror("mirror", "-c", isc, "--workspace", "file://"+filepath.Join(w.dir, "ws"), "docker://"+w.dst.Host()+"/m2m"); code != 0 {
		t.Fatal("m2m failed")
	}
	w.assertMirrored(w.dst, "m2m")
	// The rerun sees every image at the mirror, although asking without
	// credentials says it is not there.
	code, stdout, _ := w.gapmirror("mirror", "-c", isc, "--workspace", "file://"+filepath.Join(w.dir, "ws"), "docker://"+w.dst.Host()+"/m2m")
	if code != 0 || !strings.Contains(stdout, "0 copied, 5 already at the destination") {
		t.Errorf("m2m rerun: exit %d, stdout:\n%s", code, stdout)
	}
	// gapmirror's own client answers the /v2/ challenge before the first
	// request, so it may send no anonymous request at all; containers/image
	// (source reads) asks anonymously first and retries with credentials.
	out := filepath.Join(w.dir, "out")
	if code, _, _ := w.gapmirror("mirror", "-c", isc, "file://"+out); code != 0 {
		t.Fatal("m2d failed")
	}
	if code, _, _ := w.gapmirror("mirror", "--from", "file://"+out, "docker://"+w.dst.Host()+"/d2m"); code != 0 {
		t.Fatal("d2m failed")
	}
	w.assertMirrored(w.dst, "d2m")
	t.Logf("anonymous requests answered 404: upstream %d, mirror %d", w.up.HiddenAnswers(), w.dst.HiddenAnswers())

	// Without credentials for the upstream the image is absent, and the
	// error says so.
	w.setAuth(login{w.dst.Host(), "admin", dstAdmin, ""})
	var stderr string
	code, stdout, stderr = w.gapmirror("mirror", "-c", isc, "file://"+filepath.Join(w.dir, "anon"))
	if code == 0 || !strings.Contains(stdout, w.images[0].Repo) || !strings.Contains(stderr, "--authfile") {
		t.Errorf("without credentials: exit %d, stderr:\n%s", code, stderr)
	}
}

// TestExpiringTokens: bearer tokens that live one minute (the shortest
// lifetime containers/image honours; Quay and Harbor give five) and that
// the registries refuse once expired, over pushes that last longer: every
// trip completes, renewing its tokens (mirror-to-mirror uses the same
// clients as the two halves). Opt in with GAPMIRROR_LONG_TESTS=1
// (make test-long): it takes about three minutes.
func TestExpiringTokens(t *testing.T) {
	if os.Getenv("GAPMIRROR_LONG_TESTS") == "" {
		t.Skip("takes minutes: set GAPMIRROR_LONG_TESTS=1 (make test-long)")
	}
	ttl := time.Minute
	w := newWorld(t, registrytest.Options{TLS: true, Username: "pusher", Password: upPush,
		Token: &registrytest.TokenAuth{TTL: ttl, StrictExpiry: true, Users: []registrytest.TokenUser{{Username: "puller", Password: upPull, Actions: []string{"pull"}}}}})
	w.upUser, w.upPassword = "pusher", upPush
	w.dst = registrytest.Start(t, registrytest.Options{Username: "admin", Password: dstAdmin,
		Token: &registrytest.TokenAuth{TTL: ttl, StrictExpiry: true}})
	w.pushFleetTo(w.upTarget(), 8, 64<<10)
	w.setAuth(login{w.up.Host(), "puller", upPull, ""}, login{w.dst.Host(), "admin", dstAdmin, ""})
	isc := w.isc("")
	// Each blob takes a while on both sides, so each run outlives its first tokens.
	delay := func(d time.Duration) func(h http.Handler) http.Handler {
		return func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
				if _, _, ok := registrytest.BlobPath(r.URL.Path); ok || strings.Contains(r.URL.Path, "/blobs/uploads/") {
					time.Sleep(d)
				}
				next.ServeHTTP(rw, r)
			})
		}
	}
	w.up.SetWrap(delay(4 * time.Second))
	w.dst.SetWrap(delay(750 * time.Millisecond))
	out := "file://" + filepath.Join(w.dir, "out")
	for i, trip := range [][]string{{"-c", isc, out}, {"--from", out, "docker://" + w.dst.Host() + "/d2m"}} {
		reg := []*registrytest.Registry{w.up, w.dst}[i]
		start := time.Now()
		code, _, _ := w.gapmirror(append([]string{"mirror", "--parallel-images", "1", "--parallel-layers", "1"}, trip...)...)
		if code != 0 {
			t.Fatalf("mirror %v failed", trip)
		}
		if d := time.Since(start); d < ttl+5*time.Second {
			t.Errorf("mirror %v took %v, not long enough for its tokens to expire", trip, d)
		}
		renewed := 0
		for _, tok := range reg.IssuedTokens() {
			if issuedAt(t, tok).After(start.Add(ttl - time.Second)) {
				renewed++
			}
		}
		if renewed == 0 {
			t.Errorf("mirror %v: no token was issued after the first ones expired", trip)
		}
	}
	w.up.SetWrap(nil)
	w.dst.SetWrap(nil)
	w.assertMirrored(w.dst, "d2m")
	t.Logf("requests refused for an expired token: upstream %d, mirror %d", w.up.ExpiredTokens(), w.dst.ExpiredTokens())
}

// issuedAt reads the iat claim of a JWT.
func issuedAt(t *testing.T, tok string) time.Time {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %.10s…", tok)
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	must(t, err)
	var claims struct {
		IssuedAt int64 `json:"iat"`
	}
	must(t, json.Unmarshal(payload, &claims))
	return time.Unix(claims.IssuedAt, 0)
}
