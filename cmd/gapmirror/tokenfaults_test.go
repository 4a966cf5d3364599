package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// TestAnonymous404: registries that let /v2/ in without credentials and
// answer 404 for their private repositories to requests without them
// (HideFromAnonymous; a token upstream over TLS, a basic-auth mirror),
// instead of a 401 challenge. An image the auth file has credentials for
// is asked for again with them before it counts as absent: every trip, on
// the source and the destination side, meets hidden answers and mirrors
// every image, checked by digest. Credentials scoped to a namespace of the
// mirror (an auth file entry host/namespace), and a mirror registries.conf
// marks insecure (no TLS flag), work the same. Without
// credentials the run fails at once, the image reported not found with how
// to log in.
func TestAnonymous404(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{TLS: true, Username: "pusher", Password: upPush, HideFromAnonymous: true,
		Token: &registrytest.TokenAuth{Users: []registrytest.TokenUser{{Username: "puller", Password: upPull, Actions: []string{"pull"}}}}})
	w.upUser, w.upPassword = "pusher", upPush
	w.dst = registrytest.Start(t, registrytest.Options{Username: "admin", Password: dstAdmin, HideFromAnonymous: true})
	w.pushFleetTo(w.upTarget(), 5, 16<<10)
	w.setAuth(login{w.up.Host(), "puller", upPull, ""}, login{w.dst.Host(), "admin", dstAdmin, ""})
	isc := w.isc("")

	// hides runs a trip and checks that the registries of the sides it
	// reaches hid something from it, which it then read or wrote anyway.
	hides := func(name string, regs []*registrytest.Registry, args ...string) (stdout string) {
		t.Helper()
		before := make([]int64, len(regs))
		for i, reg := range regs {
			before[i] = reg.HiddenAnswers()
		}
		code, stdout, _ := w.gapmirror(append([]string{"mirror"}, args...)...)
		if code != 0 {
			t.Fatalf("%s failed", name)
		}
		for i, reg := range regs {
			if reg.HiddenAnswers() == before[i] {
				t.Errorf("%s: %s answered no request without credentials with 404: the trip did not meet a hidden repository", name, reg.Host())
			}
		}
		return stdout
	}
	ws := "file://" + filepath.Join(w.dir, "ws")
	hides("mirror-to-mirror", []*registrytest.Registry{w.up, w.dst}, "-c", isc, "--workspace", ws, "docker://"+w.dst.Host()+"/m2m")
	w.assertMirrored(w.dst, "m2m")
	// The rerun sees every image at the mirror, although asking without
	// credentials says none is there.
	if stdout := hides("mirror-to-mirror rerun", []*registrytest.Registry{w.dst}, "-c", isc, "--workspace", ws, "docker://"+w.dst.Host()+"/m2m"); !strings.Contains(stdout, "0 copied, 5 already at the destination") {
		t.Errorf("m2m rerun did not find the images at the mirror:\n%s", stdout)
	}
	out := filepath.Join(w.dir, "out")
	hides("mirror-to-disk", []*registrytest.Registry{w.up}, "-c", isc, "file://"+out)
	hides("disk-to-mirror", []*registrytest.Registry{w.dst}, "--from", "file://"+out, "docker://"+w.dst.Host()+"/d2m")
	w.assertMirrored(w.dst, "d2m")

	// No TLS flag, the mirror marked insecure in registries.conf: the same
	// registry client connects (plain HTTP) and asks again with the
	// credentials.
	before := w.dst.HiddenAnswers()
	conf := insecureConf(t, w.dir, w.dst.Host())
	if code, _, _ := runPlain(t, "mirror", "--no-progress", "--registries-conf", conf, "--authfile", w.authFile, "--cache-dir", filepath.Join(w.dir, "cache"),
		"--from", "file://"+out, "docker://"+w.dst.Host()+"/conf"); code != 0 {
		t.Fatal("disk-to-mirror to a mirror registries.conf marks insecure failed")
	}
	if w.dst.HiddenAnswers() == before {
		t.Error("disk-to-mirror to a mirror registries.conf marks insecure met no hidden repository")
	}
	w.assertMirrored(w.dst, "conf")

	// Credentials for a namespace of the mirror only, as `podman login
	// host/namespace` writes them.
	w.setAuth(login{w.up.Host(), "puller", upPull, ""}, login{w.dst.Host() + "/scoped", "admin", dstAdmin, ""})
	hides("disk-to-mirror with credentials for the namespace", []*registrytest.Registry{w.dst}, "--from", "file://"+out, "docker://"+w.dst.Host()+"/scoped")
	w.assertMirrored(w.dst, "scoped")

	// Without credentials for the upstream: not found, with how to log
	// in, after a request or two per image (nothing is retried).
	w.setAuth(login{w.dst.Host(), "admin", dstAdmin, ""})
	before = w.up.HiddenAnswers()
	start := time.Now()
	code, stdout, stderr := w.gapmirror("mirror", "-c", isc, "file://"+filepath.Join(w.dir, "anon"))
	if code == 0 || !strings.Contains(stdout+stderr, w.images[0].Repo) || !strings.Contains(stdout+stderr, "podman login "+w.up.Host()) {
		t.Errorf("without credentials for the upstream: exit %d, want a failure naming %s and how to log in", code, w.images[0].Repo)
	}
	if n := w.up.HiddenAnswers() - before; n == 0 || n > 2*int64(len(w.images)) {
		t.Errorf("without credentials: %d requests answered 404 for %d images, want one or two each", n, len(w.images))
	}
	t.Logf("without credentials: failed in %v", time.Since(start).Round(time.Millisecond))
	// Nor for the mirror: the push fails, saying how to log in.
	w.setAuth(login{w.up.Host(), "puller", upPull, ""})
	code, stdout, stderr = w.gapmirror("mirror", "--from", "file://"+out, "docker://"+w.dst.Host()+"/anon")
	if code == 0 || !strings.Contains(stdout+stderr, "podman login "+w.dst.Host()) {
		t.Errorf("without credentials for the mirror: exit %d, want a failure saying how to log in", code)
	}
}

// expiryWorld is a world whose two registries issue bearer tokens that
// live ttl and refuse them once expired (StrictExpiry): a TLS upstream
// (the fixtures pushed by pusher, read by puller) and a plain-HTTP mirror.
// Its images are tags of one repository, apps/main, each a shared base
// layer and one of its own of layerSize bytes, so that every image of a
// run needs the same token scope on each side; and, first, one more image
// in apps/held, whose blob requests throttledTrip holds.
func expiryWorld(t *testing.T, ttl time.Duration, images int, layerSize int64) *world {
	w := newWorld(t, registrytest.Options{TLS: true, Username: "pusher", Password: upPush,
		Token: &registrytest.TokenAuth{TTL: ttl, StrictExpiry: true, Users: []registrytest.TokenUser{{Username: "puller", Password: upPull, Actions: []string{"pull"}}}}})
	w.upUser, w.upPassword = "pusher", upPush
	w.dst = registrytest.Start(t, registrytest.Options{Username: "admin", Password: dstAdmin,
		Token: &registrytest.TokenAuth{TTL: ttl, StrictExpiry: true}})
	base := imagebuilder.RandomLayer(1, 16<<10)
	for i := range images + 1 {
		// The held image first (the image set is in name order, and
		// apps/held comes before apps/main): its hold overlaps the others'
		// copies.
		repo, tag := "apps/main", fmt.Sprintf("v%d", i)
		if i == 0 {
			repo, tag = "apps/held", "v1"
		}
		img, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{base, imagebuilder.RandomLayer(uint64(100+i), layerSize)}})
		must(t, err)
		must(t, imagebuilder.Push(context.Background(), w.upTarget(), repo, tag, img))
		w.images = append(w.images, example{Ref: w.up.Host() + "/" + repo + ":" + tag, Repo: repo, Tag: tag, Digest: img.Digest})
	}
	w.setAuth(login{w.up.Host(), "puller", upPull, ""}, login{w.dst.Host(), "admin", dstAdmin, ""})
	return w
}

// slowSide is a registry a throttled trip reaches: where the trip's
// repositories are there (prefix), which of its blob requests to hold
// until their tokens expire (match, in apps/held), and the throttle and
// hold put before it.
type slowSide struct {
	name   string
	reg    *registrytest.Registry
	prefix string
	match  func(*http.Request) bool
	th     *registrytest.Throttle
	hold   *registrytest.ExpiryHold
}

// throttledTrip runs gapmirror mirror args, two images at a time, with
// every side's blob bytes paced so that the trip lasts at least last (the
// rate is the bytes the trip moves over last, so a fast machine does not
// shorten it), and holds the first blob request of apps/held on each side
// until its token expired. It checks that the trip succeeded with nothing
// failed and outlived its tokens; that each side refused the held request
// for an expired token (the run got a new token and sent it again, or
// retried the blob); and that each side issued tokens for apps/main,
// which no held request renews, after the trip's first: renewed ahead of
// their expiry, as the images coming later needed the scope again.
func (w *world) throttledTrip(ttl, last time.Duration, sides []slowSide, args ...string) {
	t := w.t
	t.Helper()
	bytes := w.uniqueBytes(w.images, nil)
	rate := max(int64(float64(bytes)/last.Seconds()), 1)
	expired, issuedBefore := make([]int64, len(sides)), make([]int, len(sides))
	for i := range sides {
		s := &sides[i]
		s.th = registrytest.NewThrottle(rate)
		held := "/v2/" + strings.TrimPrefix(s.prefix+"/apps/held/", "/")
		match := s.match
		s.hold = registrytest.NewExpiryHold(1, func(r *http.Request) bool { return match(r) && strings.HasPrefix(r.URL.Path, held) })
		s.reg.SetWrap(registrytest.Chain(s.hold.Wrap, s.th.Wrap))
		expired[i], issuedBefore[i] = s.reg.ExpiredTokens(), len(s.reg.IssuedTokens())
	}
	start := time.Now()
	code, stdout, _ := w.gapmirror(append([]string{"mirror", "--parallel-images", "2"}, args...)...)
	took := time.Since(start)
	for _, s := range sides {
		s.reg.SetWrap(nil)
	}
	if code != 0 {
		t.Fatalf("mirror %v failed", args)
	}
	if !strings.Contains(stdout, " 0 failed") {
		t.Errorf("mirror %v: failures in the summary:\n%s", args, stdout)
	}
	t.Logf("mirror %v: %v for %d bytes of blobs at %d bytes/s", args, took.Round(time.Millisecond), bytes, rate)
	// A token is refused once older than ttl and the registry's leeway of
	// a second: the trip must have outlived one.
	if took < last*9/10 || took <= ttl+time.Second {
		t.Errorf("mirror %v took %v: less than its throttled bytes need (%v), or too short for its tokens to expire", args, took, last)
	}
	for i, s := range sides {
		refused := s.reg.ExpiredTokens() - expired[i]
		if s.hold.Held() != 1 || refused < 1 {
			t.Errorf("mirror %v: the %s registry held %d requests of apps/held until their tokens expired and refused %d for an expired token; want 1 and at least 1", args, s.name, s.hold.Held(), refused)
		}
		if s.th.Bytes() == 0 {
			t.Errorf("mirror %v: no blob bytes went through the %s registry's throttle", args, s.name)
		}
		repo := strings.TrimPrefix(s.prefix+"/apps/main", "/")
		issued := tokensFor(t, s.reg.IssuedTokens()[issuedBefore[i]:], repo)
		if issued < 2 {
			t.Errorf("mirror %v: the %s registry issued %d tokens for %s during the trip: none renewed", args, s.name, issued, repo)
		}
		t.Logf("%s registry: %d tokens for %s; %d requests refused for an expired token, %d held", s.name, issued, repo, refused, s.hold.Held())
	}
}

// tokensFor counts the tokens of issued that grant something on
// repository repo.
func tokensFor(t *testing.T, issued []string, repo string) int {
	t.Helper()
	n := 0
	for _, tok := range issued {
		for _, a := range claims(t, tok).Access {
			if a.Type == "repository" && a.Name == repo {
				n++
				break
			}
		}
	}
	return n
}

// TestExpiringTokensFast: bearer tokens that live two seconds, refused
// once expired, over trips that last several times as long (the registries'
// blob bytes paced through a slow link): disk-to-mirror and
// mirror-to-mirror complete, every image at the mirror by digest. The
// images coming later need the scope of the first ones again, so tokens
// are renewed ahead of their expiry; and one blob request of each side is
// held on its way until its token expired, so each side refuses it and
// the run must get a new token and send again (a read at once, an upload
// by retrying the blob). Twelve images of a 128 KiB layer each: with
// --parallel-images 2 a side moves at most 8 blobs at once, all sharing the
// throttle, so the first layers end after about half the trip and the last
// ones only start then, long after the first token's 2 s (with six images
// every request could start within the first second, and no token needed
// renewing).
//
// What each side covers: both go through gapmirror's own registry client
// (registryapi), which renews a token ahead of its expiry and again on a
// 401 invalid_token: the source reads of mirror-to-mirror (the same reads
// as mirror-to-disk) and the pushes of both trips. containers/image,
// which reads sources where registries.conf names mirrors to try in turn,
// Docker Hub, and the images --secure-policy verifies, counts every token
// as living at least 60 s (docker_client.go, minimumTokenLifetimeSeconds)
// and does not renew on a 401: such a path cannot survive two-second
// tokens, so this test would fail if a trip here went through it for
// longer than a token lives. TestExpiringTokens (make test-long) runs
// one-minute tokens, which it honours.
func TestExpiringTokensFast(t *testing.T) {
	t.Parallel()
	ttl := 2 * time.Second
	w := expiryWorld(t, ttl, 12, 128<<10)
	isc := w.isc("")
	out := "file://" + filepath.Join(w.dir, "out")
	if code, _, _ := w.gapmirror("mirror", "-c", isc, out); code != 0 {
		t.Fatal("mirror-to-disk failed")
	}
	w.throttledTrip(ttl, 6*time.Second, []slowSide{{name: "mirror", reg: w.dst, prefix: "d2m", match: registrytest.MatchBlobUpload}},
		"--from", out, "docker://"+w.dst.Host()+"/d2m")
	w.assertMirrored(w.dst, "d2m")
	w.throttledTrip(ttl, 6*time.Second, []slowSide{
		{name: "upstream", reg: w.up, match: registrytest.MatchBlobGet},
		{name: "mirror", reg: w.dst, prefix: "m2m", match: registrytest.MatchBlobUpload},
	}, "-c", isc, "--workspace", "file://"+filepath.Join(w.dir, "ws"), "docker://"+w.dst.Host()+"/m2m")
	w.assertMirrored(w.dst, "m2m")
}

// TestExpiringTokens: bearer tokens that live one minute (the shortest
// lifetime containers/image honours; Quay and Harbor give five), refused
// once expired, over mirror-to-disk and disk-to-mirror runs that last a
// minute and a half each (the blob bytes paced so: the rate is the bytes
// over the time, whatever the machine's speed). Tokens are renewed ahead
// of their expiry, and each side holds one blob request until its token
// expired, which it refuses. Opt in with GAPMIRROR_LONG_TESTS=1 (make
// test-long): it takes about four minutes.
// TestExpiringTokensFast runs two-second tokens in the default suite.
func TestExpiringTokens(t *testing.T) {
	if os.Getenv("GAPMIRROR_LONG_TESTS") == "" {
		t.Skip("takes minutes: set GAPMIRROR_LONG_TESTS=1 (make test-long)")
	}
	ttl := time.Minute
	w := expiryWorld(t, ttl, 8, 1<<20)
	isc := w.isc("")
	out := "file://" + filepath.Join(w.dir, "out")
	last := ttl * 3 / 2
	w.throttledTrip(ttl, last, []slowSide{{name: "upstream", reg: w.up, match: registrytest.MatchBlobGet}}, "-c", isc, out)
	w.throttledTrip(ttl, last, []slowSide{{name: "mirror", reg: w.dst, prefix: "d2m", match: registrytest.MatchBlobUpload}}, "--from", out, "docker://"+w.dst.Host()+"/d2m")
	w.assertMirrored(w.dst, "d2m")
}

// tokenClaims are the claims of a registry token the tests read.
type tokenClaims struct {
	Access []struct {
		Type, Name string
	} `json:"access"`
}

// claims reads the claims of a JWT.
func claims(t *testing.T, tok string) tokenClaims {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %.10s…", tok)
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	must(t, err)
	var c tokenClaims
	must(t, json.Unmarshal(payload, &c))
	return c
}
