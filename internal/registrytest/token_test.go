package registrytest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/docker/distribution/registry/client/auth/challenge"
	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// tokenFor asks reg's token server for scope as user (no credentials when
// user is empty) and returns the status and the token.
func tokenFor(t *testing.T, reg *registrytest.Registry, user, pass, scope string) (int, string) {
	t.Helper()
	q := url.Values{"service": {"registrytest"}, "scope": {scope}}
	req, _ := http.NewRequest(http.MethodGet, reg.TokenRealm()+"?"+q.Encode(), nil)
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := reg.Client().Do(req)
	if err != nil {
		t.Fatalf("token request: %v", err)
	}
	defer resp.Body.Close()
	var body struct {
		Token string `json:"token"`
	}
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Token == "" {
			t.Fatalf("token answer: %v, token %q", err, body.Token)
		}
	}
	return resp.StatusCode, body.Token
}

// TestTokenAuth: the registry wants bearer tokens from its token server,
// which checks passwords and grants each user its own actions.
func TestTokenAuth(t *testing.T) {
	for _, tls := range []bool{false, true} {
		t.Run(map[bool]string{false: "http", true: "https"}[tls], func(t *testing.T) { testTokenAuth(t, tls) })
	}
}

func testTokenAuth(t *testing.T, tls bool) {
	reg := registrytest.Start(t, registrytest.Options{TLS: tls, Username: "alice", Password: "s3cret",
		Token: &registrytest.TokenAuth{Users: []registrytest.TokenUser{{Username: "reader", Password: "r3ad", Actions: []string{"pull"}}}}})
	if want := map[bool]string{false: "http://", true: "https://"}[tls]; !strings.HasPrefix(reg.TokenRealm(), want) {
		t.Fatalf("TokenRealm %q, want %s…", reg.TokenRealm(), want)
	}

	// The registry answers a Bearer challenge naming the realm and service.
	status, header, _ := get(t, reg, http.MethodGet, reg.URL()+"/v2/secure/app/tags/list", nil)
	resp := &http.Response{StatusCode: status, Header: header}
	cs := challenge.ResponseChallenges(resp)
	if status != http.StatusUnauthorized || len(cs) != 1 || cs[0].Scheme != "bearer" ||
		cs[0].Parameters["realm"] != reg.TokenRealm() || cs[0].Parameters["service"] != "registrytest" ||
		cs[0].Parameters["scope"] != "repository:secure/app:pull" {
		t.Fatalf("unauthenticated: %d %v", status, header.Values("WWW-Authenticate"))
	}

	// Passwords are checked; anonymous requests get a token allowing nothing.
	if code, _ := tokenFor(t, reg, "alice", "nope", "repository:secure/app:pull"); code != http.StatusUnauthorized {
		t.Errorf("wrong password: token server answered %d", code)
	}
	if code, _ := tokenFor(t, reg, "mallory", "s3cret", "repository:secure/app:pull"); code != http.StatusUnauthorized {
		t.Errorf("unknown user: token server answered %d", code)
	}
	_, anon := tokenFor(t, reg, "", "", "repository:secure/app:pull")
	if status, _, _ := get(t, reg, http.MethodGet, reg.URL()+"/v2/secure/app/tags/list", http.Header{"Authorization": {"Bearer " + anon}}); status != http.StatusUnauthorized {
		t.Errorf("anonymous token: %d, want 401", status)
	}

	// The full user pushes (with a cross-repository mount), the reader
	// pulls and may not push.
	ctx := context.Background()
	img := smallImage(t, 11)
	for _, repo := range []string{"secure/app", "secure/other"} {
		if err := imagebuilder.Push(ctx, target(reg, "alice", "s3cret"), repo, "v1", img); err != nil {
			t.Fatalf("Push as alice: %v", err)
		}
		if got, err := reg.ManifestDigest(repo, "v1"); err != nil || got != img.Digest {
			t.Fatalf("ManifestDigest = %s, %v", got, err)
		}
	}
	_, pull := tokenFor(t, reg, "reader", "r3ad", "repository:secure/app:pull,push,delete")
	status, _, body := get(t, reg, http.MethodGet, reg.URL()+"/v2/secure/app/manifests/v1", http.Header{
		"Authorization": {"Bearer " + pull}, "Accept": {img.MediaType}})
	if status != http.StatusOK || string(body) != string(img.Manifest) {
		t.Errorf("reader pulling: %d", status)
	}
	status, header, _ = get(t, reg, http.MethodDelete, reg.URL()+"/v2/secure/app/manifests/"+img.Digest.String(), http.Header{"Authorization": {"Bearer " + pull}})
	if status != http.StatusUnauthorized || !strings.Contains(header.Get("WWW-Authenticate"), "insufficient_scope") {
		t.Errorf("reader deleting: %d %q, want 401 insufficient_scope", status, header.Get("WWW-Authenticate"))
	}
	err := imagebuilder.Push(ctx, target(reg, "reader", "r3ad"), "secure/third", "v1", smallImage(t, 13))
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("Push as reader: %v, want a 401", err)
	}
	_, full := tokenFor(t, reg, "alice", "s3cret", "repository:secure/app:*")
	status, _, _ = get(t, reg, http.MethodDelete, reg.URL()+"/v2/secure/app/manifests/"+img.Digest.String(), http.Header{"Authorization": {"Bearer " + full}})
	if status != http.StatusAccepted {
		t.Errorf("alice deleting with a \"*\" token: %d", status)
	}
	if n := len(reg.IssuedTokens()); n < 4 {
		t.Errorf("IssuedTokens has %d tokens", n)
	}
}

// TestTokenAnonymousPull: with AnonymousPull, a token requested without
// credentials pulls and still may not push.
func TestTokenAnonymousPull(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{Username: "alice", Password: "s3cret",
		Token: &registrytest.TokenAuth{AnonymousPull: true, TTL: time.Minute}})
	img := smallImage(t, 17)
	if err := imagebuilder.Push(context.Background(), target(reg, "alice", "s3cret"), "public/app", "v1", img); err != nil {
		t.Fatalf("Push: %v", err)
	}
	_, anon := tokenFor(t, reg, "", "", "repository:public/app:pull,push")
	status, _, _ := get(t, reg, http.MethodHead, reg.URL()+"/v2/public/app/manifests/v1", http.Header{"Authorization": {"Bearer " + anon}, "Accept": {img.MediaType}})
	if status != http.StatusOK {
		t.Errorf("anonymous pull: %d", status)
	}
	err := imagebuilder.Push(context.Background(), target(reg, "", ""), "public/app", "v2", smallImage(t, 19))
	if err == nil {
		t.Error("anonymous push succeeded")
	}
}

// TestStrictExpiry: with StrictExpiry the registry refuses a token past its
// expiry with 401 invalid_token and a fresh challenge, also behind a
// wrapper; ExpiryHold makes a request outlive its token (each blob once),
// and a new token goes through.
func TestStrictExpiry(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{Username: "alice", Password: "s3cret",
		Token: &registrytest.TokenAuth{TTL: time.Second, StrictExpiry: true}})
	img := smallImage(t, 29)
	if err := imagebuilder.Push(context.Background(), target(reg, "alice", "s3cret"), "strict/app", "v1", img); err != nil {
		t.Fatalf("Push: %v", err)
	}
	hold := registrytest.NewExpiryHold(1, registrytest.MatchBlobGet)
	reg.SetWrap(hold.Wrap)
	blob := reg.URL() + "/v2/strict/app/blobs/" + img.Layers[0].Digest.String()
	_, tok := tokenFor(t, reg, "alice", "s3cret", "repository:strict/app:pull")
	bearer := http.Header{"Authorization": {"Bearer " + tok}}
	if status, _, _ := get(t, reg, http.MethodHead, reg.URL()+"/v2/strict/app/manifests/v1", http.Header{"Authorization": {"Bearer " + tok}, "Accept": {img.MediaType}}); status != http.StatusOK {
		t.Fatalf("a fresh token: %d", status)
	}
	start := time.Now()
	status, h, _ := get(t, reg, http.MethodGet, blob, bearer)
	if status != http.StatusUnauthorized || !strings.Contains(h.Get("WWW-Authenticate"), `error="invalid_token"`) || !strings.Contains(h.Get("WWW-Authenticate"), reg.TokenRealm()) {
		t.Errorf("held past its token's expiry: %d %q", status, h.Get("WWW-Authenticate"))
	}
	if d := time.Since(start); d < time.Second {
		t.Errorf("the held request was answered after %v, before its token could expire", d)
	}
	if hold.Held() != 1 || reg.ExpiredTokens() != 1 {
		t.Errorf("held %d, refused %d; want 1 and 1", hold.Held(), reg.ExpiredTokens())
	}
	// The blob is not held again; the expired token is still refused, a new one is not.
	if status, _, _ := get(t, reg, http.MethodGet, blob, bearer); status != http.StatusUnauthorized || reg.ExpiredTokens() != 2 {
		t.Errorf("the expired token again: %d, %d refused", status, reg.ExpiredTokens())
	}
	_, fresh := tokenFor(t, reg, "alice", "s3cret", "repository:strict/app:pull")
	status, _, body := get(t, reg, http.MethodGet, blob, http.Header{"Authorization": {"Bearer " + fresh}})
	if status != http.StatusOK || digest.FromBytes(body) != img.Layers[0].Digest {
		t.Errorf("a new token: %d", status)
	}
	if hold.Held() != 1 {
		t.Errorf("held %d requests, want 1", hold.Held())
	}
}
