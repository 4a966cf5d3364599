package failure

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gapmirror/gapmirror/registryapi"
)

// TestMessage: each part of a failure once, and no upload token or
// credential in it.
func TestMessage(t *testing.T) {
	err := fmt.Errorf("r/apps/app-0:v9: %w", fmt.Errorf("r/apps/app-0:v9: %w",
		errors.New(`writing blob: uploading layer to https://r/v2/apps/blobs/uploads/abc?_state=c2VjcmV0LXN0YXRl&digest=sha256:1: Authorization: Bearer eyJhbGciOiJSUzI1NiJ9.secret: 500`)))
	got := Message(err)
	if strings.Count(got, "r/apps/app-0:v9") != 1 {
		t.Errorf("repeated prefix: %s", got)
	}
	for _, bad := range []string{"c2VjcmV0LXN0YXRl", "eyJhbGciOiJSUzI1NiJ9"} {
		if strings.Contains(got, bad) {
			t.Errorf("secret %q in %s", bad, got)
		}
	}
	if !strings.Contains(Redact("https://user:hunter2@r/v2/"), "REDACTED") || strings.Contains(Redact("https://user:hunter2@r/v2/"), "hunter2") {
		t.Errorf("password in URL not redacted: %s", Redact("https://user:hunter2@r/v2/"))
	}
}

// TestRedactEveryForm: each form of secret Redact knows is removed, in any
// letter case (its regular expressions run only where a hint is found).
func TestRedactEveryForm(t *testing.T) {
	for _, line := range []string{
		`PATCH https://r/v2/a/blobs/uploads/x?_state=c2VjcmV0LXN0YXRl&digest=sha256:1`,
		`Authorization: Bearer c2VjcmV0LXN0YXRl.c2VjcmV0LXN0YXRl`,
		`proxy-AUTHORIZATION=Basic c2VjcmV0LXN0YXRl`,
		`"Authorization": "c2VjcmV0LXN0YXRl"`,
		`BEARER c2VjcmV0LXN0YXRl`,
		`basic c2VjcmV0LXN0YXRl==`,
		`GET https://auth/token?service=r&ACCESS_TOKEN=c2VjcmV0LXN0YXRl`,
		`GET https://auth/token?scope=x&Password=c2VjcmV0LXN0YXRl`,
		`GET https://auth/token?client_secret=c2VjcmV0LXN0YXRl`,
		`{"auths":{"r":{"Auth":"c2VjcmV0LXN0YXRl"}}}`,
		`{"IdentityToken": "c2VjcmV0LXN0YXRl"}`,
		`{"refresh_token":"c2VjcmV0LXN0YXRl"}`,
		`{"password":"c2VjcmV0LXN0YXRl"}`,
		`https://user:c2VjcmV0LXN0YXRl@r/v2/`,
	} {
		if got := Redact(line); strings.Contains(got, "c2VjcmV0LXN0YXRl") || !strings.Contains(got, "REDACTED") {
			t.Errorf("Redact(%s) = %s", line, got)
		}
	}
	if plain := "INFO copying 22/22 images, blobs 56/56 registry=127.0.0.1:5000 repo=apps/app"; Redact(plain) != plain {
		t.Errorf("a line without secrets changed: %s", Redact(plain))
	}
}

// TestHiddenRepositoryHintOnce: a 404 asked without credentials says how
// to log in once, in the answer, not again in the fix.
func TestHiddenRepositoryHintOnce(t *testing.T) {
	answer := &registryapi.Error{Method: "GET", URL: "https://r.example/v2/team/app/manifests/v1", Status: 404, Codes: []string{"NAME_UNKNOWN"},
		Hint: "asked without credentials, as none are configured for r.example; a registry that hides private repositories from anonymous requests answers them so: if this one is private, log in (podman login r.example) or pass --authfile"}
	got := Message(Explain(answer, "r.example/team/app:v1"))
	if n := strings.Count(got, "podman login"); n != 1 {
		t.Errorf("the login advice %d times, want once: %s", n, got)
	}
	if !strings.Contains(got, "check the name in the configuration") {
		t.Errorf("the not-found fix is missing: %s", got)
	}
}
