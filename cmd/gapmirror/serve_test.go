//go:build !gapmirror_lean

package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	"go.podman.io/image/v5/copy"
	"go.podman.io/image/v5/directory"
	"go.podman.io/image/v5/docker"
	"go.podman.io/image/v5/signature"
	"go.podman.io/image/v5/types"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
	"github.com/gapmirror/gapmirror/progress"
	"github.com/gapmirror/gapmirror/transfer"
)

// served is a gapmirror serve running in-process.
type served struct {
	t      *testing.T
	cancel context.CancelFunc
	done   chan int
	out    *syncBuffer
	errb   *syncBuffer
	code   int
}

// syncBuffer is written by the serving goroutine and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// freeAddress is a loopback address with a port nothing listens on now,
// kept across restarts of a serve (the mirror's name stays the same).
func freeAddress(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	addr := ln.Addr().String()
	must(t, ln.Close())
	return addr
}

// serve starts gapmirror serve with the world's isolation flags and waits
// until it is ready (after its --from push) or has exited.
func (w *world) serve(args ...string) *served {
	w.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &served{t: w.t, cancel: cancel, done: make(chan int, 1), out: &syncBuffer{}, errb: &syncBuffer{}}
	full := append([]string{"serve", "--no-progress", "--registries-conf", w.regsConf, "--cache-dir", filepath.Join(w.dir, "cache")}, args...)
	go func() { s.done <- run(ctx, full, s.out, s.errb) }()
	deadline := time.After(2 * time.Minute)
	for !strings.Contains(s.out.String(), "ready: ") {
		select {
		case s.code = <-s.done:
			w.t.Logf("gapmirror %s → exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(full, " "), s.code, s.out, s.errb)
			s.done <- s.code
			return s
		case <-deadline:
			cancel()
			w.t.Fatalf("gapmirror %s not ready after 2 minutes:\n%s\n%s", strings.Join(full, " "), s.out, s.errb)
		case <-time.After(20 * time.Millisecond):
		}
	}
	w.t.Cleanup(func() { s.stop() })
	return s
}

// stop sends the equivalent of SIGINT and returns the exit code.
func (s *served) stop() int {
	s.cancel()
	code := <-s.done
	s.done <- code
	s.t.Logf("gapmirror serve → exit %d\nstdout:\n%s\nstderr:\n%s", code, s.out, s.errb)
	return code
}

// caClient is an HTTP client trusting only the CA file ca.
func caClient(t *testing.T, ca string) *http.Client {
	t.Helper()
	pem, err := os.ReadFile(ca)
	must(t, err)
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("%s holds no certificate", ca)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: tr}
}

// pullAll pulls every image of the world from host/prefix by digest with
// containers/image (an OCI layout as destination), trusting certDir and
// with no credentials, and checks the digests.
func (w *world) pullAll(host, certDir string, images []example) {
	t := w.t
	t.Helper()
	policy, err := signature.NewPolicyContext(&signature.Policy{Default: signature.PolicyRequirements{signature.NewPRInsecureAcceptAnything()}})
	must(t, err)
	defer func() { _ = policy.Destroy() }()
	sys := &types.SystemContext{DockerCertPath: certDir, AuthFilePath: w.authFile, SystemRegistriesConfPath: w.regsConf, SystemRegistriesConfDirPath: t.TempDir()}
	dir := t.TempDir()
	for i, ex := range images {
		src, err := docker.ParseReference("//" + host + "/" + ex.Repo + "@" + ex.Digest.String())
		must(t, err)
		dst, err := directory.NewReference(filepath.Join(dir, fmt.Sprint(i)))
		must(t, err)
		m, err := copy.Image(context.Background(), policy, dst, src, &copy.Options{SourceCtx: sys, DestinationCtx: &types.SystemContext{},
			ImageListSelection: copy.CopyAllImages, PreserveDigests: true})
		if err != nil {
			t.Errorf("containers/image pull of %s@%s: %v", ex.Repo, ex.Digest, err)
			continue
		}
		if got := digest.FromBytes(m); got != ex.Digest {
			t.Errorf("%s: pulled manifest %s, want %s", ex.Repo, got, ex.Digest)
		}
	}
	skopeo, err := exec.LookPath("skopeo")
	if err != nil {
		t.Log("skopeo not installed: skipping its cross-check")
		return
	}
	for _, ex := range images {
		ref := "docker://" + host + "/" + ex.Repo + "@" + ex.Digest.String()
		out, err := exec.Command(skopeo, "inspect", "--raw", "--cert-dir", certDir, "--authfile", w.authFile, "--registries-conf", w.regsConf, ref).Output()
		if err != nil || digest.FromBytes(out) != ex.Digest {
			t.Errorf("skopeo inspect --raw %s: %v (manifest digest %s)", ref, err, digest.FromBytes(out))
		}
	}
}

// httpStatus is the HTTP status of a request to the served registry.
func httpStatus(t *testing.T, c *http.Client, method, url, user, password string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	must(t, err)
	req.Header.Set("Accept", "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json, application/vnd.docker.distribution.manifest.list.v2+json")
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	resp, err := c.Do(req)
	must(t, err)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// TestServeFromArchive: serve --from pushes an archive into a TLS registry
// it serves with a CA made under ROOT/tls; an independent client pulls
// every image by digest trusting ROOT/tls; anonymous users cannot push;
// after a graceful stop a second serve --from applies the incremental
// archive (everything of the first still there); a third prunes the image
// the set dropped; serve gc then deletes its blobs, and a plain serve
// still has every other image.
func TestServeFromArchive(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(6, 32<<10)
	all := w.images
	first := all[:4]
	out, airgap, root := filepath.Join(w.dir, "out"), filepath.Join(w.dir, "airgap"), filepath.Join(w.dir, "srv")
	addr := freeAddress(t)
	tlsDir := filepath.Join(root, "tls")

	w.images = first
	if code, _, _ := w.gapmirror("mirror", "-c", w.isc(""), "file://"+out); code != 0 {
		t.Fatal("mirror-to-disk failed")
	}
	moveChunks(t, out, airgap)
	s := w.serve("--root", root, "--address", addr, "--from", "file://"+airgap)
	if s.code != 0 {
		t.Fatalf("serve --from: exit %d", s.code)
	}
	ca := filepath.Join(tlsDir, "ca.crt")
	for _, want := range []string{"serving docker://" + addr, "TLS certificate authority: " + ca, "/etc/containers/certs.d/" + addr + "/ca.crt", "4 images: 4 copied,",
		"oc apply -f " + filepath.Join(airgap, "working-dir", "cluster-resources")} {
		if !strings.Contains(s.out.String(), want) {
			t.Errorf("serve output does not say %q:\n%s", want, s.out)
		}
	}
	w.pullAll(addr, tlsDir, first)
	itms, err := os.ReadFile(filepath.Join(airgap, "working-dir", "cluster-resources", "itms-gapmirror.yaml"))
	must(t, err)
	if !strings.Contains(string(itms), "- "+addr+"/apps") {
		t.Errorf("ITMS does not point at the served registry:\n%s", itms)
	}
	// Anonymous users read only.
	c := caClient(t, ca)
	img, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(99, 1024)}})
	must(t, err)
	if err := imagebuilder.Push(context.Background(), imagebuilder.Target{URL: "https://" + addr, Client: c}, "intruder/app", "v1", img); err == nil {
		t.Error("an anonymous push was accepted")
	}
	if got := httpStatus(t, c, http.MethodDelete, "https://"+addr+"/v2/"+first[0].Repo+"/manifests/"+first[0].Digest.String(), "", ""); got != http.StatusUnauthorized {
		t.Errorf("anonymous DELETE: %d, want 401", got)
	}
	if code := s.stop(); code != 0 || !strings.HasSuffix(s.out.String(), "stopped\n") {
		t.Fatalf("graceful stop: exit %d", code)
	}
	caPEM, err := os.ReadFile(ca)
	must(t, err)

	// The incremental archive, with two more images, applied by a second serve.
	w.images = all
	if code, _, _ := w.gapmirror("mirror", "-c", w.isc(""), "file://"+out); code != 0 {
		t.Fatal("second mirror-to-disk failed")
	}
	moveChunks(t, out, airgap)
	s = w.serve("--root", root, "--address", addr, "--from", "file://"+airgap)
	if s.code != 0 || !strings.Contains(s.out.String(), " 2 copied,") {
		t.Fatalf("serve --from the incremental archive: exit %d", s.code)
	}
	if again, _ := os.ReadFile(ca); !bytes.Equal(again, caPEM) {
		t.Error("the CA was made anew: clients trusting the first would stop trusting the registry")
	}
	w.pullAll(addr, tlsDir, all)
	s.stop()

	// The set drops an image: --prune deletes it from the served registry.
	dropped := all[0]
	w.images = all[1:]
	if code, _, _ := w.gapmirror("mirror", "-c", w.isc(""), "file://"+out); code != 0 {
		t.Fatal("third mirror-to-disk failed")
	}
	moveChunks(t, out, airgap)
	s = w.serve("--root", root, "--address", addr, "--from", "file://"+airgap, "--prune")
	if s.code != 0 {
		t.Fatalf("serve --from --prune: exit %d", s.code)
	}
	if got := httpStatus(t, c, http.MethodHead, "https://"+addr+"/v2/"+dropped.Repo+"/manifests/"+dropped.Digest.String(), "", ""); got != http.StatusNotFound {
		t.Errorf("pruned image %s: HEAD %d, want 404", dropped.Repo, got)
	}
	// gc refuses to run under a serving registry, then sweeps once it stopped.
	code, _, stderr := w.gapmirror("serve", "gc", "--root", root)
	if code != 1 || !strings.Contains(stderr, "in use by another gapmirror serve") {
		t.Errorf("gc under a running serve: exit %d\n%s", code, stderr)
	}
	s.stop()
	code, gcOut, _ := w.gapmirror("serve", "gc", "--root", root)
	if code != 0 || strings.Contains(gcOut, ": 0 of") || strings.Contains(gcOut, " 0 B freed") || !strings.Contains(gcOut, "blobs deleted") {
		t.Errorf("gc after prune: exit %d, %s", code, gcOut)
	}
	s = w.serve("--root", root, "--address", addr)
	if s.code != 0 {
		t.Fatalf("serve again: exit %d", s.code)
	}
	w.pullAll(addr, tlsDir, all[1:])
}

// TestServeHtpasswd: with --htpasswd the registry wants a user of the file
// (a wrong password is refused) for everything, the file's users can push
// and delete, and serve --from still pushes with its own credential.
func TestServeHtpasswd(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(2, 16<<10)
	archiveDir, root, pw := filepath.Join(w.dir, "archive"), filepath.Join(w.dir, "srv"), filepath.Join(w.dir, "htpasswd")
	if code, _, _ := w.gapmirror("mirror", "-c", w.isc(""), "file://"+archiveDir); code != 0 {
		t.Fatal("mirror-to-disk failed")
	}
	setPassword := func(password string) {
		t.Helper()
		if _, err := serveHtpasswd(password+"\n", "--file", pw, "alice"); err != nil {
			t.Fatalf("serve htpasswd: %v", err)
		}
	}
	setPassword("s3cret")
	if data, _ := os.ReadFile(pw); !strings.HasPrefix(string(data), "alice:$2") {
		t.Errorf("htpasswd file is not a bcrypt entry for alice: %q", data)
	}
	addr := freeAddress(t)
	s := w.serve("--root", root, "--address", addr, "--htpasswd", pw, "--from", "file://"+archiveDir)
	if s.code != 0 {
		t.Fatalf("serve --htpasswd --from: exit %d", s.code)
	}
	c := caClient(t, filepath.Join(root, "tls", "ca.crt"))
	manifest := "https://" + addr + "/v2/" + w.images[0].Repo + "/manifests/" + w.images[0].Digest.String()
	for _, tc := range []struct {
		user, password string
		want           int
	}{{"", "", 401}, {"alice", "wrong", 401}, {"bob", "s3cret", 401}, {"alice", "s3cret", 200}} {
		if got := httpStatus(t, c, http.MethodHead, manifest, tc.user, tc.password); got != tc.want {
			t.Errorf("HEAD as %q/%q: %d, want %d", tc.user, tc.password, got, tc.want)
		}
	}
	img, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(7, 1024)}})
	must(t, err)
	target := imagebuilder.Target{URL: "https://" + addr, Client: c, Username: "alice", Password: "wrong"}
	if err := imagebuilder.Push(context.Background(), target, "team/app", "v1", img); err == nil {
		t.Error("a push with a wrong password was accepted")
	}
	target.Password = "s3cret"
	must(t, imagebuilder.Push(context.Background(), target, "team/app", "v1", img))
	if got := httpStatus(t, c, http.MethodDelete, "https://"+addr+"/v2/team/app/manifests/"+img.Digest.String(), "alice", "s3cret"); got != http.StatusAccepted {
		t.Errorf("DELETE by alice: %d, want 202", got)
	}
	// A new password counts at once; the old one, accepted before, no more.
	time.Sleep(10 * time.Millisecond) // a later modification time on coarse file systems
	setPassword("n3w")
	if got := httpStatus(t, c, http.MethodHead, manifest, "alice", "s3cret"); got != http.StatusUnauthorized {
		t.Errorf("old password after the change: %d, want 401", got)
	}
	if got := httpStatus(t, c, http.MethodHead, manifest, "alice", "n3w"); got != http.StatusOK {
		t.Errorf("new password: %d, want 200", got)
	}
}

// serveHtpasswd runs gapmirror serve htpasswd ARGS with stdin as its
// standard input.
func serveHtpasswd(stdin string, args ...string) (string, error) {
	var out, errb bytes.Buffer
	cmd := newRootCommand(&errb)
	cmd.SetArgs(append([]string{"serve", "htpasswd"}, args...))
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	err := cmd.Execute()
	return out.String(), err
}

// TestServeHtpasswdRoot: serve htpasswd --root DIR USER writes
// DIR/htpasswd, which serve --root DIR then uses without --htpasswd (it
// says so, and anonymous users are refused); without --root or --file the
// command says what to give; an entry that is not bcrypt stops serve at
// start, naming the file, line and user, instead of failing every request.
func TestServeHtpasswdRoot(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	root := filepath.Join(w.dir, "srv")
	if _, err := serveHtpasswd("pw\n", "alice"); err == nil || !strings.Contains(err.Error(), "give --root DIR") || !strings.Contains(err.Error(), "--file FILE") {
		t.Errorf("serve htpasswd without a file: %v", err)
	}
	if _, err := serveHtpasswd("pw\n", "--root", root, "--file", filepath.Join(w.dir, "h"), "alice"); err == nil || !strings.Contains(err.Error(), "--root DIR (for DIR/htpasswd) or --file FILE") {
		t.Errorf("serve htpasswd with --root and --file: %v", err)
	}
	out, err := serveHtpasswd("s3cret\n", "--root", root, "alice")
	must(t, err)
	file := filepath.Join(root, "htpasswd")
	if !strings.Contains(out, "gapmirror serve --root "+root+" now asks for users of this file") {
		t.Errorf("serve htpasswd --root says: %s", out)
	}
	if data, _ := os.ReadFile(file); !strings.HasPrefix(string(data), "alice:$2") {
		t.Errorf("%s is not a bcrypt entry for alice: %q", file, data)
	}
	addr := freeAddress(t)
	s := w.serve("--root", root, "--address", addr)
	if s.code != 0 {
		t.Fatalf("serve: exit %d", s.code)
	}
	if !strings.Contains(s.out.String(), "basic auth: users of "+file) {
		t.Errorf("serve does not say it uses %s:\n%s", file, s.out)
	}
	c := caClient(t, filepath.Join(root, "tls", "ca.crt"))
	for _, tc := range []struct {
		user, password string
		want           int
	}{{"", "", 401}, {"alice", "wrong", 401}, {"alice", "s3cret", 200}} {
		if got := httpStatus(t, c, http.MethodGet, "https://"+addr+"/v2/_catalog", tc.user, tc.password); got != tc.want {
			t.Errorf("GET /v2/_catalog as %q/%q: %d, want %d", tc.user, tc.password, got, tc.want)
		}
	}
	s.stop()

	// An apr1 (MD5) entry, as htpasswd -m or openssl passwd -apr1 make:
	// distribution would start and then refuse every request of bob.
	data, err := os.ReadFile(file)
	must(t, err)
	must(t, os.WriteFile(file, append(append([]byte("# team\n"), data...), "bob:$apr1$9Cv/OMGj$ox/CVna9EPX4B25GEg6y9.\n"...), 0o600))
	code, stdout, stderr := w.gapmirror("serve", "--root", root, "--address", addr)
	for _, want := range []string{file + " line 3", `user "bob"`, "$apr1$", "not bcrypt", "gapmirror serve htpasswd --file " + file + " bob"} {
		if code != 1 || !strings.Contains(stderr, want) {
			t.Errorf("serve with an apr1 entry: exit %d, stderr does not say %q:\n%s", code, want, stderr)
		}
	}
	if stdout != "" {
		t.Errorf("serve printed before refusing:\n%s", stdout)
	}
}

// TestServeRegistryConfig: --registry-config passes a distribution
// configuration through (here the inmemory storage driver: nothing lands
// under the root but TLS files), and one with an auth section is refused.
func TestServeRegistryConfig(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(2, 16<<10)
	archiveDir, root := filepath.Join(w.dir, "archive"), filepath.Join(w.dir, "srv")
	if code, _, _ := w.gapmirror("mirror", "-c", w.isc(""), "file://"+archiveDir); code != 0 {
		t.Fatal("mirror-to-disk failed")
	}
	conf := filepath.Join(w.dir, "config.yml")
	must(t, os.WriteFile(conf, []byte("version: 0.1\nstorage:\n  inmemory: {}\n"), 0o644))
	addr := freeAddress(t)
	s := w.serve("--root", root, "--address", addr, "--registry-config", conf, "--plain-http", "--from", "file://"+archiveDir)
	if s.code != 0 {
		t.Fatalf("serve --registry-config: exit %d", s.code)
	}
	for _, ex := range w.images {
		if got := httpStatus(t, http.DefaultClient, http.MethodHead, "http://"+addr+"/v2/"+ex.Repo+"/manifests/"+ex.Digest.String(), "", ""); got != http.StatusOK {
			t.Errorf("%s@%s: HEAD %d", ex.Repo, ex.Digest, got)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "docker")); !os.IsNotExist(err) {
		t.Errorf("the inmemory driver was not used: %s/docker is there (%v)", root, err)
	}
	s.stop()

	must(t, os.WriteFile(conf, []byte("version: 0.1\nstorage:\n  inmemory: {}\nauth:\n  silly:\n    realm: x\n    service: y\n"), 0o644))
	code, _, stderr := w.gapmirror("serve", "--root", root, "--address", addr, "--registry-config", conf)
	if code != 1 || !strings.Contains(stderr, "remove the auth section and use --htpasswd") {
		t.Errorf("config with auth: exit %d\n%s", code, stderr)
	}
	code, _, stderr = w.gapmirror("serve", "--root", root, "--address", addr, "--htpasswd", filepath.Join(w.dir, "missing"))
	if code != 1 || !strings.Contains(stderr, "gapmirror serve htpasswd --file") {
		t.Errorf("missing htpasswd file: exit %d\n%s", code, stderr)
	}
	// GCS is opted in at build time (serve/gcsdriver.go): a default build
	// says so and how to build one, before anything starts.
	must(t, os.WriteFile(conf, []byte("version: 0.1\nstorage:\n  gcs:\n    bucket: mirror\n"), 0o644))
	code, _, stderr = w.gapmirror("serve", "--root", root, "--address", addr, "--registry-config", conf)
	if code != 1 || !strings.Contains(stderr, "storage.gcs") || !strings.Contains(stderr, "make build EXTRA_TAGS=gapmirror_gcs") || strings.Contains(stderr, "goroutine") {
		t.Errorf("a gcs configuration in a build without the driver: exit %d\n%s", code, stderr)
	}
}

// heldPush is the progress of serve --from's push, holding the copy at the
// first image it completes until release is closed.
type heldPush struct {
	transfer.Progress
	mu      sync.Mutex
	phase   string
	held    chan struct{} // closed when the copy is held
	release chan struct{}
	once    sync.Once
}

func (h *heldPush) Phase(name string, images int, total transfer.Totals) {
	h.mu.Lock()
	h.phase = name
	h.mu.Unlock()
	h.Progress.Phase(name, images, total)
}

func (h *heldPush) ImageDone(img imageset.Image, skipped bool, err error) {
	h.Progress.ImageDone(img, skipped, err)
	h.mu.Lock()
	copying := h.phase == "copying"
	h.mu.Unlock()
	if copying && !skipped && err == nil {
		h.once.Do(func() {
			close(h.held)
			<-h.release
		})
	}
}

// TestServeInterruptedPush: the registry answers (/v2/, the catalog of what
// is pushed so far) while its --from push is provably under way (held
// after its first image: not "ready" yet); SIGINT then stops the push and
// the registry with a failure; the next serve --from pushes what is
// missing and every image is there, complete.
func TestServeInterruptedPush(t *testing.T) {
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(12, 64<<10)
	archiveDir, root := filepath.Join(w.dir, "archive"), filepath.Join(w.dir, "srv")
	if code, _, _ := w.gapmirror("mirror", "-c", w.isc(""), "file://"+archiveDir); code != 0 {
		t.Fatal("mirror-to-disk failed")
	}
	hold := &heldPush{held: make(chan struct{}), release: make(chan struct{})}
	defer func(f func(transfer.Progress) transfer.Progress) { servePushProgress = f }(servePushProgress)
	servePushProgress = func(p transfer.Progress) transfer.Progress { hold.Progress = p; return hold }
	released := false
	defer func() {
		if !released {
			close(hold.release)
		}
	}()

	addr := freeAddress(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, errb := &syncBuffer{}, &syncBuffer{}
	done := make(chan int, 1)
	args := []string{"serve", "--no-progress", "--registries-conf", w.regsConf, "--cache-dir", filepath.Join(w.dir, "cache"),
		"--root", root, "--address", addr, "--from", "file://" + archiveDir, "--parallel-images", "1"}
	go func() { done <- run(ctx, args, out, errb) }()
	select {
	case <-hold.held:
	case code := <-done:
		t.Fatalf("serve exited (%d) before pushing an image:\n%s\n%s", code, out, errb)
	case <-time.After(2 * time.Minute):
		t.Fatalf("no image pushed after 2 minutes:\n%s\n%s", out, errb)
	}
	// The push is under way, held after its first image: the registry answers.
	c := caClient(t, filepath.Join(root, "tls", "ca.crt"))
	if got := httpStatus(t, c, http.MethodGet, "https://"+addr+"/v2/", "", ""); got != http.StatusUnauthorized {
		t.Errorf("GET /v2/ during the push: %d, want 401 (a challenge for clients that push)", got)
	}
	resp, err := c.Get("https://" + addr + "/v2/_catalog")
	must(t, err)
	var catalog struct{ Repositories []string }
	must(t, json.NewDecoder(resp.Body).Decode(&catalog))
	_ = resp.Body.Close()
	if len(catalog.Repositories) == 0 || len(catalog.Repositories) >= len(w.images) {
		t.Errorf("catalog during the push lists %q: want the repositories pushed so far, some but not all", catalog.Repositories)
	}
	if strings.Contains(out.String(), "ready: ") {
		t.Fatalf("serve says ready while its push is held:\n%s", out)
	}
	// SIGINT during the push.
	cancel()
	close(hold.release)
	released = true
	code := <-done
	t.Logf("interrupted serve → exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errb)
	if code == 0 || strings.Contains(out.String(), "ready: ") {
		t.Errorf("serve interrupted during its push: exit %d, want a failure and no ready", code)
	}
	servePushProgress = func(p transfer.Progress) transfer.Progress { return p }
	s := w.serve("--root", root, "--address", addr, "--from", "file://"+archiveDir)
	if s.code != 0 {
		t.Fatalf("serve --from after the interrupt: exit %d", s.code)
	}
	// One image at a time, held after the first: the interrupt stopped the
	// push there.
	if !strings.Contains(s.out.String(), "12 images: 11 copied, 1 already at the destination") {
		t.Errorf("the rerun does not push exactly what the interrupted push left out:\n%s", s.out)
	}
	w.pullAll(addr, filepath.Join(root, "tls"), w.images)
}

// servedBlobs adds to into the manifest repo@d of the served registry and
// every blob and manifest it references (an index's images too), with
// their sizes, reading as user.
func servedBlobs(t *testing.T, c *http.Client, base, repo string, d digest.Digest, user, password string, into map[digest.Digest]int64) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/v2/"+repo+"/manifests/"+d.String(), nil)
	must(t, err)
	req.Header.Set("Accept", "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json, application/vnd.docker.distribution.manifest.list.v2+json")
	req.SetBasicAuth(user, password)
	resp, err := c.Do(req)
	must(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	must(t, err)
	if resp.StatusCode != http.StatusOK || digest.FromBytes(data) != d {
		t.Fatalf("GET %s@%s: %d, digest %s", repo, d, resp.StatusCode, digest.FromBytes(data))
	}
	into[d] = int64(len(data))
	m := manifestRefs(t, data)
	for _, child := range m.Manifests {
		servedBlobs(t, c, base, repo, child.Digest, user, password, into)
	}
	for _, b := range append(m.Layers, m.Config) {
		if b.Digest != "" {
			into[b.Digest] = b.Size
		}
	}
}

// TestServeDeleteThenGC: against a served registry with --htpasswd users
// (credentials in the auth file, the served CA as --dest-cert-dir),
// mirror-to-mirror, then delete --generate and --delete-yaml-file (whose
// output points at serve gc); with the registry stopped serve gc deletes
// exactly the blobs only the deleted images used and says how many bytes
// it freed; served again, the kept images pull whole and the deleted ones
// are gone.
func TestServeDeleteThenGC(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(4, 64<<10)
	im := w.images
	// 0 app-00, 1 app-01 (deleted); 2 tool-02, 3 app-03 (index, by digest only) kept.
	root, pw, ws := filepath.Join(w.dir, "srv"), filepath.Join(w.dir, "htpasswd"), filepath.Join(w.dir, "ws")
	if _, err := serveHtpasswd("s3cret\n", "--file", pw, "alice"); err != nil {
		t.Fatal(err)
	}
	addr := freeAddress(t)
	s := w.serve("--root", root, "--address", addr, "--htpasswd", pw)
	if s.code != 0 {
		t.Fatalf("serve: exit %d", s.code)
	}
	must(t, os.WriteFile(w.authFile, []byte(`{"auths":{"`+addr+`":{"auth":"`+base64.StdEncoding.EncodeToString([]byte("alice:s3cret"))+`"}}}`), 0o600))
	tlsDir := filepath.Join(root, "tls")
	verified := []string{"--dest-tls-verify=true", "--dest-cert-dir", tlsDir}
	dst := "docker://" + addr + "/mirror"
	if code, _, _ := w.gapmirror(append([]string{"mirror", "-c", w.isc(""), "--workspace", "file://" + ws, dst}, verified...)...); code != 0 {
		t.Fatal("mirror-to-mirror into the served registry failed")
	}
	c := caClient(t, filepath.Join(tlsDir, "ca.crt"))
	base := "https://" + addr
	deleted, kept := map[digest.Digest]int64{}, map[digest.Digest]int64{}
	for i, ex := range im {
		into := kept
		if i < 2 {
			into = deleted
		}
		servedBlobs(t, c, base, "mirror/"+ex.Repo, ex.Digest, "alice", "s3cret", into)
	}
	var freed int64
	n := 0
	for d, size := range deleted {
		if _, ok := kept[d]; !ok {
			freed += size
			n++
		}
	}
	if n < 4 {
		t.Fatalf("the deleted images have %d blobs of their own: the check below would prove little", n)
	}

	disc := w.disc("disc.yaml", "  additionalImages:\n  - name: "+im[0].Ref+"\n  - name: "+im[1].Ref+"\n")
	code, stdout, _ := w.gapmirror(append([]string{"delete", "-c", disc, "--generate", "--workspace", "file://" + ws, dst}, verified...)...)
	plan := filepath.Join(ws, "working-dir", "delete", "delete-images.yaml")
	if code != 0 || !strings.Contains(stdout, "nothing was deleted") {
		t.Fatalf("delete --generate: exit %d", code)
	}
	code, stdout, _ = w.gapmirror(append([]string{"delete", "--delete-yaml-file", plan, dst}, verified...)...)
	if code != 0 || !strings.Contains(stdout, "gapmirror serve gc --root") {
		t.Fatalf("delete --delete-yaml-file: exit %d, or no word of serve gc:\n%s", code, stdout)
	}
	for _, ex := range im[:2] {
		if got := httpStatus(t, c, http.MethodHead, base+"/v2/mirror/"+ex.Repo+"/manifests/"+ex.Digest.String(), "alice", "s3cret"); got != http.StatusNotFound {
			t.Errorf("deleted %s: HEAD %d, want 404", ex.Repo, got)
		}
	}
	if s.stop() != 0 {
		t.Fatal("serve did not stop cleanly")
	}

	code, gcOut, gcErr := w.gapmirror("serve", "gc", "--root", root)
	want := fmt.Sprintf("garbage collection: %d of ", n)
	if code != 0 || !strings.Contains(gcOut, want) || !strings.Contains(gcOut, " blobs deleted, "+progress.HumanBytes(freed)+" freed;") {
		t.Errorf("serve gc: exit %d, want %q… %s freed:\n%s", code, want, progress.HumanBytes(freed), gcOut)
	}
	if strings.Contains(gcOut+gcErr, "Deleting blob") {
		t.Errorf("serve gc logged every blob outside debug:\n%s\n%s", gcOut, gcErr)
	}
	code, gcOut, _ = w.gapmirror("serve", "gc", "--root", root)
	if code != 0 || !strings.Contains(gcOut, ": 0 of ") || !strings.Contains(gcOut, " 0 B freed") {
		t.Errorf("second serve gc: exit %d:\n%s", code, gcOut)
	}

	s = w.serve("--root", root, "--address", addr, "--htpasswd", pw)
	if s.code != 0 {
		t.Fatalf("serve again: exit %d", s.code)
	}
	kept2 := []example{}
	for _, ex := range im[2:] {
		ex.Repo = "mirror/" + ex.Repo
		kept2 = append(kept2, ex)
	}
	w.pullAll(addr, tlsDir, kept2)
	for d := range deleted {
		if _, ok := kept[d]; ok {
			continue
		}
		if got := httpStatus(t, c, http.MethodHead, base+"/v2/mirror/"+im[0].Repo+"/blobs/"+d.String(), "alice", "s3cret"); got != http.StatusNotFound {
			t.Errorf("blob %s of a deleted image: HEAD %d after gc, want 404", d, got)
		}
	}
}

// TestServeGCRoots: serve gc on a root served but never pushed to says
// there is nothing to collect; pointed at a directory that is no serve
// root it is refused, naming --root, and leaves no lock file there.
func TestServeGCRoots(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	root := filepath.Join(w.dir, "srv")
	s := w.serve("--root", root, "--address", freeAddress(t))
	if s.code != 0 || s.stop() != 0 {
		t.Fatalf("serve: exit %d", s.code)
	}
	code, out, stderr := w.gapmirror("serve", "gc", "--root", root)
	if code != 0 || !strings.Contains(out, "nothing was pushed to "+root+" yet: nothing to collect") {
		t.Errorf("gc of a root never pushed to: exit %d\n%s%s", code, out, stderr)
	}
	code, _, stderr = w.gapmirror("serve", "gc", "--root", w.dir)
	if code != 1 || !strings.Contains(stderr, "--root "+w.dir+" does not look like a gapmirror serve root") {
		t.Errorf("gc of a directory that is no root: exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(w.dir, "serve.lock")); !os.IsNotExist(err) {
		t.Errorf("gc left serve.lock in %s (%v)", w.dir, err)
	}
}

// TestServeGCDeleteUntagged: serve gc --delete-untagged deletes a manifest
// no tag reaches and the blobs only it used, says how many manifests it
// deleted, and keeps a tagged image and a tagged index whole (its
// platform manifests are reached through the index); plain gc keeps the
// untagged manifest.
func TestServeGCDeleteUntagged(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	root := filepath.Join(w.dir, "srv")
	addr := freeAddress(t)
	// Pushes need a user (without one, serve is pull-only).
	if _, err := serveHtpasswd("s3cret\n", "--root", root, "alice"); err != nil {
		t.Fatal(err)
	}
	s := w.serve("--root", root, "--address", addr)
	if s.code != 0 {
		t.Fatalf("serve: exit %d", s.code)
	}
	c := caClient(t, filepath.Join(root, "tls", "ca.crt"))
	target := imagebuilder.Target{URL: "https://" + addr, Client: c, Username: "alice", Password: "s3cret"}
	ctx := context.Background()
	tagged, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(301, 32<<10)}})
	must(t, err)
	untagged, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(302, 48<<10)}})
	must(t, err)
	idx, err := imagebuilder.BuildIndex(imagebuilder.IndexSpec{Images: []imagebuilder.ImageSpec{
		{Platform: imagebuilder.Platform{OS: "linux", Architecture: "amd64"}, Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(303, 16<<10)}},
		{Platform: imagebuilder.Platform{OS: "linux", Architecture: "arm64"}, Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(304, 16<<10)}},
	}})
	must(t, err)
	must(t, imagebuilder.Push(ctx, target, "mirror/apps/kept", "v1", tagged))
	must(t, imagebuilder.Push(ctx, target, "mirror/apps/orphan", "", untagged))
	must(t, imagebuilder.PushIndex(ctx, target, "mirror/apps/multi", "v1", idx))
	if s.stop() != 0 {
		t.Fatal("serve did not stop cleanly")
	}

	code, out, _ := w.gapmirror("serve", "gc", "--root", root)
	if code != 0 || !strings.Contains(out, "garbage collection: 0 of ") || strings.Contains(out, "untagged") {
		t.Errorf("plain gc: exit %d, want nothing deleted and no word of untagged manifests:\n%s", code, out)
	}
	code, out, _ = w.gapmirror("serve", "gc", "--root", root, "--delete-untagged")
	freed := int64(len(untagged.Manifest)) + untagged.Config.Size + untagged.Layers[0].Size
	if code != 0 || !strings.Contains(out, "garbage collection: 3 of ") || !strings.Contains(out, " "+progress.HumanBytes(freed)+" freed; 1 untagged manifests deleted;") {
		t.Errorf("gc --delete-untagged: exit %d, want the orphan's manifest, config and layer (%s) deleted and 1 untagged manifest:\n%s", code, progress.HumanBytes(freed), out)
	}

	s = w.serve("--root", root, "--address", addr)
	if s.code != 0 {
		t.Fatalf("serve again: exit %d", s.code)
	}
	base := "https://" + addr + "/v2/mirror/apps/"
	for _, m := range []struct {
		repo string
		d    digest.Digest
		want int
	}{
		{"orphan", untagged.Digest, http.StatusNotFound},
		{"kept", tagged.Digest, http.StatusOK},
		{"multi", idx.Digest, http.StatusOK},
		{"multi", idx.Images[0].Digest, http.StatusOK},
		{"multi", idx.Images[1].Digest, http.StatusOK},
	} {
		if got := httpStatus(t, c, http.MethodHead, base+m.repo+"/manifests/"+m.d.String(), "alice", "s3cret"); got != m.want {
			t.Errorf("%s@%s after gc --delete-untagged: HEAD %d, want %d", m.repo, m.d, got, m.want)
		}
	}
	if got := httpStatus(t, c, http.MethodHead, base+"orphan/blobs/"+untagged.Layers[0].Digest.String(), "alice", "s3cret"); got != http.StatusNotFound {
		t.Errorf("the orphan's layer after gc --delete-untagged: HEAD %d, want 404", got)
	}
	if got := httpStatus(t, c, http.MethodHead, base+"kept/blobs/"+tagged.Layers[0].Digest.String(), "alice", "s3cret"); got != http.StatusOK {
		t.Errorf("the kept image's layer after gc --delete-untagged: HEAD %d, want 200", got)
	}
}
