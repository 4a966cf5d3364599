package registryapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	"go.podman.io/image/v5/types"

	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// TestRegistryClient: the client lists tags across pages, looks up
// and deletes manifests and tags on a real registry over TLS with basic
// auth and with bearer tokens from a token server (on another port, with
// the same certificate), using the same auth file and certificate directory
// as the copies.
func TestRegistryClient(t *testing.T) {
	for name, opts := range map[string]registrytest.Options{
		"basic": {TLS: true, Username: "alice", Password: "s3cret"},
		"token": {TLS: true, Username: "alice", Password: "s3cret", Token: &registrytest.TokenAuth{}},
	} {
		t.Run(name, func(t *testing.T) { testRegistryClient(t, opts) })
	}
}

func testRegistryClient(t *testing.T, opts registrytest.Options) {
	reg := registrytest.Start(t, opts)
	ctx := context.Background()
	target := imagebuilder.Target{URL: reg.URL(), Client: reg.Client(), Username: "alice", Password: "s3cret"}
	img, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(1, 1024)}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 1203 // more than one page of tags
	for i := 0; i < n; i++ {
		if i == 0 {
			err = imagebuilder.Push(ctx, target, "ns/app", fmt.Sprintf("t%04d", i), img)
		} else {
			err = imagebuilder.PushManifest(ctx, target, "ns/app", fmt.Sprintf("t%04d", i), img.MediaType, img.Manifest)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	c, err := NewClient(reg.Host(), &types.SystemContext{AuthFilePath: reg.AuthFile(), DockerCertPath: reg.CertsDir()})
	if err != nil {
		t.Fatal(err)
	}
	tags, err := c.Tags(ctx, "ns/app")
	if err != nil || len(tags) != n {
		t.Fatalf("tags: %d, %v; want %d", len(tags), err, n)
	}
	// The catalog, from just before a prefix to its end.
	for _, repo := range []string{"ns/b", "nt/a", "n/a", "ns-x/a"} {
		if err := imagebuilder.Push(ctx, target, repo, "v1", img); err != nil {
			t.Fatal(err)
		}
	}
	if repos, err := c.Catalog(ctx, "ns/", 10); err != nil || strings.Join(repos, " ") != "ns/app ns/b" {
		t.Errorf("catalog under ns/: %v, %v", repos, err)
	}
	if repos, err := c.Catalog(ctx, "", 10); err != nil || len(repos) != 5 {
		t.Errorf("whole catalog: %v, %v", repos, err)
	}
	d, mt, err := c.Head(ctx, "ns/app", "t0007")
	if err != nil || d != img.Digest || !strings.Contains(mt, "manifest") {
		t.Fatalf("head: %s %s %v; want %s", d, mt, err, img.Digest)
	}
	if err := c.DeleteTag(ctx, "ns/app", "t0007"); err != nil {
		t.Fatalf("delete tag: %v", err)
	}
	if _, _, err := c.Head(ctx, "ns/app", "t0007"); !IsNotFound(err) {
		t.Errorf("tag still there: %v", err)
	}
	if _, _, err := c.Head(ctx, "ns/app", "t0008"); err != nil {
		t.Errorf("deleting one tag removed another: %v", err)
	}
	if err := c.DeleteManifest(ctx, "ns/app", img.Digest); err != nil {
		t.Fatalf("delete manifest: %v", err)
	}
	if tags, err := c.Tags(ctx, "ns/app"); err != nil || len(tags) != 0 {
		t.Errorf("after deleting the manifest: %d tags, %v", len(tags), err)
	}
	if tags, err := c.Tags(ctx, "ns/none"); err != nil || len(tags) != 0 {
		t.Errorf("missing repository: %v, %v", tags, err)
	}

	// Without credentials: a clear answer naming the registry.
	anon, err := NewClient(reg.Host(), &types.SystemContext{AuthFilePath: t.TempDir() + "/none.json", DockerCertPath: reg.CertsDir()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := anon.Tags(ctx, "ns/app"); err == nil || !strings.Contains(err.Error(), "wants credentials") || !strings.Contains(err.Error(), reg.Host()) || !strings.Contains(err.Error(), "--authfile") {
		t.Errorf("no credentials: %v", err)
	}
	if repos, err := anon.Catalog(ctx, "ns/", 10); err == nil {
		t.Errorf("catalog without credentials: %v", repos)
	}
	// Untrusted certificate: refused unless verification is off.
	strict, err := NewClient(reg.Host(), &types.SystemContext{AuthFilePath: reg.AuthFile(), DockerCertPath: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := strict.Tags(ctx, "ns/app"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("untrusted certificate: %v", err)
	}
	loose, err := NewClient(reg.Host(), &types.SystemContext{AuthFilePath: reg.AuthFile(), DockerInsecureSkipTLSVerify: types.OptionalBoolTrue})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := loose.Tags(ctx, "ns/app"); err != nil {
		t.Errorf("verification off: %v", err)
	}
}

// TestRegistryTokenAccounts: on a token registry, a wrong password and a
// pull-only account get errors that name the registry and --authfile, and
// the pull-only account still lists tags; an identity token (OAuth2
// refresh token) is exchanged for access tokens and deletes.
func TestRegistryTokenAccounts(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{Username: "alice", Password: "s3cret", Token: &registrytest.TokenAuth{
		Users: []registrytest.TokenUser{{Username: "reader", Password: "r3ad", Actions: []string{"pull"}},
			{Username: "robot", Password: "unused-r0bot", RefreshToken: "refresh-r0bot"}}}})
	ctx := context.Background()
	img, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(1, 1024)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := imagebuilder.Push(ctx, imagebuilder.Target{URL: reg.URL(), Username: "alice", Password: "s3cret"}, "ns/app", "v1", img); err != nil {
		t.Fatal(err)
	}
	// client uses user's password, or identity token when it is set.
	client := func(user, password, identity string) *Client {
		t.Helper()
		path := filepath.Join(t.TempDir(), "auth.json")
		auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
		if err := os.WriteFile(path, []byte(`{"auths":{"`+reg.Host()+`":{"auth":"`+auth+`","identitytoken":"`+identity+`"}}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := NewClient(reg.Host(), &types.SystemContext{AuthFilePath: path, DockerInsecureSkipTLSVerify: types.OptionalBoolTrue})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	_, err = client("alice", "wrong", "").Tags(ctx, "ns/app")
	if err == nil || !strings.Contains(err.Error(), reg.Host()) || !strings.Contains(err.Error(), "--authfile") || strings.Contains(err.Error(), "wrong") {
		t.Errorf("wrong password: %v", err)
	}
	reader := client("reader", "r3ad", "")
	if tags, err := reader.Tags(ctx, "ns/app"); err != nil || len(tags) != 1 {
		t.Errorf("reader listing tags: %v, %v", tags, err)
	}
	err = reader.DeleteManifest(ctx, "ns/app", img.Digest)
	if err == nil || !strings.Contains(err.Error(), "denied") || !strings.Contains(err.Error(), "--authfile") {
		t.Errorf("reader deleting: %v", err)
	}
	if got, err := reg.ManifestDigest("ns/app", "v1"); err != nil || got != img.Digest {
		t.Errorf("after the reader's delete: %s, %v", got, err)
	}

	_, err = client("robot", "", "expired-r0bot").Tags(ctx, "ns/app")
	if err == nil || !strings.Contains(err.Error(), "--authfile") || strings.Contains(err.Error(), "expired-r0bot") {
		t.Errorf("wrong identity token: %v", err)
	}
	if err := client("robot", "", "refresh-r0bot").DeleteTag(ctx, "ns/app", "v1"); err != nil {
		t.Errorf("deleting with an identity token: %v", err)
	}
	if _, err := reg.ManifestDigest("ns/app", "v1"); err == nil {
		t.Error("the tag is still there")
	}
}

// TestRegistryRefusesDelete: a registry with deletes disabled answers
// UNSUPPORTED, which the client reports as such.
func TestRegistryRefusesDelete(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{DisableDelete: true})
	ctx := context.Background()
	img, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(1, 1024)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := imagebuilder.Push(ctx, imagebuilder.Target{URL: reg.URL()}, "ns/app", "v1", img); err != nil {
		t.Fatal(err)
	}
	c, err := NewClient(reg.Host(), &types.SystemContext{DockerInsecureSkipTLSVerify: types.OptionalBoolTrue, AuthFilePath: t.TempDir() + "/none.json"})
	if err != nil {
		t.Fatal(err)
	}
	err = c.DeleteManifest(ctx, "ns/app", img.Digest)
	var e *Error
	if !IsUnsupported(err) || !errors.As(err, &e) || e.Status != 405 {
		t.Errorf("delete with deletes disabled: %v", err)
	}
}

func TestParseChallenge(t *testing.T) {
	scheme, p := parseChallenge(`Bearer realm="https://auth.example.com/token",service="registry.example.com",scope="repository:a/b:pull"`)
	if scheme != "Bearer" || p["realm"] != "https://auth.example.com/token" || p["service"] != "registry.example.com" || p["scope"] != "repository:a/b:pull" {
		t.Errorf("got %s %v", scheme, p)
	}
	if s, p := parseChallenge(`Basic realm="registrytest"`); s != "Basic" || p["realm"] != "registrytest" {
		t.Errorf("got %s %v", s, p)
	}

}

// TestTokenRenewed: one client for a whole run outlives its bearer tokens,
// on a registry that refuses a token once it expired (StrictExpiry;
// distribution alone accepts one for a minute more): a token near its end
// is renewed before a request (an upload's body cannot be sent twice), and
// the run goes on without a request refused.
func TestTokenRenewed(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{Username: "alice", Password: "s3cret", Token: &registrytest.TokenAuth{TTL: 2 * time.Second, StrictExpiry: true}})
	ctx := context.Background()
	img, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(1, 1024)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := imagebuilder.Push(ctx, imagebuilder.Target{URL: reg.URL(), Username: "alice", Password: "s3cret"}, "ns/app", "v1", img); err != nil {
		t.Fatal(err)
	}
	c, err := NewClient(reg.Host(), &types.SystemContext{AuthFilePath: reg.AuthFile(), DockerInsecureSkipTLSVerify: types.OptionalBoolTrue})
	if err != nil {
		t.Fatal(err)
	}
	if d, _, err := c.Head(ctx, "ns/app", "v1"); err != nil || d != img.Digest {
		t.Fatalf("head: %s, %v", d, err)
	}
	issued := len(reg.IssuedTokens())
	time.Sleep(3100 * time.Millisecond) // past the token's expiry and the registry's leeway
	data := []byte("a blob pushed with an expired token held")
	// A reader without GetBody: the upload cannot be sent twice.
	if err := c.PutBlob(ctx, "ns/app", digest.FromBytes(data), int64(len(data)), io.MultiReader(bytes.NewReader(data)), ""); err != nil {
		t.Fatalf("upload after the token expired: %v", err)
	}
	if has, err := c.HasBlob(ctx, "ns/app", digest.FromBytes(data)); err != nil || !has {
		t.Fatalf("blob after the upload: %v, %v", has, err)
	}
	if got := len(reg.IssuedTokens()); got <= issued {
		t.Errorf("no token issued after the first expired (%d, then %d)", issued, got)
	}
	if n := reg.ExpiredTokens(); n != 0 {
		t.Errorf("the registry refused %d requests for an expired token: the client sent a token it should have renewed", n)
	}
}

// TestExpiredTokenRefused: requests that reach the registry after their
// token expired (held on the way, as a slow link or a buffering proxy
// would) are refused with 401 invalid_token. The client gets a new token:
// a read is sent again at once; an upload whose body cannot be sent twice
// fails as worth retrying (Retry), and the retry goes through.
func TestExpiredTokenRefused(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{Username: "alice", Password: "s3cret", Token: &registrytest.TokenAuth{TTL: time.Second, StrictExpiry: true}})
	ctx := context.Background()
	img, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(3, 4096)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := imagebuilder.Push(ctx, imagebuilder.Target{URL: reg.URL(), Username: "alice", Password: "s3cret"}, "ns/app", "v1", img); err != nil {
		t.Fatal(err)
	}
	hold := registrytest.NewExpiryHold(3, func(r *http.Request) bool { return registrytest.MatchBlobGet(r) || registrytest.MatchBlobUpload(r) })
	reg.SetWrap(hold.Wrap)
	c, err := NewClient(reg.Host(), &types.SystemContext{AuthFilePath: reg.AuthFile(), DockerInsecureSkipTLSVerify: types.OptionalBoolTrue})
	if err != nil {
		t.Fatal(err)
	}

	layer := img.Layers[0]
	rc, err := c.Blob(ctx, "ns/app", layer.Digest, layer.Size)
	if err != nil {
		t.Fatalf("blob read refused for an expired token: %v", err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || digest.FromBytes(got) != layer.Digest {
		t.Fatalf("blob read after a new token: %d bytes, %v", len(got), err)
	}
	if hold.Held() != 1 || reg.ExpiredTokens() != 1 {
		t.Fatalf("held %d, refused %d: want 1 and 1", hold.Held(), reg.ExpiredTokens())
	}

	// Over 1 MiB: an upload session, then a PUT of a stream.
	data := bytes.Repeat([]byte("expired on the way "), 60000)
	d := digest.FromBytes(data)
	err = c.PutBlob(ctx, "ns/app", d, int64(len(data)), io.MultiReader(bytes.NewReader(data)), "")
	var e *Error
	if !errors.As(err, &e) || !e.Retry || e.Status != http.StatusUnauthorized || reg.ExpiredTokens() != 2 {
		t.Fatalf("an upload refused for its expired token: %v (refused %d), want an Error to retry", err, reg.ExpiredTokens())
	}
	if err := c.PutBlob(ctx, "ns/app", d, int64(len(data)), io.MultiReader(bytes.NewReader(data)), ""); err != nil {
		t.Fatalf("the retried upload: %v", err)
	}
	if b, err := reg.Blob("ns/app", d); err != nil || digest.FromBytes(b) != d {
		t.Fatalf("the uploaded blob: %d bytes, %v", len(b), err)
	}

	// A small blob goes in one POST the client can send again.
	small := []byte("a small blob, sent again with a new token")
	if err := c.PutBlob(ctx, "ns/app", digest.FromBytes(small), int64(len(small)), bytes.NewReader(small), ""); err != nil {
		t.Fatalf("a small upload refused for an expired token: %v", err)
	}
	if has, err := c.HasBlob(ctx, "ns/app", digest.FromBytes(small)); err != nil || !has {
		t.Fatalf("the small blob: %v, %v", has, err)
	}
	if hold.Held() != 3 || reg.ExpiredTokens() != 3 {
		t.Errorf("held %d, refused %d: want 3 and 3", hold.Held(), reg.ExpiredTokens())
	}
}

// TestAnonymous404: a registry that lets /v2/ in without credentials and
// answers 404 for its private repositories to requests without them
// (HideFromAnonymous). A client with credentials asks again with them
// after the first 404, sends them from then on, and reads, lists and
// pushes as usual; its first catalog is asked with them. Without
// credentials the image is absent, after one request, and the error says
// how to log in. Wrong credentials are refused as such.
func TestAnonymous404(t *testing.T) {
	for name, opts := range map[string]registrytest.Options{
		"basic": {Username: "alice", Password: "s3cret", HideFromAnonymous: true},
		"token": {Username: "alice", Password: "s3cret", HideFromAnonymous: true, Token: &registrytest.TokenAuth{}},
	} {
		t.Run(name, func(t *testing.T) { testAnonymous404(t, opts) })
	}
}

func testAnonymous404(t *testing.T, opts registrytest.Options) {
	reg := registrytest.Start(t, opts)
	ctx := context.Background()
	img, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(5, 4096)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := imagebuilder.Push(ctx, imagebuilder.Target{URL: reg.URL(), Username: "alice", Password: "s3cret"}, "private/app", "v1", img); err != nil {
		t.Fatal(err)
	}
	sys := &types.SystemContext{AuthFilePath: reg.AuthFile(), DockerInsecureSkipTLSVerify: types.OptionalBoolTrue}
	c, err := NewClient(reg.Host(), sys)
	if err != nil {
		t.Fatal(err)
	}
	if d, _, err := c.Head(ctx, "private/app", "v1"); err != nil || d != img.Digest {
		t.Fatalf("head of a hidden image: %s, %v", d, err)
	}
	hidden := reg.HiddenAnswers()
	if hidden != 1 || c.HiddenRetries.Load() != 1 {
		t.Fatalf("hidden answers %d, asked again %d: want 1 and 1", hidden, c.HiddenRetries.Load())
	}
	if tags, err := c.Tags(ctx, "private/app"); err != nil || len(tags) != 1 {
		t.Errorf("tags: %v, %v", tags, err)
	}
	data, _, err := c.Manifest(ctx, "private/app", img.Digest.String())
	if err != nil || digest.FromBytes(data) != img.Digest {
		t.Errorf("manifest: %v", err)
	}
	rc, err := c.Blob(ctx, "private/app", img.Layers[0].Digest, img.Layers[0].Size)
	if err != nil {
		t.Fatalf("blob: %v", err)
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || digest.FromBytes(b) != img.Layers[0].Digest {
		t.Errorf("blob content: %v", err)
	}
	blob := []byte("pushed to a registry that hides its repositories")
	if err := c.PutBlob(ctx, "private/other", digest.FromBytes(blob), int64(len(blob)), io.MultiReader(bytes.NewReader(blob)), ""); err != nil {
		t.Errorf("upload: %v", err)
	}
	if err := c.PutManifest(ctx, "private/app", "v2", img.MediaType, img.Manifest); err != nil {
		t.Errorf("manifest push: %v", err)
	}
	if got, err := reg.ManifestDigest("private/app", "v2"); err != nil || got != img.Digest {
		t.Errorf("pushed tag: %s, %v", got, err)
	}
	if n := reg.HiddenAnswers(); n != hidden {
		t.Errorf("%d more requests went without credentials after the first 404", n-hidden)
	}

	// Many requests at once from a new client, all sent without
	// credentials: each is asked again, whichever of them switched the
	// client to basic and then to a token.
	many, err := NewClient(reg.Host(), sys)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if d, _, err := many.Head(ctx, "private/app", "v1"); err != nil || d != img.Digest {
				t.Errorf("concurrent head of a hidden image: %s, %v", d, err)
			}
		}()
	}
	wg.Wait()
	hidden = reg.HiddenAnswers()

	// A new client's first request is a catalog: asked with the
	// credentials, it lists the private repositories.
	fresh, err := NewClient(reg.Host(), sys)
	if err != nil {
		t.Fatal(err)
	}
	if repos, err := fresh.Catalog(ctx, "private/", 10); err != nil || strings.Join(repos, " ") != "private/app" {
		t.Errorf("catalog: %v, %v", repos, err)
	}
	if n := reg.HiddenAnswers(); n != hidden {
		t.Errorf("the catalog was asked without credentials (%d hidden answers)", n-hidden)
	}

	// Without credentials: absent after one request, with a hint.
	anon, err := NewClient(reg.Host(), &types.SystemContext{AuthFilePath: t.TempDir() + "/none.json", DockerInsecureSkipTLSVerify: types.OptionalBoolTrue})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = anon.Head(ctx, "private/app", "v1")
	if !IsNotFound(err) || !strings.Contains(err.Error(), "podman login "+reg.Host()) || !strings.Contains(err.Error(), "--authfile") {
		t.Errorf("without credentials: %v", err)
	}
	if n := reg.HiddenAnswers() - hidden; n != 1 || anon.HiddenRetries.Load() != 0 {
		t.Errorf("without credentials: %d requests answered 404, %d asked again; want 1 and 0", n, anon.HiddenRetries.Load())
	}

	// Wrong credentials: refused as such, not absent.
	path := filepath.Join(t.TempDir(), "auth.json")
	if err := os.WriteFile(path, []byte(`{"auths":{"`+reg.Host()+`":{"auth":"`+base64.StdEncoding.EncodeToString([]byte("alice:wrong"))+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	wrong, err := NewClient(reg.Host(), &types.SystemContext{AuthFilePath: path, DockerInsecureSkipTLSVerify: types.OptionalBoolTrue})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = wrong.Head(ctx, "private/app", "v1")
	if err == nil || IsNotFound(err) || !strings.Contains(err.Error(), "--authfile") || strings.Contains(err.Error(), "wrong") {
		t.Errorf("wrong password: %v", err)
	}
}
