package registrytest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/docker/distribution/registry/client/auth/challenge"

	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// TestHideFromAnonymous: without credentials the registry looks open (/v2/
// answers 200 with no challenge) and empty (404 NAME_UNKNOWN for an image
// that is there, an empty catalog); with them, basic or token, the image
// is there. Only the hidden answers are counted.
func TestHideFromAnonymous(t *testing.T) {
	for name, opts := range map[string]registrytest.Options{
		"basic": {Username: "alice", Password: "s3cret", HideFromAnonymous: true},
		"token": {Username: "alice", Password: "s3cret", HideFromAnonymous: true, Token: &registrytest.TokenAuth{}},
	} {
		t.Run(name, func(t *testing.T) {
			reg := registrytest.Start(t, opts)
			img := smallImage(t, 23)
			if err := imagebuilder.Push(context.Background(), target(reg, "alice", "s3cret"), "private/app", "v1", img); err != nil {
				t.Fatalf("Push with credentials: %v", err)
			}
			if n := reg.HiddenAnswers(); n != 0 {
				t.Fatalf("a push with credentials got %d hidden answers", n)
			}
			status, h, _ := get(t, reg, http.MethodGet, reg.URL()+"/v2/", nil)
			if status != http.StatusOK || len(challenge.ResponseChallenges(&http.Response{StatusCode: status, Header: h})) != 0 {
				t.Errorf("anonymous /v2/: %d %v, want 200 without a challenge", status, h.Values("WWW-Authenticate"))
			}
			for _, method := range []string{http.MethodGet, http.MethodHead} {
				status, _, body := get(t, reg, method, reg.URL()+"/v2/private/app/manifests/v1", http.Header{"Accept": {img.MediaType}})
				if status != http.StatusNotFound || method == http.MethodGet && !strings.Contains(string(body), "NAME_UNKNOWN") {
					t.Errorf("anonymous %s of the manifest: %d %s", method, status, body)
				}
			}
			status, _, body := get(t, reg, http.MethodGet, reg.URL()+"/v2/_catalog", nil)
			var catalog struct{ Repositories []string }
			if status != http.StatusOK || json.Unmarshal(body, &catalog) != nil || len(catalog.Repositories) != 0 {
				t.Errorf("anonymous catalog: %d %s", status, body)
			}
			if n := reg.HiddenAnswers(); n != 3 {
				t.Errorf("HiddenAnswers = %d, want 3", n)
			}

			// With credentials: basic directly, or the token the challenge
			// to a basic attempt leads to.
			auth := http.Header{"Accept": {img.MediaType}}
			if opts.Token == nil {
				auth.Set("Authorization", "Basic YWxpY2U6czNjcmV0")
			} else {
				_, tok := tokenFor(t, reg, "alice", "s3cret", "repository:private/app:pull")
				auth.Set("Authorization", "Bearer "+tok)
			}
			if status, h, _ := get(t, reg, http.MethodGet, reg.URL()+"/v2/private/app/manifests/v1", auth); status != http.StatusOK || h.Get("Docker-Content-Digest") != img.Digest.String() {
				t.Errorf("with credentials: %d %s", status, h.Get("Docker-Content-Digest"))
			}
			// Wrong credentials meet the registry's challenge, not a 404.
			status, h, _ = get(t, reg, http.MethodGet, reg.URL()+"/v2/private/app/manifests/v1", http.Header{"Authorization": {"Basic YWxpY2U6bm9wZQ=="}})
			if status != http.StatusUnauthorized || h.Get("WWW-Authenticate") == "" {
				t.Errorf("wrong credentials: %d %v", status, h.Values("WWW-Authenticate"))
			}
			if n := reg.HiddenAnswers(); n != 3 {
				t.Errorf("HiddenAnswers = %d after requests with credentials, want 3", n)
			}
		})
	}
}
