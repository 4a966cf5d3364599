package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// world is an upstream registry full of example images, an empty mirror
// registry and a scratch directory, all private to one test.
type world struct {
	t        *testing.T
	up, dst  *registrytest.Registry
	dir      string
	images   []example
	regsConf string
	// regsConfDir is the (empty) registries.conf.d the runs read, so that
	// the host's drop-ins stay out of the test too.
	regsConfDir string
	confs       int // registries.conf files setRegistriesConf wrote
	authFile    string
	// upUser and upPassword push the fixtures to an upstream that wants credentials.
	upUser, upPassword string
	// srcTLSByConfig leaves --src-tls-verify off the command lines, so that
	// registries.conf (insecure) and certs.d decide for the source side.
	srcTLSByConfig bool
}

// example is one image pushed upstream and what the ISC calls it.
type example struct {
	Ref    string // as the ISC names it
	Repo   string // upstream repository path
	Tag    string // destination tag expected
	Digest digest.Digest
}

func newWorld(t *testing.T, upOpts registrytest.Options) *world {
	t.Helper()
	w := &world{t: t, dir: t.TempDir()}
	w.up = registrytest.Start(t, upOpts)
	w.dst = registrytest.Start(t, registrytest.Options{})
	// Keep the host's containers configuration out of the test.
	w.regsConf = filepath.Join(w.dir, "registries.conf")
	w.authFile = filepath.Join(w.dir, "auth.json")
	w.regsConfDir = filepath.Join(w.dir, "registries.conf.d")
	must(t, os.Mkdir(w.regsConfDir, 0o755))
	must(t, os.WriteFile(w.regsConf, []byte("unqualified-search-registries = []\n"), 0o644))
	must(t, os.WriteFile(w.authFile, []byte(`{"auths":{}}`), 0o600))
	return w
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// pushFleet pushes n images sharing a base layer: every fourth one
// multi-arch, every fifth in Docker schema2 format, and the last one
// referenced only by digest.
func (w *world) pushFleet(n int, layerSize int64) {
	w.t.Helper()
	w.pushFleetTo(imagebuilder.Target{URL: w.up.URL()}, n, layerSize)
}

// upTarget is how the fixtures reach the upstream registry.
func (w *world) upTarget() imagebuilder.Target {
	return imagebuilder.Target{URL: w.up.URL(), Client: w.up.Client(), Username: w.upUser, Password: w.upPassword}
}

// pushFleetAuth pushes a small fleet to an upstream that wants credentials.
func (w *world) pushFleetAuth(n int, user, password string) {
	w.t.Helper()
	w.pushFleetTo(imagebuilder.Target{URL: w.up.URL(), Username: user, Password: password}, n, 16<<10)
}

func (w *world) pushFleetTo(target imagebuilder.Target, n int, layerSize int64) {
	t := w.t
	t.Helper()
	ctx := context.Background()
	base := imagebuilder.RandomLayer(1, layerSize)
	for i := 0; i < n; i++ {
		repo := fmt.Sprintf("apps/app-%02d", i)
		if i%3 == 2 {
			repo = fmt.Sprintf("tools/team-%d/tool-%02d", i%2, i)
		}
		tag := "v1"
		format := imagebuilder.FormatOCI
		if i%5 == 4 {
			format = imagebuilder.FormatDocker
		}
		var d digest.Digest
		if i%4 == 3 {
			idx, err := imagebuilder.BuildIndex(imagebuilder.IndexSpec{Format: format, Images: []imagebuilder.ImageSpec{
				{Platform: imagebuilder.Platform{OS: "linux", Architecture: "amd64"}, Layers: []imagebuilder.LayerSpec{base, imagebuilder.RandomLayer(uint64(1000+i), layerSize/4)}},
				{Platform: imagebuilder.Platform{OS: "linux", Architecture: "arm64"}, Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(2, layerSize), imagebuilder.RandomLayer(uint64(2000+i), layerSize/4)}},
			}})
			must(t, err)
			must(t, imagebuilder.PushIndex(ctx, target, repo, tag, idx))
			d = idx.Digest
		} else {
			img, err := imagebuilder.Build(imagebuilder.ImageSpec{Format: format, Layers: []imagebuilder.LayerSpec{base, imagebuilder.RandomLayer(uint64(1000+i), layerSize/4)},
				Labels: map[string]string{"example.index": fmt.Sprint(i)}})
			must(t, err)
			must(t, imagebuilder.Push(ctx, target, repo, tag, img))
			d = img.Digest
		}
		ex := example{Ref: w.up.Host() + "/" + repo + ":" + tag, Repo: repo, Tag: tag, Digest: d}
		if i == n-1 {
			ex.Ref = w.up.Host() + "/" + repo + "@" + d.String()
			ex.Tag = "sha256-" + d.Encoded()
		}
		w.images = append(w.images, ex)
	}
}

// isc writes an ImageSetConfiguration listing every image of the world.
func (w *world) isc(extra string) string {
	var b strings.Builder
	b.WriteString("kind: ImageSetConfiguration\napiVersion: mirror.openshift.io/v2alpha1\nmirror:\n  additionalImages:\n")
	for _, ex := range w.images {
		fmt.Fprintf(&b, "  - name: %s\n", ex.Ref)
	}
	b.WriteString(extra)
	path := filepath.Join(w.dir, fmt.Sprintf("isc-%d.yaml", len(w.images)))
	must(w.t, os.WriteFile(path, []byte(b.String()), 0o644))
	return path
}

// gapmirror runs the CLI in-process with the world's isolation flags.
func (w *world) gapmirror(args ...string) (code int, stdout, stderr string) {
	w.t.Helper()
	return w.gapmirrorCtx(context.Background(), args...)
}

// gapmirrorCtx is gapmirror with a context: cancelling it is the signal an
// admin's Ctrl-C or systemd's SIGTERM sends.
func (w *world) gapmirrorCtx(ctx context.Context, args ...string) (code int, stdout, stderr string) {
	w.t.Helper()
	var out, errb bytes.Buffer
	full := append(append([]string{args[0]}, w.isolation()...), args[1:]...)
	if args[0] == "mirror" {
		full = append(full[:1], append([]string{"--retry-delay", "20ms"}, full[1:]...)...)
	}
	code = run(ctx, full, &out, &errb)
	w.t.Logf("gapmirror %s → exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out.String(), errb.String())
	return code, out.String(), errb.String()
}

// isolation are the flags that keep a run to the world: its TLS settings,
// its (empty) containers configuration, credentials and cache.
func (w *world) isolation() []string {
	var flags []string
	if !w.srcTLSByConfig {
		flags = append(flags, "--src-tls-verify=false")
	}
	return append(flags, "--dest-tls-verify=false", "--no-progress",
		"--registries-conf", w.regsConf, "--registries-conf-dir", w.regsConfDir, "--authfile", w.authFile, "--cache-dir", filepath.Join(w.dir, "cache"))
}

// applyArchive pushes the archives in dir to the mirror under a prefix named
// after dir, and checks that every image of the world is there.
func (w *world) applyArchive(dir string) {
	w.t.Helper()
	prefix := filepath.Base(dir)
	if code, _, _ := w.gapmirror("mirror", "--from", "file://"+dir, "docker://"+w.dst.Host()+"/"+prefix); code != 0 {
		w.t.Fatalf("disk-to-mirror of %s failed", dir)
	}
	w.assertMirrored(w.dst, prefix)
}

// assertMirrored checks that every image of the world is in reg under
// prefix, by digest, with every manifest and blob present.
func (w *world) assertMirrored(reg *registrytest.Registry, prefix string) {
	t := w.t
	t.Helper()
	for _, ex := range w.images {
		repo := strings.TrimPrefix(prefix+"/"+ex.Repo, "/")
		got, err := reg.ManifestDigest(repo, ex.Tag)
		if err != nil {
			t.Errorf("%s: not at the mirror as %s:%s: %v", ex.Ref, repo, ex.Tag, err)
			continue
		}
		if got != ex.Digest {
			t.Errorf("%s: mirror has digest %s, want %s", ex.Ref, got, ex.Digest)
			continue
		}
		w.assertComplete(reg, repo, ex.Digest)
	}
}

// refs are what a manifest references: an index's manifests, an image's
// config and layers (Config.Digest is empty in an index).
type refs struct {
	Manifests []ocispec.Descriptor `json:"manifests"`
	Config    ocispec.Descriptor   `json:"config"`
	Layers    []ocispec.Descriptor `json:"layers"`
}

// manifestRefs parses the references of manifest data.
func manifestRefs(t testing.TB, data []byte) refs {
	t.Helper()
	var m refs
	must(t, json.Unmarshal(data, &m))
	return m
}

// assertComplete checks that manifest d and everything it references is in repo.
func (w *world) assertComplete(reg *registrytest.Registry, repo string, d digest.Digest) {
	t := w.t
	t.Helper()
	data, _, err := reg.Manifest(repo, d.String())
	if err != nil {
		t.Errorf("%s@%s: %v", repo, d, err)
		return
	}
	if digest.FromBytes(data) != d {
		t.Errorf("%s@%s: manifest bytes have digest %s", repo, d, digest.FromBytes(data))
	}
	m := manifestRefs(t, data)
	for _, c := range m.Manifests {
		w.assertComplete(reg, repo, c.Digest)
	}
	for _, b := range append(m.Layers, m.Config) {
		if b.Digest == "" {
			continue
		}
		blob, err := reg.Blob(repo, b.Digest)
		if err != nil {
			t.Errorf("%s: blob %s missing: %v", repo, b.Digest, err)
			continue
		}
		if digest.FromBytes(blob) != b.Digest {
			t.Errorf("%s: blob %s has wrong content", repo, b.Digest)
		}
	}
}

// blobsOf returns every blob (manifests included) of an upstream image.
func (w *world) blobsOf(repo string, d digest.Digest, into map[digest.Digest]int64) {
	w.blobsIn(w.up, repo, d, into)
}

// blobsIn adds every blob (manifests included) of image repo@d of reg to into.
func (w *world) blobsIn(reg *registrytest.Registry, repo string, d digest.Digest, into map[digest.Digest]int64) {
	data, _, err := reg.Manifest(repo, d.String())
	must(w.t, err)
	into[d] = int64(len(data))
	m := manifestRefs(w.t, data)
	for _, c := range m.Manifests {
		w.blobsIn(reg, repo, c.Digest, into)
	}
	for _, b := range append(m.Layers, m.Config) {
		if b.Digest != "" {
			into[b.Digest] = b.Size
		}
	}
}

// uniqueBytes is the size of the blobs of images that the images in old lack.
func (w *world) uniqueBytes(images, old []example) int64 {
	have, want := map[digest.Digest]int64{}, map[digest.Digest]int64{}
	for _, ex := range old {
		w.blobsOf(ex.Repo, ex.Digest, have)
	}
	for _, ex := range images {
		w.blobsOf(ex.Repo, ex.Digest, want)
	}
	var n int64
	for d, size := range want {
		if _, ok := have[d]; !ok {
			n += size
		}
	}
	return n
}
