//go:build !gapmirror_lean

package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/internal/registrytest"
	"github.com/gapmirror/gapmirror/internal/s3fake"
)

// startRoundRobin starts a registrytest.RoundRobin over replicas for the
// test.
func startRoundRobin(t *testing.T, replicas ...string) *registrytest.RoundRobin {
	t.Helper()
	lb, err := registrytest.StartRoundRobin(replicas...)
	must(t, err)
	t.Cleanup(func() { _ = lb.Close() })
	return lb
}

// s3Pair is an object store, a Redis and the configuration two replicas
// share (one bucket, one http.secret, the blob-descriptor cache in Redis),
// with a user alice in an htpasswd file they share.
type s3Pair struct {
	store          *s3fake.Server
	redis          *s3fake.Redis
	conf, htpasswd string
}

func newS3Pair(t *testing.T, w *world) *s3Pair {
	t.Helper()
	store, err := s3fake.Start("mirror")
	must(t, err)
	t.Cleanup(store.Close)
	redis, err := s3fake.StartRedis()
	must(t, err)
	t.Cleanup(redis.Close)
	p := &s3Pair{store: store, redis: redis, conf: filepath.Join(w.dir, "registry.yml"), htpasswd: filepath.Join(w.dir, "htpasswd")}
	p.writeConf(t, "a-long-random-string-shared-by-all-replicas")
	if _, err := serveHtpasswd("s3cret\n", "--file", p.htpasswd, "alice"); err != nil {
		t.Fatal(err)
	}
	return p
}

// writeConf writes the replicas' configuration with the given http.secret.
func (p *s3Pair) writeConf(t *testing.T, secret string) {
	t.Helper()
	must(t, os.WriteFile(p.conf, []byte(fmt.Sprintf(`version: 0.1
http:
  secret: %s
storage:
  s3:
    region: %s
    regionendpoint: %s
    forcepathstyle: true
    bucket: mirror
    accesskey: %s
    secretkey: %s
    rootdirectory: /registry
  delete:
    enabled: true
  redirect:
    disable: true
  cache:
    blobdescriptor: redis
redis:
  addrs: [%s]
`, secret, s3fake.Region, p.store.Endpoint, p.store.AccessKey, p.store.SecretKey, p.redis.Addr())), 0o644))
}

// replica starts gapmirror serve on the pair's storage with a root of its own.
func (p *s3Pair) replica(w *world, name, addr string) *served {
	w.t.Helper()
	s := w.serve("--root", filepath.Join(w.dir, name), "--address", addr, "--plain-http", "--htpasswd", p.htpasswd, "--registry-config", p.conf)
	if s.code != 0 {
		w.t.Fatalf("replica %s: exit %d", name, s.code)
	}
	return s
}

// verifyServed reads image repo@d and every manifest and blob it references
// from the registry at base (as alice), checking each against its digest.
func verifyServed(t *testing.T, base, repo string, d digest.Digest) {
	t.Helper()
	get := func(kind string, d digest.Digest) []byte {
		req, err := http.NewRequest(http.MethodGet, base+"/v2/"+repo+"/"+kind+"/"+d.String(), nil)
		must(t, err)
		req.Header.Set("Accept", "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json, application/vnd.docker.distribution.manifest.list.v2+json")
		req.SetBasicAuth("alice", "s3cret")
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		must(t, err)
		if resp.StatusCode != http.StatusOK || digest.FromBytes(data) != d {
			t.Errorf("%s: GET %s %s@%s: %d, content digest %s", base, kind, repo, d, resp.StatusCode, digest.FromBytes(data))
			return nil
		}
		return data
	}
	var walk func(d digest.Digest)
	walk = func(d digest.Digest) {
		data := get("manifests", d)
		if data == nil {
			return
		}
		m := manifestRefs(t, data)
		for _, c := range m.Manifests {
			walk(c.Digest)
		}
		for _, b := range append(m.Layers, m.Config) {
			if b.Digest != "" {
				get("blobs", b.Digest)
			}
		}
	}
	walk(d)
}

// TestServeS3Replicas: two gapmirror serve replicas on one bucket of an S3
// store (distribution's S3 driver speaking the S3 protocol over HTTP to
// gofakes3), one http.secret, one Redis blob-descriptor cache, behind a
// round-robin balancer. Disk-to-mirror of an archive into the pair (every
// upload's requests alternate between the replicas), every image then read
// whole, by digest, from each replica directly; a blob uploaded in parts
// sent alternately to each replica; --prune and delete through the pair;
// serve gc refused while either replica runs (their leases in the bucket:
// gc's own --root is free), run once both stopped; then every kept image
// whole and the deleted ones gone, from a replica started again.
func TestServeS3Replicas(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(6, 64<<10)
	all := w.images
	p := newS3Pair(t, w)
	addrA, addrB := freeAddress(t), freeAddress(t)
	a := p.replica(w, "a", addrA)
	b := p.replica(w, "b", addrB)
	lb := startRoundRobin(t, addrA, addrB)
	must(t, os.WriteFile(w.authFile, []byte(`{"auths":{"`+lb.Host+`":{"auth":"`+base64.StdEncoding.EncodeToString([]byte("alice:s3cret"))+`"}}}`), 0o600))

	out, airgap := filepath.Join(w.dir, "out"), filepath.Join(w.dir, "airgap")
	if code, _, _ := w.gapmirror("mirror", "-c", w.isc(""), "file://"+out); code != 0 {
		t.Fatal("mirror-to-disk failed")
	}
	moveChunks(t, out, airgap)
	code, stdout, _ := w.gapmirror("mirror", "--from", "file://"+airgap, "docker://"+lb.Host)
	if code != 0 || !strings.Contains(stdout, "6 images: 6 copied,") {
		t.Fatalf("disk-to-mirror into the pair: exit %d", code)
	}
	if lb.Hits[0].Load() < 20 || lb.Hits[1].Load() < 20 {
		t.Fatalf("the balancer sent %d and %d requests to the replicas: the push did not go through both", lb.Hits[0].Load(), lb.Hits[1].Load())
	}
	for _, base := range []string{"http://" + addrA, "http://" + addrB} {
		for _, ex := range all {
			verifyServed(t, base, ex.Repo, ex.Digest)
		}
	}
	if keys, _ := p.store.Objects("mirror", "registry/docker/registry/v2/blobs/"); len(keys) == 0 {
		t.Fatal("nothing in the bucket: the replicas did not store in S3")
	}
	if len(p.redis.Keys()) == 0 {
		t.Error("nothing in Redis: the blob-descriptor cache was not used")
	}

	// One blob uploaded in three requests, each to the other replica.
	part1, part2 := []byte(strings.Repeat("a", 3000)), []byte(strings.Repeat("b", 2000))
	whole := digest.FromBytes(append(append([]byte{}, part1...), part2...))
	loc := uploadStep(t, http.MethodPost, "http://"+addrA+"/v2/apps/parts/blobs/uploads/", nil, http.StatusAccepted)
	loc = uploadStep(t, http.MethodPatch, onHost(t, loc, addrB), part1, http.StatusAccepted)
	loc = uploadStep(t, http.MethodPatch, onHost(t, loc, addrA), part2, http.StatusAccepted)
	uploadStep(t, http.MethodPut, onHost(t, loc, addrB)+"&digest="+whole.String(), nil, http.StatusCreated)
	for _, addr := range []string{addrA, addrB} {
		c := &http.Client{}
		if got := httpStatus(t, c, http.MethodHead, "http://"+addr+"/v2/apps/parts/blobs/"+whole.String(), "alice", "s3cret"); got != http.StatusOK {
			t.Errorf("the blob uploaded across the replicas, HEAD on %s: %d", addr, got)
		}
	}

	// The set drops an image: --prune through the pair.
	pruned, deleted := all[0], all[1]
	w.images = all[1:]
	if code, _, _ := w.gapmirror("mirror", "-c", w.isc(""), "file://"+out); code != 0 {
		t.Fatal("second mirror-to-disk failed")
	}
	moveChunks(t, out, airgap)
	if code, _, _ := w.gapmirror("mirror", "--from", "file://"+airgap, "docker://"+lb.Host, "--prune"); code != 0 {
		t.Fatalf("disk-to-mirror --prune into the pair: exit %d", code)
	}
	// delete --generate and --delete-yaml-file through the pair.
	disc := w.disc("disc.yaml", "  additionalImages:\n  - name: "+deleted.Ref+"\n")
	dst := "docker://" + lb.Host
	if code, _, _ := w.gapmirror("delete", "-c", disc, "--generate", "--workspace", "file://"+airgap, dst); code != 0 {
		t.Fatal("delete --generate through the pair failed")
	}
	plan := filepath.Join(airgap, "working-dir", "delete", "delete-images.yaml")
	if code, stdout, _ := w.gapmirror("delete", "--delete-yaml-file", plan, dst); code != 0 || !strings.Contains(stdout, "gapmirror serve gc --root") {
		t.Fatalf("delete --delete-yaml-file through the pair: exit %d", code)
	}
	for _, ex := range []example{pruned, deleted} {
		for _, addr := range []string{addrA, addrB} {
			if got := httpStatus(t, http.DefaultClient, http.MethodHead, "http://"+addr+"/v2/"+ex.Repo+"/manifests/"+ex.Digest.String(), "alice", "s3cret"); got != http.StatusNotFound {
				t.Errorf("%s (pruned or deleted) on %s: HEAD %d, want 404", ex.Repo, addr, got)
			}
		}
	}

	// serve gc: refused while either replica runs, though its own root is free.
	gcRoot := filepath.Join(w.dir, "gc")
	must(t, os.Mkdir(gcRoot, 0o755))
	gc := func() (int, string, string) {
		return w.gapmirror("serve", "gc", "--root", gcRoot, "--registry-config", p.conf)
	}
	if code, _, stderr := gc(); code != 1 || !strings.Contains(stderr, "in use by a running gapmirror serve") || !strings.Contains(stderr, `s3 bucket "mirror" at `+p.store.Endpoint) {
		t.Errorf("gc while both replicas run: exit %d\n%s", code, stderr)
	}
	if a.stop() != 0 {
		t.Fatal("replica a did not stop cleanly")
	}
	if code, _, stderr := gc(); code != 1 || !strings.Contains(stderr, addrB) {
		t.Errorf("gc while replica b runs: exit %d, want a refusal naming %s\n%s", code, addrB, stderr)
	}
	if b.stop() != 0 {
		t.Fatal("replica b did not stop cleanly")
	}
	code, gcOut, _ := gc()
	if code != 0 || strings.Contains(gcOut, ": 0 of") || !strings.Contains(gcOut, "blobs deleted") {
		t.Fatalf("gc once both replicas stopped: exit %d\n%s", code, gcOut)
	}

	// Started again: every kept image whole, through either replica.
	a = p.replica(w, "a", addrA)
	b = p.replica(w, "b", addrB)
	for _, base := range []string{"http://" + addrA, "http://" + addrB} {
		for _, ex := range all[2:] {
			verifyServed(t, base, ex.Repo, ex.Digest)
		}
	}
	// and the blobs only the pruned and deleted images used are gone
	// (Redis cached their descriptors before gc).
	gone, kept := map[digest.Digest]int64{}, map[digest.Digest]int64{}
	for _, ex := range []example{pruned, deleted} {
		w.blobsOf(ex.Repo, ex.Digest, gone)
	}
	for _, ex := range all[2:] {
		w.blobsOf(ex.Repo, ex.Digest, kept)
	}
	n := 0
	for d := range gone {
		if _, ok := kept[d]; ok {
			continue
		}
		n++
		for _, addr := range []string{addrA, addrB} {
			if got := httpStatus(t, http.DefaultClient, http.MethodHead, "http://"+addr+"/v2/"+deleted.Repo+"/blobs/"+d.String(), "alice", "s3cret"); got != http.StatusNotFound {
				t.Errorf("blob %s of a deleted image on %s after gc: HEAD %d, want 404", d, addr, got)
			}
		}
	}
	if n == 0 {
		t.Fatal("the deleted images have no blob of their own: the check proves nothing")
	}
	_ = a
	_ = b
}

// uploadStep sends one request of a blob upload as alice and returns the
// Location of the upload's next step.
func uploadStep(t *testing.T, method, u string, body []byte, want int) string {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, u, strings.NewReader(string(body)))
	must(t, err)
	req.SetBasicAuth("alice", "s3cret")
	if body != nil {
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	msg, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %s %s, want %d", method, u, resp.Status, msg, want)
	}
	return resp.Header.Get("Location")
}

// onHost is the upload location loc (absolute or a path) at host instead.
func onHost(t *testing.T, loc, host string) string {
	t.Helper()
	u, err := url.Parse(loc)
	must(t, err)
	u.Scheme, u.Host = "http", host
	return u.String()
}

// TestServeS3BadStorage: gapmirror serve on object storage it cannot use
// exits 1 at start, before printing anything, with an error naming the
// bucket and endpoint and what to check: a bucket that does not exist,
// credentials the store refuses, an endpoint nobody answers at; and so
// does a blob-descriptor cache whose Redis nobody answers at.
func TestServeS3BadStorage(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	p := newS3Pair(t, w)
	good, err := os.ReadFile(p.conf)
	must(t, err)
	nobody := "http://" + freeAddress(t)
	for _, c := range []struct {
		name, from, to string
		want           []string
	}{
		{"wrong bucket", "bucket: mirror", "bucket: mirorr", []string{`s3 bucket "mirorr" at ` + p.store.Endpoint, "NoSuchBucket", "create it, or correct its name"}},
		{"wrong secret key", "secretkey: " + p.store.SecretKey, "secretkey: wrong", []string{"SignatureDoesNotMatch", "the store refused the credentials: check the access key and secret key"}},
		{"unknown access key", "accesskey: " + p.store.AccessKey, "accesskey: NOBODY", []string{"InvalidAccessKeyId", "the store refused the credentials"}},
		{"unreachable endpoint", "regionendpoint: " + p.store.Endpoint, "regionendpoint: " + nobody, []string{`s3 bucket "mirror" at ` + nobody, "connection refused", "cannot be reached: check regionendpoint"}},
		{"unreachable Redis", "addrs: [" + p.redis.Addr() + "]", "addrs: [" + strings.TrimPrefix(nobody, "http://") + "]",
			[]string{"the Redis of the blob-descriptor cache (redis.addrs " + strings.TrimPrefix(nobody, "http://"), "does not answer", "connection refused"}},
	} {
		conf := filepath.Join(w.dir, strings.ReplaceAll(c.name, " ", "-")+".yml")
		must(t, os.WriteFile(conf, []byte(strings.Replace(string(good), c.from, c.to, 1)), 0o644))
		code, stdout, stderr := w.gapmirror("serve", "--root", filepath.Join(w.dir, "srv"), "--address", freeAddress(t), "--plain-http", "--registry-config", conf)
		if code != 1 || stdout != "" {
			t.Errorf("%s: exit %d, stdout %q: want 1 and nothing served", c.name, code, stdout)
		}
		for _, want := range append(c.want, "--registry-config "+conf) {
			if !strings.Contains(stderr, want) {
				t.Errorf("%s: the error does not say %q:\n%s", c.name, want, stderr)
			}
		}
	}
	if keys, _ := p.store.Objects("mirror", ""); len(keys) != 0 {
		t.Errorf("refused starts left objects in the bucket: %v", keys)
	}
}

// TestServeReplicasOtherSecret: replicas whose http.secret differ, on
// shared storage that has no leases (a shared filesystem), behind a
// balancer that starts every upload on one replica and sends the rest of it
// to the other: every upload fails ("invalid secret"), so disk-to-mirror
// fails naming every image and the cause, no image is at the mirror, and
// a rerun once the replicas share a secret pushes every image, all of them
// whole. On object storage the second replica refuses to start instead
// (TestServeS3Refusals in package serve).
func TestServeReplicasOtherSecret(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(3, 32<<10)
	htpasswd := filepath.Join(w.dir, "htpasswd")
	if _, err := serveHtpasswd("s3cret\n", "--file", htpasswd, "alice"); err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(w.dir, "shared-storage")
	confA, confB := filepath.Join(w.dir, "a.yml"), filepath.Join(w.dir, "b.yml")
	conf := func(file, secret string) {
		must(t, os.WriteFile(file, []byte("version: 0.1\nhttp:\n  secret: "+secret+"\nstorage:\n  filesystem:\n    rootdirectory: "+shared+"\n"), 0o644))
	}
	conf(confA, "secret-of-a")
	conf(confB, "secret-of-b")
	addrA, addrB := freeAddress(t), freeAddress(t)
	start := func(name, addr, conf string) *served {
		s := w.serve("--root", filepath.Join(w.dir, name), "--address", addr, "--plain-http", "--htpasswd", htpasswd, "--registry-config", conf)
		if s.code != 0 {
			t.Fatalf("replica %s: exit %d", name, s.code)
		}
		return s
	}
	a, b := start("a", addrA, confA), start("b", addrB, confB)
	lb := startRoundRobin(t, addrA, addrB)
	lb.Pick = func(r *http.Request) int {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/blobs/uploads/") {
			return 0
		}
		return 1
	}
	must(t, os.WriteFile(w.authFile, []byte(`{"auths":{"`+lb.Host+`":{"auth":"`+base64.StdEncoding.EncodeToString([]byte("alice:s3cret"))+`"}}}`), 0o600))
	archiveDir := filepath.Join(w.dir, "archive")
	if code, _, _ := w.gapmirror("mirror", "-c", w.isc(""), "file://"+archiveDir); code != 0 {
		t.Fatal("mirror-to-disk failed")
	}
	code, stdout, stderr := w.gapmirror("mirror", "--from", "file://"+archiveDir, "docker://"+lb.Host, "--retry-times", "1")
	if code == 0 || !strings.Contains(stdout, "3 images: 0 copied, 0 already at the destination, 0 built by gapmirror, 3 failed") || !strings.Contains(stdout, `"detail":"invalid secret"`) || !strings.Contains(stderr, "3 images or charts failed") {
		t.Errorf("disk-to-mirror into replicas with different secrets: exit %d, want a failure of the 3 images saying the upload was invalid", code)
	}
	for _, ex := range w.images {
		for _, addr := range []string{addrA, addrB} {
			if got := httpStatus(t, http.DefaultClient, http.MethodHead, "http://"+addr+"/v2/"+ex.Repo+"/manifests/"+ex.Digest.String(), "alice", "s3cret"); got != http.StatusNotFound {
				t.Errorf("%s after the failed push, on %s: HEAD %d, want 404", ex.Repo, addr, got)
			}
		}
	}
	a.stop()
	b.stop()
	lb.Pick = nil // round robin
	conf(confB, "secret-of-a")
	start("a", addrA, confA)
	start("b", addrB, confB)
	code, stdout, _ = w.gapmirror("mirror", "--from", "file://"+archiveDir, "docker://"+lb.Host)
	if code != 0 || !strings.Contains(stdout, "3 images: 3 copied,") {
		t.Fatalf("disk-to-mirror once the replicas share a secret: exit %d", code)
	}
	for _, ex := range w.images {
		verifyServed(t, "http://"+addrB, ex.Repo, ex.Digest)
	}
}
