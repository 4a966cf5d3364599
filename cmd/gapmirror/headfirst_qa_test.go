package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/internal/imagebuilder"
)

// noHeadDigest leaves Docker-Content-Digest out of HEAD answers for manifests.
type noHeadDigest struct{ http.ResponseWriter }

func (n noHeadDigest) WriteHeader(status int) {
	n.ResponseWriter.Header().Del("Docker-Content-Digest")
	n.ResponseWriter.WriteHeader(status)
}

func stripHeadDigest(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead && strings.Contains(r.URL.Path, "/manifests/") {
			w = noHeadDigest{w}
		}
		next.ServeHTTP(w, r)
	})
}

// hideTag answers 404 MANIFEST_UNKNOWN for repo's manifests by tag, as a
// registry does once the tag was deleted.
func hideTag(repo, tag string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v2/"+repo+"/manifests/"+tag {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusNotFound)
				if r.Method != http.MethodHead {
					fmt.Fprint(w, `{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}`)
				}
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// TestHeadFirstQASparseMoved: a rerun of a workspace whose tags moved
// mirrors what the tags name now, for sparse multi-arch images sharing one
// index with different platforms, with and without the HEAD's digest, with
// --remove-signatures after runs without; a deleted tag fails clearly.
func TestHeadFirstQASparseMoved(t *testing.T) {
	t.Parallel()
	w, fx := newSparseCopyWorld(t)
	ctx := context.Background()
	isc := w.writeISC("isc.yaml", fmt.Sprintf(`  additionalImages:
  - name: %[1]s/multi/tool:v1
    platforms:
    - os: linux
      architecture: arm64
  - name: %[1]s/multi/copy:v1
    platforms:
    - os: linux
      architecture: ppc64le
  - name: %[1]s/single/tool:v1
`, w.up.Host()))
	ws := "file://" + filepath.Join(w.dir, "ws")
	m2m := func(extra ...string) (int, string, string) {
		return w.gapmirror(append(append([]string{"mirror", "-c", isc, "--workspace", ws}, extra...), "docker://"+w.dst.Host()+"/m")...)
	}
	check := func(when string, tool, single digest.Digest) {
		t.Helper()
		if d, err := w.dst.ManifestDigest("m/multi/tool", "v1"); err != nil || d != tool {
			t.Errorf("%s: m/multi/tool:v1 is %s (%v), want %s", when, d, err, tool)
		} else {
			w.assertSparseIndex(w.dst, "m/multi/tool", "multi/tool", tool, "arm64")
		}
		if d, err := w.dst.ManifestDigest("m/multi/copy", "v1"); err != nil || d != fx.index.Digest {
			t.Errorf("%s: m/multi/copy:v1 is %s (%v)", when, d, err)
		} else {
			w.assertSparseIndex(w.dst, "m/multi/copy", "multi/copy", fx.index.Digest, "ppc64le")
		}
		if d, err := w.dst.ManifestDigest("m/single/tool", "v1"); err != nil || d != single {
			t.Errorf("%s: m/single/tool:v1 is %s (%v), want %s", when, d, err, single)
		} else {
			w.assertComplete(w.dst, "m/single/tool", single)
		}
	}
	if code, _, _ := m2m(); code != 0 {
		t.Fatal("first run failed")
	}
	check("first run", fx.index.Digest, fx.single.Digest)

	// multi/tool moves to a new index; HEAD answers without a digest.
	idx2, err := imagebuilder.BuildIndex(imagebuilder.IndexSpec{Images: []imagebuilder.ImageSpec{
		{Platform: imagebuilder.Platform{OS: "linux", Architecture: "amd64"}, Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(81, 16<<10)}},
		{Platform: imagebuilder.Platform{OS: "linux", Architecture: "arm64"}, Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(82, 16<<10)}},
	}})
	must(t, err)
	must(t, imagebuilder.PushIndex(ctx, w.upTarget(), "multi/tool", "v1", idx2))
	w.up.SetWrap(stripHeadDigest)
	code, _, _ := m2m()
	w.up.SetWrap(nil)
	if code != 0 {
		t.Fatal("rerun after multi/tool moved, HEAD without digest, failed")
	}
	check("multi/tool moved, HEAD without digest", idx2.Digest, fx.single.Digest)

	// --dry-run after single/tool moved: the plan names the new digest.
	single2, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(83, 16<<10)}})
	must(t, err)
	must(t, imagebuilder.Push(ctx, w.upTarget(), "single/tool", "v1", single2))
	code, out, stderr := m2m("--dry-run")
	if code != 0 || strings.Contains(out+stderr, fx.single.Digest.Encoded()[:12]) && !strings.Contains(out+stderr, single2.Digest.Encoded()[:12]) {
		t.Errorf("dry run after single/tool moved: exit %d", code)
	}
	check("after a dry run", idx2.Digest, fx.single.Digest)

	// --remove-signatures, after runs that looked signatures up.
	if code, _, _ := m2m("--remove-signatures"); code != 0 {
		t.Fatal("rerun with --remove-signatures failed")
	}
	check("single/tool moved, --remove-signatures", idx2.Digest, single2.Digest)

	// single/tool deleted upstream: a clear failure, the old digest not kept silently.
	w.up.SetWrap(hideTag("single/tool", "v1"))
	code, out, stderr = m2m()
	w.up.SetWrap(nil)
	if code == 0 || !strings.Contains(out+stderr, "single/tool") {
		t.Errorf("single/tool:v1 deleted upstream: exit %d, nothing names it", code)
	}
}

// TestHeadFirstQAReleaseTagMoved: mirror.platform.release names a payload
// by tag; a rerun of the workspace after the tag moved to another payload
// mirrors the one it names now, and a rerun with nothing moved mirrors it
// again complete.
func TestHeadFirstQAReleaseTagMoved(t *testing.T) {
	t.Parallel()
	w := newReleaseWorld(t, []string{"4.18.1", "4.18.2"}, 3, false)
	p1, p2 := w.payloads["4.18.1"], w.payloads["4.18.2"]
	isc := w.releaseISC("bytag", "    release: "+p1.Ref()+"\n")
	ws := "file://" + filepath.Join(w.dir, "ws")
	if code, _, _ := w.run("mirror", "-c", isc, "--workspace", ws, "docker://"+w.dst.Host()+"/m"); code != 0 {
		t.Fatal("first run failed")
	}
	w.assertRelease("m", p1, false)
	if code, _, _ := w.run("mirror", "-c", isc, "--workspace", ws, "docker://"+w.dst.Host()+"/n"); code != 0 {
		t.Fatal("rerun, nothing moved, failed")
	}
	w.assertRelease("n", p1, false)
	// The tag now names 4.18.2's payload.
	data, mt, err := w.up.Manifest("openshift-release-dev/ocp-release", p2.Digest.String())
	if err != nil {
		data, mt, err = w.up.Manifest(strings.SplitN(strings.TrimPrefix(p2.Ref(), w.up.Host()+"/"), ":", 2)[0], p2.Digest.String())
	}
	must(t, err)
	repo := strings.SplitN(strings.TrimPrefix(p1.Ref(), w.up.Host()+"/"), ":", 2)[0]
	req, err := http.NewRequest(http.MethodPut, w.up.URL()+"/v2/"+repo+"/manifests/"+p1.Tag, strings.NewReader(string(data)))
	must(t, err)
	req.Header.Set("Content-Type", mt)
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("moving the tag: %s", resp.Status)
	}
	if d, _ := w.up.ManifestDigest(repo, p1.Tag); d != p2.Digest {
		t.Fatalf("tag not moved: %s", d)
	}
	code, _, _ := w.run("mirror", "-c", isc, "--workspace", ws, "docker://"+w.dst.Host()+"/o")
	if code != 0 {
		t.Fatal("rerun after the payload tag moved failed")
	}
	w.assertRelease("o", p2, false)
}
