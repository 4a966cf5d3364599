package serve

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/internal/imagebuilder"
)

// TestServerOwnCertificate: with --tls-cert the push credentials trust
// exactly the certificate served and carry this run's password; anonymous
// users get a challenge at /v2/ and may not start an upload.
func TestServerOwnCertificate(t *testing.T) {
	// A certificate from elsewhere: here, one the generator signs with a CA
	// the push is never given.
	other := filepath.Join(t.TempDir(), "pki")
	names, ips := hostNames("127.0.0.1", nil)
	if _, err := generatedCertificate(other, names, ips); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	srv, err := New(context.Background(), Options{Root: root, Address: "127.0.0.1:0",
		TLSCert: filepath.Join(other, serverCertFile), TLSKey: filepath.Join(other, serverKeyFile)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	}()
	if srv.CAFile() != "" {
		t.Errorf("CAFile %q with a certificate of the user's", srv.CAFile())
	}
	if _, err := os.Stat(filepath.Join(root, "tls")); !os.IsNotExist(err) {
		t.Errorf("a CA was made although --tls-cert was given (%v)", err)
	}
	if _, err := New(context.Background(), Options{Root: root, Address: "127.0.0.1:0", PlainHTTP: true}); err == nil || !strings.Contains(err.Error(), "in use by another gapmirror serve") {
		t.Errorf("a second server on the same root: %v", err)
	}

	creds := t.TempDir()
	authFile, certDir, err := srv.PushCredentials(creds)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(filepath.Join(certDir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	var auth struct {
		Auths map[string]struct{ Auth string } `json:"auths"`
	}
	data, err := os.ReadFile(authFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &auth); err != nil {
		t.Fatal(err)
	}
	basic := auth.Auths[srv.Name()].Auth
	if fi, err := os.Stat(authFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("auth file %v %v, want mode 0600", fi.Mode(), err)
	}

	do := func(method, path, authorization string) int {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL()+path, nil)
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	wrong := "Basic " + base64.StdEncoding.EncodeToString([]byte(pushUser+":not-the-password-of-this-run-0000000000"))
	for _, tc := range []struct {
		method, path, auth string
		want               int
	}{
		{"GET", "/v2/", "", 401},
		{"GET", "/v2/", "Basic " + basic, 200},
		{"GET", "/v2/", wrong, 401},
		{"GET", "/v2/_catalog", "", 200},
		{"POST", "/v2/a/blobs/uploads/", "", 401},
		{"POST", "/v2/a/blobs/uploads/", wrong, 401},
		{"POST", "/v2/a/blobs/uploads/", "Basic " + basic, 202},
	} {
		if got := do(tc.method, tc.path, tc.auth); got != tc.want {
			t.Errorf("%s %s (auth %.12q): %d, want %d", tc.method, tc.path, tc.auth, got, tc.want)
		}
	}
}

// startPlain starts a plain HTTP registry on loopback under a new root.
func startPlain(t *testing.T, opts Options) *Server {
	t.Helper()
	if opts.Root == "" {
		opts.Root = t.TempDir()
	}
	opts.Address, opts.PlainHTTP = "127.0.0.1:0", true
	srv, err := New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	return srv
}

// getJSON GETs url anonymously into v and returns the Link header.
func getJSON(t *testing.T, url string, v any) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.Header.Get("Link")
}

// TestServerCatalog: with the default configuration /v2/_catalog lists
// the repositories pushed, page by page with ?n=, and tag lists work
// (distribution's page limits apply as with a configuration file).
func TestServerCatalog(t *testing.T) {
	srv := startPlain(t, Options{})
	target := imagebuilder.Target{URL: srv.URL(), Username: pushUser, Password: srv.pushPassword}
	repos := []string{"apps/one", "apps/two", "tools/three"}
	for i, repo := range repos {
		img, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(uint64(i+1), 2048)}})
		if err != nil {
			t.Fatal(err)
		}
		for _, tag := range []string{"v1", "v2"} {
			if err := imagebuilder.Push(context.Background(), target, repo, tag, img); err != nil {
				t.Fatal(err)
			}
		}
	}
	var catalog struct{ Repositories []string }
	getJSON(t, srv.URL()+"/v2/_catalog", &catalog)
	if !slices.Equal(catalog.Repositories, repos) {
		t.Errorf("/v2/_catalog lists %q, want %q", catalog.Repositories, repos)
	}
	catalog.Repositories = nil
	link := getJSON(t, srv.URL()+"/v2/_catalog?n=2", &catalog)
	if !slices.Equal(catalog.Repositories, repos[:2]) || !strings.Contains(link, "last=apps%2Ftwo") && !strings.Contains(link, "last=apps/two") {
		t.Errorf("/v2/_catalog?n=2 lists %q (Link %q), want %q and a link to the next page", catalog.Repositories, link, repos[:2])
	}
	catalog.Repositories = nil
	getJSON(t, srv.URL()+"/v2/_catalog?n=10&last=apps/two", &catalog)
	if !slices.Equal(catalog.Repositories, repos[2:]) {
		t.Errorf("second page lists %q, want %q", catalog.Repositories, repos[2:])
	}
	var tags struct{ Tags []string }
	getJSON(t, srv.URL()+"/v2/apps/one/tags/list?n=10", &tags)
	if !slices.Equal(tags.Tags, []string{"v1", "v2"}) {
		t.Errorf("tags of apps/one: %q", tags.Tags)
	}
}

// TestServerCertificateNames: a registry on a specific address serves a
// certificate that clients reaching it by this machine's host name verify
// with ca.crt; --tls-san with --plain-http or --tls-cert is refused.
func TestServerCertificateNames(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	srv, err := New(context.Background(), Options{Root: root, Address: "127.0.0.1:0", TLSSANs: []string{"mirror.example"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := srv.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	ca, err := os.ReadFile(srv.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	addr := strings.TrimPrefix(srv.URL(), "https://")
	for _, name := range []string{host, "mirror.example", "localhost", "127.0.0.1"} {
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: name, MinVersion: tls.VersionTLS12})
		if err != nil {
			t.Errorf("TLS to %s as %s: %v", addr, name, err)
			continue
		}
		_ = conn.Close()
	}

	for _, tc := range []struct {
		opts Options
		want []string
	}{
		{Options{PlainHTTP: true}, []string{"--tls-san", "--plain-http", "leave out"}},
		{Options{TLSCert: filepath.Join(root, "tls", serverCertFile), TLSKey: filepath.Join(root, "tls", serverKeyFile)}, []string{"--tls-san", "--tls-cert", "leave out"}},
	} {
		tc.opts.Root, tc.opts.Address, tc.opts.TLSSANs = filepath.Join(t.TempDir(), "new"), "127.0.0.1:0", []string{"mirror.example"}
		_, err := New(context.Background(), tc.opts)
		for _, want := range tc.want {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("--tls-san with %+v: %v, want it refused saying %q", tc.opts, err, want)
			}
		}
	}
}

// TestServerUploads: without distribution's resumable hash state (off in
// serve: pushes send a blob in one request), a blob uploaded in parts
// (POST, two PATCHes, PUT) is still checked against its digest when it is
// committed: the right digest stores it, a wrong one is refused; a
// one-request PUT leaves no hash state behind in the storage.
func TestServerUploads(t *testing.T) {
	root := t.TempDir()
	srv := startPlain(t, Options{Root: root})
	client := &http.Client{}
	do := func(method, url string, body []byte, header map[string]string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, url, strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth(pushUser, srv.pushPassword)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	location := func(resp *http.Response) string {
		t.Helper()
		loc := resp.Header.Get("Location")
		if resp.StatusCode != http.StatusAccepted || loc == "" {
			t.Fatalf("upload answered %s, Location %q", resp.Status, loc)
		}
		if strings.HasPrefix(loc, "/") {
			loc = srv.URL() + loc
		}
		return loc
	}
	withDigest := func(loc, d string) string {
		sep := "?"
		if strings.Contains(loc, "?") {
			sep = "&"
		}
		return loc + sep + "digest=" + d
	}
	part1, part2 := []byte(strings.Repeat("a", 3000)), []byte(strings.Repeat("b", 2000))
	whole := append(append([]byte{}, part1...), part2...)
	d := digest.FromBytes(whole)
	for _, c := range []struct {
		name   string
		digest digest.Digest
		want   int
	}{
		{"right digest", d, http.StatusCreated},
		{"wrong digest", digest.FromString("something else"), http.StatusBadRequest},
	} {
		loc := location(do(http.MethodPost, srv.URL()+"/v2/apps/parts/blobs/uploads/", nil, nil))
		loc = location(do(http.MethodPatch, loc, part1, map[string]string{"Content-Type": "application/octet-stream", "Content-Range": "0-2999"}))
		loc = location(do(http.MethodPatch, loc, part2, map[string]string{"Content-Type": "application/octet-stream", "Content-Range": "3000-4999"}))
		if resp := do(http.MethodPut, withDigest(loc, c.digest.String()), nil, nil); resp.StatusCode != c.want {
			t.Errorf("%s: the PUT closing a three-part upload answered %s, want %d", c.name, resp.Status, c.want)
		}
	}
	if resp := do(http.MethodHead, srv.URL()+"/v2/apps/parts/blobs/"+d.String(), nil, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("the blob uploaded in parts: HEAD %s", resp.Status)
	}

	one := []byte("one request")
	loc := location(do(http.MethodPost, srv.URL()+"/v2/apps/one/blobs/uploads/", nil, nil))
	if resp := do(http.MethodPut, withDigest(loc, digest.FromBytes(one).String()), one, map[string]string{"Content-Type": "application/octet-stream"}); resp.StatusCode != http.StatusCreated {
		t.Fatalf("one-request upload: %s", resp.Status)
	}
	var hashStates []string
	filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
		if err == nil && strings.Contains(p, "hashstates") {
			hashStates = append(hashStates, p)
		}
		return nil
	})
	if len(hashStates) > 0 {
		t.Errorf("hash state written by uploads: %v", hashStates)
	}
}
