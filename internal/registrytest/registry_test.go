package registrytest_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	"github.com/sirupsen/logrus"

	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// target is how imagebuilder reaches reg.
func target(reg *registrytest.Registry, user, pass string) imagebuilder.Target {
	return imagebuilder.Target{URL: reg.URL(), Client: reg.Client(), Username: user, Password: pass}
}

// smallImage is a two-layer test image.
func smallImage(t *testing.T, seed uint64) *imagebuilder.Image {
	t.Helper()
	img, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{
		imagebuilder.RandomLayer(seed, 20<<10), imagebuilder.RandomLayer(seed+1, 3<<10),
	}})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return img
}

// get fetches url with the registry's client and returns status, headers and body.
func get(t *testing.T, reg *registrytest.Registry, method, url string, header http.Header) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := reg.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, url, err)
	}
	return resp.StatusCode, resp.Header, body
}

func TestPushAndReadBackOverHTTP(t *testing.T) {
	ctx := context.Background()
	reg := registrytest.Start(t, registrytest.Options{})
	if !strings.HasPrefix(reg.Host(), "127.0.0.1:") || reg.URL() != "http://"+reg.Host() {
		t.Fatalf("Host %q URL %q", reg.Host(), reg.URL())
	}
	img := smallImage(t, 1)
	if err := imagebuilder.Push(ctx, target(reg, "", ""), "team/app", "v1", img); err != nil {
		t.Fatalf("Push: %v", err)
	}
	idx, err := imagebuilder.BuildIndex(imagebuilder.IndexSpec{Images: []imagebuilder.ImageSpec{
		{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(1, 20<<10)}},
		{Platform: imagebuilder.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}, Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(9, 20<<10)}},
	}})
	if err != nil {
		t.Fatalf("BuildIndex: %v", err)
	}
	if err := imagebuilder.PushIndex(ctx, target(reg, "", ""), "team/multi", "v2", idx); err != nil {
		t.Fatalf("PushIndex: %v", err)
	}

	accept := http.Header{"Accept": {idx.MediaType + ", " + img.MediaType}}
	for _, tc := range []struct {
		repo, ref string
		want      digest.Digest
		mediaType string
	}{
		{"team/app", "v1", img.Digest, img.MediaType},
		{"team/multi", "v2", idx.Digest, idx.MediaType},
		{"team/multi", idx.Images[1].Digest.String(), idx.Images[1].Digest, idx.Images[1].MediaType},
	} {
		status, h, body := get(t, reg, http.MethodGet, reg.URL()+"/v2/"+tc.repo+"/manifests/"+tc.ref, accept)
		if status != http.StatusOK || h.Get("Docker-Content-Digest") != tc.want.String() ||
			digest.SHA256.FromBytes(body) != tc.want || h.Get("Content-Type") != tc.mediaType {
			t.Errorf("GET %s:%s: %d %s %s, want %s", tc.repo, tc.ref, status, h.Get("Content-Type"), h.Get("Docker-Content-Digest"), tc.want)
		}
		if got, err := reg.ManifestDigest(tc.repo, tc.ref); err != nil || got != tc.want {
			t.Errorf("ManifestDigest(%s, %s) = %s, %v", tc.repo, tc.ref, got, err)
		}
	}
	for _, b := range img.Blobs() {
		status, _, body := get(t, reg, http.MethodGet, reg.URL()+"/v2/team/app/blobs/"+b.Digest.String(), nil)
		if status != http.StatusOK || digest.SHA256.FromBytes(body) != b.Digest {
			t.Errorf("GET blob %s: %d, content %s", b.Digest, status, digest.SHA256.FromBytes(body))
		}
		if ok, err := reg.HasBlob("team/app", b.Digest); !ok || err != nil {
			t.Errorf("HasBlob(team/app, %s) = %v, %v", b.Digest, ok, err)
		}
	}
	if ok, err := reg.HasBlob("team/app", idx.Images[1].Layers[0].Digest); ok || err != nil {
		t.Errorf("HasBlob for a blob of another repository = %v, %v; want false", ok, err)
	}

	if repos, err := reg.Catalog(); err != nil || strings.Join(repos, ",") != "team/app,team/multi" {
		t.Errorf("Catalog() = %v, %v", repos, err)
	}
	if tags, err := reg.Tags("team/app"); err != nil || strings.Join(tags, ",") != "v1" {
		t.Errorf("Tags(team/app) = %v, %v", tags, err)
	}
	if _, err := reg.Tags("team/none"); !errors.Is(err, registrytest.ErrNotFound) {
		t.Errorf("Tags of an unknown repository: %v, want ErrNotFound", err)
	}
	if _, err := reg.ManifestDigest("team/app", "nope"); !errors.Is(err, registrytest.ErrNotFound) {
		t.Errorf("ManifestDigest of an unknown tag: %v, want ErrNotFound", err)
	}
	if got := reg.Ref("team/app", "v1"); got != reg.Host()+"/team/app:v1" {
		t.Errorf("Ref = %s", got)
	}
	if got := reg.Ref("team/app", img.Digest.String()); got != reg.Host()+"/team/app@"+img.Digest.String() {
		t.Errorf("Ref by digest = %s", got)
	}

	// Deletes are enabled.
	req, _ := http.NewRequest(http.MethodDelete, reg.URL()+"/v2/team/app/manifests/"+img.Digest.String(), nil)
	resp, err := reg.Client().Do(req)
	if err != nil {
		t.Fatalf("DELETE: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Errorf("DELETE manifest: %d, want 202", resp.StatusCode)
	}
	if _, err := reg.ManifestDigest("team/app", img.Digest.String()); !errors.Is(err, registrytest.ErrNotFound) {
		t.Errorf("manifest after delete: %v, want ErrNotFound", err)
	}
}

func TestEnvironmentIsIgnored(t *testing.T) {
	// A user's containers auth file and any registry override must not leak in.
	t.Setenv("REGISTRY_AUTH_FILE", filepath.Join(t.TempDir(), "auth.json"))
	t.Setenv("REGISTRY_AUTH", "htpasswd")
	t.Setenv("REGISTRY_HTTP_ADDR", "127.0.0.1:1")
	t.Setenv("REGISTRY_STORAGE", "s3")
	t.Setenv("REGISTRY_STORAGE_DELETE_ENABLED", "false")
	t.Setenv("REGISTRY_VALIDATION_DISABLED", "true")
	reg := registrytest.Start(t, registrytest.Options{})
	if strings.HasSuffix(reg.Host(), ":1") {
		t.Fatalf("registry listens on %s, from REGISTRY_HTTP_ADDR", reg.Host())
	}
	if status, _, _ := get(t, reg, http.MethodGet, reg.URL()+"/v2/", nil); status != http.StatusOK {
		t.Fatalf("GET /v2/ = %d, want 200 without auth", status)
	}
	img := smallImage(t, 3)
	if err := imagebuilder.Push(context.Background(), target(reg, "", ""), "env/app", "v1", img); err != nil {
		t.Fatalf("Push: %v", err)
	}
	req, _ := http.NewRequest(http.MethodDelete, reg.URL()+"/v2/env/app/manifests/"+img.Digest.String(), nil)
	resp, err := reg.Client().Do(req)
	if err != nil {
		t.Fatalf("DELETE: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Errorf("DELETE = %d, want 202: deletes must stay enabled", resp.StatusCode)
	}
}

func TestBasicAuth(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{Username: "alice", Password: "s3cret"})
	tests := []struct {
		name       string
		user, pass string
		want       int
	}{
		{"no credentials", "", "", http.StatusUnauthorized},
		{"wrong password", "alice", "nope", http.StatusUnauthorized},
		{"unknown user", "bob", "s3cret", http.StatusUnauthorized},
		{"right credentials", "alice", "s3cret", http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, reg.URL()+"/v2/", nil)
			if tt.user != "" {
				req.SetBasicAuth(tt.user, tt.pass)
			}
			resp, err := reg.Client().Do(req)
			if err != nil {
				t.Fatalf("GET /v2/: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.want)
			}
			if tt.want == http.StatusUnauthorized && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic") {
				t.Errorf("WWW-Authenticate %q, want a Basic challenge", resp.Header.Get("WWW-Authenticate"))
			}
		})
	}
	// The helpers authenticate by themselves.
	img := smallImage(t, 5)
	if err := imagebuilder.Push(context.Background(), target(reg, "alice", "s3cret"), "secure/app", "v1", img); err != nil {
		t.Fatalf("Push with credentials: %v", err)
	}
	if got, err := reg.ManifestDigest("secure/app", "v1"); err != nil || got != img.Digest {
		t.Errorf("ManifestDigest = %s, %v", got, err)
	}
	// auth.json holds the credentials for this host.
	var auth struct {
		Auths map[string]struct{ Auth string } `json:"auths"`
	}
	data, err := os.ReadFile(reg.AuthFile())
	if err != nil || json.Unmarshal(data, &auth) != nil || auth.Auths[reg.Host()].Auth != "YWxpY2U6czNjcmV0" {
		t.Errorf("auth file %s = %s (%v)", reg.AuthFile(), data, err)
	}
}

// TestReadOnlyAccount: an Options.ReadOnly account reads what the full
// account pushed, and every write of its own (upload, manifest put, delete)
// is answered 403 DENIED and changes nothing; its password is checked.
func TestReadOnlyAccount(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{Username: "alice", Password: "s3cret",
		ReadOnly: []registrytest.Account{{Username: "bob", Password: "r3ad"}}})
	img := smallImage(t, 7)
	if err := imagebuilder.Push(context.Background(), target(reg, "alice", "s3cret"), "team/app", "v1", img); err != nil {
		t.Fatalf("Push by the full account: %v", err)
	}
	do := func(method, path, user, pass string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, reg.URL()+path, nil)
		req.SetBasicAuth(user, pass)
		req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json")
		resp, err := reg.Client().Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, _ := do(http.MethodGet, "/v2/team/app/manifests/v1", "bob", "r3ad"); code != http.StatusOK {
		t.Errorf("read-only account reading a manifest: %d", code)
	}
	if code, _ := do(http.MethodGet, "/v2/team/app/manifests/v1", "bob", "wrong"); code != http.StatusUnauthorized {
		t.Errorf("read-only account with a wrong password: %d, want 401", code)
	}
	for _, w := range []struct{ method, path string }{
		{http.MethodPost, "/v2/team/app/blobs/uploads/"},
		{http.MethodDelete, "/v2/team/app/manifests/" + img.Digest.String()},
	} {
		if code, body := do(w.method, w.path, "bob", "r3ad"); code != http.StatusForbidden || !strings.Contains(body, `"DENIED"`) {
			t.Errorf("read-only %s %s: %d %s, want 403 DENIED", w.method, w.path, code, body)
		}
	}
	err := imagebuilder.Push(context.Background(), target(reg, "bob", "r3ad"), "team/other", "v1", smallImage(t, 9))
	if err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("push by the read-only account: %v, want a 403", err)
	}
	if got, err := reg.ManifestDigest("team/app", "v1"); err != nil || got != img.Digest {
		t.Errorf("the read-only account's delete changed the registry: %s, %v", got, err)
	}
	if repos, _ := reg.Catalog(); len(repos) != 1 {
		t.Errorf("the read-only account's push created repositories: %v", repos)
	}
}

func TestOptionErrors(t *testing.T) {
	for name, opts := range map[string]registrytest.Options{
		"user without password":        {Username: "u"},
		"password without user":        {Password: "p"},
		"unusable address":             {Addr: "256.0.0.1:0"},
		"token user without password":  {Token: &registrytest.TokenAuth{Users: []registrytest.TokenUser{{Username: "u"}}}},
		"read-only without basic auth": {ReadOnly: []registrytest.Account{{Username: "r", Password: "p"}}},
		"hiding without auth":          {HideFromAnonymous: true},
	} {
		t.Run(name, func(t *testing.T) {
			reg, err := registrytest.New(context.Background(), opts)
			if err == nil {
				reg.Close()
				t.Fatal("New succeeded, want an error")
			}
		})
	}
}

func TestTLS(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{TLS: true})
	if reg.URL() != "https://"+reg.Host() || !reg.TLS() {
		t.Fatalf("URL %s", reg.URL())
	}
	if status, _, _ := get(t, reg, http.MethodGet, reg.URL()+"/v2/", nil); status != http.StatusOK {
		t.Fatalf("GET /v2/ over TLS = %d", status)
	}
	// A client that does not trust the certificate is refused.
	_, err := (&http.Client{Transport: &http.Transport{}}).Get(reg.URL() + "/v2/")
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Errorf("untrusting client: %v, want an unknown-authority error", err)
	}
	// CertsDir holds the same certificate as CAPEM, valid for 127.0.0.1.
	data, err := os.ReadFile(filepath.Join(reg.CertsDir(), "ca.crt"))
	if err != nil || !bytes.Equal(data, reg.CAPEM()) {
		t.Fatalf("ca.crt: %v", err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatal("ca.crt is not PEM")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatalf("ca.crt: %v", err)
	}
	if err := cert.VerifyHostname("127.0.0.1"); err != nil {
		t.Errorf("certificate: %v", err)
	}
	img := smallImage(t, 7)
	if err := imagebuilder.Push(context.Background(), target(reg, "", ""), "tls/app", "v1", img); err != nil {
		t.Fatalf("Push over TLS: %v", err)
	}
	if got, err := reg.ManifestDigest("tls/app", "v1"); err != nil || got != img.Digest {
		t.Errorf("ManifestDigest = %s, %v", got, err)
	}
	dir := reg.CertsDir()
	if err := reg.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("certificates directory %s left behind: %v", dir, err)
	}
}

func TestSparseIndexes(t *testing.T) {
	idx, err := imagebuilder.BuildIndex(imagebuilder.IndexSpec{Images: []imagebuilder.ImageSpec{
		{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(1, 1024)}},
		{Platform: imagebuilder.Platform{OS: "linux", Architecture: "s390x"}, Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(2, 1024)}},
	}})
	if err != nil {
		t.Fatalf("BuildIndex: %v", err)
	}
	for _, sparse := range []bool{false, true} {
		reg := registrytest.Start(t, registrytest.Options{SparseIndexes: sparse})
		dst := target(reg, "", "")
		// Only the amd64 image is pushed; the index references a missing s390x one.
		if err := imagebuilder.Push(context.Background(), dst, "sparse/app", "", idx.Images[0]); err != nil {
			t.Fatalf("Push: %v", err)
		}
		err := imagebuilder.PushManifest(context.Background(), dst, "sparse/app", "v1", idx.MediaType, idx.Manifest)
		if sparse && err != nil {
			t.Errorf("SparseIndexes: pushing an incomplete index: %v", err)
		}
		if !sparse && err == nil {
			t.Errorf("default registry accepted an incomplete index")
		}
	}
}

func TestFilesystemStorage(t *testing.T) {
	dir := t.TempDir()
	reg := registrytest.Start(t, registrytest.Options{Dir: dir})
	img := smallImage(t, 11)
	if err := imagebuilder.Push(context.Background(), target(reg, "", ""), "disk/app", "v1", img); err != nil {
		t.Fatalf("Push: %v", err)
	}
	layer := img.Layers[0].Digest.Encoded()
	if _, err := os.Stat(filepath.Join(dir, "docker/registry/v2/blobs/sha256", layer[:2], layer, "data")); err != nil {
		t.Errorf("layer not stored under Options.Dir: %v", err)
	}
	if err := reg.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// A new registry on the same directory serves the same content.
	again := registrytest.Start(t, registrytest.Options{Dir: dir})
	if got, err := again.ManifestDigest("disk/app", "v1"); err != nil || got != img.Digest {
		t.Errorf("after restart: %s, %v", got, err)
	}
}

func TestRegistryLogsAreSilent(t *testing.T) {
	var buf bytes.Buffer
	std := logrus.StandardLogger()
	out := std.Out
	std.SetOutput(&buf)
	t.Cleanup(func() { std.SetOutput(out) })

	reg := registrytest.Start(t, registrytest.Options{})
	get(t, reg, http.MethodGet, reg.URL()+"/v2/", nil)
	get(t, reg, http.MethodGet, reg.URL()+"/v2/missing/manifests/v1", nil)
	logrus.Warn("not from the registry")
	if got := buf.String(); strings.Contains(got, "response completed") || !strings.Contains(got, "not from the registry") {
		t.Errorf("logrus output:\n%s\nwant only the line not from the registry", got)
	}

	buf.Reset()
	loud := registrytest.Start(t, registrytest.Options{Debug: true})
	get(t, loud, http.MethodGet, loud.URL()+"/v2/missing/manifests/v1", nil)
	if !strings.Contains(buf.String(), "response completed") {
		t.Errorf("Debug registry logged nothing: %q", buf.String())
	}
}

func TestSetWrapAndClose(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	teapot := func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	}
	reg.SetWrap(teapot)
	if status, _, _ := get(t, reg, http.MethodGet, reg.URL()+"/v2/", nil); status != http.StatusTeapot {
		t.Errorf("with wrap: %d", status)
	}
	reg.SetWrap(nil)
	if status, _, _ := get(t, reg, http.MethodGet, reg.URL()+"/v2/", nil); status != http.StatusOK {
		t.Errorf("after removing the wrap: %d", status)
	}
	host := reg.Host()
	if err := reg.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := reg.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if conn, err := net.Dial("tcp", host); err == nil {
		conn.Close()
		t.Errorf("%s still accepts connections after Close", host)
	}
}
