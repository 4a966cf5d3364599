package main

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// writeFile writes content into the world's directory and returns its path.
func (w *world) writeFile(name, content string) string {
	p := filepath.Join(w.dir, name)
	must(w.t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

// TestBadConfig: configuration mistakes exit 1, name the file, line and
// field, and write nothing: a file that does not load does not even get
// its destination directory made.
func TestBadConfig(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(2, 16<<10)
	head := "kind: ImageSetConfiguration\napiVersion: mirror.openshift.io/v2alpha1\n"
	cases := []struct {
		name, isc string
		want      []string
		// resolved: found when the image set is resolved, after the run's
		// log is opened in the destination's working-dir.
		resolved bool
	}{
		{"unknown field", head + "mirror:\n  additionalImages:\n  - name: " + w.images[0].Ref + "\n    targetRepoo: x\n",
			[]string{"bad.yaml:6", "mirror.additionalImages[0].targetRepoo", "unknown field"}, false},
		{"wrong kind", "kind: ImageSetConfig\napiVersion: mirror.openshift.io/v2alpha1\nmirror: {}\n",
			[]string{"bad.yaml:1", "kind"}, false},
		{"oc-mirror v1 apiVersion", "kind: ImageSetConfiguration\napiVersion: mirror.openshift.io/v1alpha2\nmirror:\n  additionalImages:\n  - name: " + w.images[0].Ref + "\n",
			[]string{"bad.yaml:2", "apiVersion", "v1alpha2"}, false},
		{"min > max", head + "mirror:\n  platform:\n    channels:\n    - name: stable-4.18\n      minVersion: 4.18.9\n      maxVersion: 4.18.1\n",
			[]string{"bad.yaml:", "mirror.platform.channels[0]", "4.18.9"}, false},
		{"bad regex", head + "mirror:\n  additionalImages:\n  - name: " + w.images[0].Ref + "\n  blockedImages:\n  - name: 'app-(('\n",
			[]string{"bad.yaml:7", "mirror.blockedImages[0].name"}, false},
		{"not implemented", head + "mirror:\n  samples:\n  - name: ruby\n",
			[]string{"mirror.samples", "not supported"}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			isc := w.writeFile("bad.yaml", c.isc)
			out := filepath.Join(w.dir, "out-"+strings.ReplaceAll(c.name, " ", "-"))
			code, _, stderr := w.gapmirror("mirror", "-c", isc, "file://"+out)
			if code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			for _, s := range c.want {
				if !strings.Contains(stderr, s) {
					t.Errorf("error does not mention %q:\n%s", s, stderr)
				}
			}
			if strings.Contains(stderr, "goroutine ") || strings.Contains(stderr, "panic") {
				t.Errorf("stack trace for a user mistake:\n%s", stderr)
			}
			if chunks, _ := filepath.Glob(filepath.Join(out, "mirror_*.tar")); len(chunks) > 0 {
				t.Errorf("an archive was written for a bad config: %v", chunks)
			}
			if _, err := os.Stat(out); !c.resolved && !os.IsNotExist(err) {
				t.Errorf("the destination %s was created for a bad config (the configuration is read before anything is written)", out)
			}
		})
	}
}

// TestUnreachableRegistries: a dead upstream fails its images (exit 8) and
// a dead mirror fails the run up front (exit 1), both naming the registry.
func TestUnreachableRegistries(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(3, 16<<10)
	isc := w.isc("")
	up := w.up.Host()
	must(t, w.up.Close())
	code, _, stderr := w.gapmirror("mirror", "-c", isc, "file://"+filepath.Join(w.dir, "a"))
	if code != 8 || !strings.Contains(stderr, up) || !strings.Contains(stderr, "unreachable") {
		t.Errorf("dead upstream: exit %d (want 8), stderr:\n%s", code, stderr)
	}
	if chunks, _ := filepath.Glob(filepath.Join(w.dir, "a", "mirror_*.tar")); len(chunks) > 0 {
		if code == 0 {
			t.Errorf("archive written although nothing was mirrored")
		}
	}

	dead := registrytest.Start(t, registrytest.Options{})
	deadHost := dead.Host()
	must(t, dead.Close())
	w2 := newWorld(t, registrytest.Options{})
	w2.pushFleet(2, 16<<10)
	code, _, stderr = w2.gapmirror("mirror", "-c", w2.isc(""), "--workspace", "file://"+filepath.Join(w2.dir, "ws"), "docker://"+deadHost+"/m")
	if code != 1 || !strings.Contains(stderr, "cannot use the mirror registry "+deadHost) {
		t.Errorf("dead mirror: exit %d (want 1), stderr:\n%s", code, stderr)
	}
}

// TestAuthFailure: an upstream that wants credentials we do not have fails
// with a message pointing at the credentials, and the right ones work.
func TestAuthFailure(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{Username: "alice", Password: "s3cret"})
	// Push with credentials; gapmirror has none yet.
	w.pushFleetAuth(2, "alice", "s3cret")
	isc := w.isc("")
	code, stdout, stderr := w.gapmirror("mirror", "-c", isc, "file://"+filepath.Join(w.dir, "a"))
	if code != 8 || !strings.Contains(stdout, "credentials") {
		t.Errorf("no credentials: exit %d (want 8), stdout:\n%s", code, stdout)
	}
	if strings.Contains(stdout+stderr, "s3cret") {
		t.Errorf("password logged")
	}
	auth := `{"auths":{"` + w.up.Host() + `":{"auth":"YWxpY2U6czNjcmV0"}}}` // alice:s3cret
	must(t, os.WriteFile(w.authFile, []byte(auth), 0o600))
	code, _, stderr = w.gapmirror("mirror", "-c", isc, "file://"+filepath.Join(w.dir, "b"))
	if code != 0 {
		t.Errorf("with credentials: exit %d\n%s", code, stderr)
	}
	if strings.Contains(stderr, "s3cret") || strings.Contains(stderr, "YWxpY2U6czNjcmV0") {
		t.Errorf("credentials logged")
	}
}

// TestCorruptSource: an upstream serving bytes that do not match their
// digest fails that image (exit 8); the bad bytes never enter the store or
// the archive, and the other images still mirror.
func TestCorruptSource(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(3, 32<<10)
	// Corrupt the unique layer of the first image, every time it is served.
	data, _, err := w.up.Manifest(w.images[0].Repo, w.images[0].Digest.String())
	must(t, err)
	all := layersOf(t, data)
	layer := all[len(all)-1] // the image's own layer, not the shared base
	w.up.SetWrap(registrytest.NewBlobCorrupter(1000, layer).Wrap)
	out := filepath.Join(w.dir, "a")
	code, stdout, _ := w.gapmirror("mirror", "-c", w.isc(""), "--retry-times", "1", "--retry-delay", "10ms", "file://"+out)
	if code != 8 || !strings.Contains(stdout, "does not match") || !strings.Contains(stdout, w.images[0].Repo) {
		t.Errorf("exit %d (want 8), stdout:\n%s", code, stdout)
	}
	if !strings.Contains(stdout, "2 copied") {
		t.Errorf("the other images did not mirror:\n%s", stdout)
	}
	// The corrupt layer is nowhere a later run reads blobs from: the store
	// (which keeps manifests and links) links to no copy of it, no chunk
	// holds it, the archive's index does not list it. Another image's own
	// layer, fetched whole, is in each of those places.
	goodManifest, _, err := w.up.Manifest(w.images[1].Repo, w.images[1].Digest.String())
	must(t, err)
	goodLayers := layersOf(t, goodManifest)
	good := goodLayers[len(goodLayers)-1]
	store := filepath.Join(w.dir, "cache", ".gapmirror", "store")
	for _, place := range []string{"links", "blobs"} {
		if _, err := os.Stat(filepath.Join(store, place, "sha256", layer.Encoded())); err == nil {
			t.Errorf("the store's %s hold the corrupt blob %s", place, layer)
		}
	}
	if _, err := os.Stat(filepath.Join(store, "links", "sha256", good.Encoded())); err != nil {
		t.Errorf("the store does not link the good layer %s: %v", good, err)
	}
	inChunks := map[digest.Digest]bool{}
	for _, chunk := range chunkFiles(t, out) {
		f, err := os.Open(chunk)
		must(t, err)
		tr := tar.NewReader(f)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			must(t, err)
			if hex, ok := strings.CutPrefix(h.Name, "blobs/sha256/"); ok {
				inChunks[digest.NewDigestFromEncoded(digest.SHA256, hex)] = true
			}
		}
		f.Close()
	}
	if inChunks[layer] || !inChunks[good] {
		t.Errorf("chunks hold the corrupt blob: %t, the good layer: %t", inChunks[layer], inChunks[good])
	}
	indexed := map[digest.Digest]bool{}
	for _, b := range archiveOf(t, out).Blobs {
		indexed[b.Digest] = true
	}
	if indexed[layer] || !indexed[good] {
		t.Errorf("the archive index lists the corrupt blob: %t, the good layer: %t", indexed[layer], indexed[good])
	}
	// The archive carries the two good images only; d2m of it works.
	code, _, _ = w.gapmirror("mirror", "--from", "file://"+out, "docker://"+w.dst.Host()+"/m")
	if code != 0 {
		t.Fatalf("d2m of the partial archive: exit %d", code)
	}
	if _, err := w.dst.ManifestDigest("m/"+w.images[0].Repo, w.images[0].Tag); err == nil {
		t.Errorf("the failed image reached the mirror")
	}
	w.images = w.images[1:]
	w.assertMirrored(w.dst, "m")
}

// TestDamagedArchive: a missing, truncated or corrupt chunk is refused with
// the chunk's name and nothing half-pushed is tagged at the mirror.
func TestDamagedArchive(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(6, 128<<10)
	isc := w.isc("")
	out := filepath.Join(w.dir, "a")
	if code, _, _ := w.gapmirror("mirror", "-c", isc, "--archive-size", "256KiB", "file://"+out); code != 0 {
		t.Fatal("m2d failed")
	}
	chunk2 := filepath.Join(out, "mirror_000002.tar")
	good, err := os.ReadFile(chunk2)
	must(t, err)

	must(t, os.Remove(chunk2))
	code, _, stderr := w.gapmirror("mirror", "--from", "file://"+out, "docker://"+w.dst.Host()+"/m1")
	if code != 1 || !strings.Contains(stderr, "mirror_000002.tar") {
		t.Errorf("missing chunk: exit %d (want 1), stderr:\n%s", code, stderr)
	}

	must(t, os.WriteFile(chunk2, good[:len(good)/2], 0o644))
	code, _, stderr = w.gapmirror("mirror", "--from", "file://"+out, "docker://"+w.dst.Host()+"/m2")
	if code != 1 || !strings.Contains(stderr, "mirror_000002.tar") {
		t.Errorf("truncated chunk: exit %d (want 1), stderr:\n%s", code, stderr)
	}

	// Flip a byte in the middle of the chunk's last blob's data.
	bad := append([]byte(nil), good...)
	bad[len(bad)-2048] ^= 0xff
	must(t, os.WriteFile(chunk2, bad, 0o644))
	code, stdout, stderr := w.gapmirror("mirror", "--from", "file://"+out, "--retry-times", "0", "docker://"+w.dst.Host()+"/m3")
	if code == 0 || !strings.Contains(stdout+stderr, "mirror_000002.tar") {
		t.Errorf("corrupt chunk: exit %d (want non-zero), output:\n%s\n%s", code, stdout, stderr)
	}
	// Whatever reached the mirror is complete: every tag there is whole.
	for _, ex := range w.images {
		if d, err := w.dst.ManifestDigest("m3/"+ex.Repo, ex.Tag); err == nil {
			w.assertComplete(w.dst, "m3/"+ex.Repo, d)
		}
	}
	for _, m := range []string{"m1", "m2"} {
		if repos, _ := w.dst.Catalog(); len(repos) > 0 {
			for _, r := range repos {
				if strings.HasPrefix(r, m+"/") {
					t.Errorf("refused archive still pushed %s", r)
				}
			}
		}
	}
}

func layersOf(t *testing.T, manifest []byte) []digest.Digest {
	t.Helper()
	var out []digest.Digest
	for _, part := range strings.Split(string(manifest), `"digest":"`)[1:] {
		out = append(out, digest.Digest(part[:strings.Index(part, `"`)]))
	}
	return out
}
