package registryapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// TestTokenRenewed: one client for a whole run outlives its bearer tokens:
// a token near its end is renewed before a request (an upload's body
// cannot be sent twice), and the run goes on.
func TestTokenRenewed(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{Username: "alice", Password: "s3cret", Token: &registrytest.TokenAuth{TTL: 2 * time.Second}})
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
	time.Sleep(2100 * time.Millisecond) // the token has expired
	data := []byte("a blob pushed with an expired token held")
	if err := c.PutBlob(ctx, "ns/app", digest.FromBytes(data), int64(len(data)), bytes.NewReader(data), ""); err != nil {
		t.Fatalf("upload after the token expired: %v", err)
	}
	if has, err := c.HasBlob(ctx, "ns/app", digest.FromBytes(data)); err != nil || !has {
		t.Fatalf("blob after the upload: %v, %v", has, err)
	}
	if got := len(reg.IssuedTokens()); got <= issued {
		t.Errorf("no token issued after the first expired (%d, then %d)", issued, got)
	}
}
