package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/imageset/catalog"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// The registries.conf an admin writes for a disconnected cluster, end to
// end: mirrors (pull-from-mirror), location rewrites, wildcard prefixes,
// blocked registries and drop-ins, for the source side and the mirror, in
// gapmirror's own registry client as in containers/image.

// requestLog records the requests a registry receives.
type requestLog struct {
	mu   sync.Mutex
	reqs []string
}

func (l *requestLog) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.reqs = append(l.reqs, r.Method+" "+r.URL.Path)
		l.mu.Unlock()
		next.ServeHTTP(rw, r)
	})
}

func (l *requestLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.reqs
	l.reqs = nil
	return out
}

// setRegistriesConf gives the world's runs a new registries.conf: a new
// file each time, as containers/image keeps what it read of a path for
// the life of the process (the runs of a test share it).
func (w *world) setRegistriesConf(body string) {
	w.t.Helper()
	w.confs++
	w.regsConf = filepath.Join(w.dir, fmt.Sprintf("registries-%d.conf", w.confs))
	must(w.t, os.WriteFile(w.regsConf, []byte("unqualified-search-registries = []\n"+body), 0o644))
}

// rename makes the world's images named under host/prefix instead of the
// upstream registry (which registries.conf then sends pulls to); their
// mirror paths become prefix/REPO.
func (w *world) rename(hostAndPrefix string) {
	_, prefix, _ := strings.Cut(hostAndPrefix, "/")
	for i := range w.images {
		w.images[i].Ref = strings.Replace(w.images[i].Ref, w.up.Host(), hostAndPrefix, 1)
		if prefix != "" {
			w.images[i].Repo = prefix + "/" + w.images[i].Repo
		}
	}
}

// TestRegistriesConfBlocked: a registries.conf entry with blocked = true
// is not contacted at all, by the copy nor by gapmirror's own client
// (signature lookups, existence checks): a blocked source fails its images
// with the entry named, in mirror-to-disk and mirror-to-mirror; a blocked
// mirror registry is refused before anything is pushed, in disk-to-mirror
// and mirror-to-mirror, as skopeo refuses to push there.
func TestRegistriesConfBlocked(t *testing.T) {
	t.Parallel()
	w := newSignedWorld(t, registrytest.Options{})
	w.srcTLSByConfig = true
	var upLog, dstLog requestLog
	w.up.SetWrap(upLog.Wrap)
	w.dst.SetWrap(dstLog.Wrap)
	// Build the archive first, with nothing blocked.
	archiveDir := filepath.Join(w.dir, "archive")
	w.setRegistriesConf(fmt.Sprintf("[[registry]]\nlocation = %q\ninsecure = true\n", w.up.Host()))
	if code, _, _ := w.gapmirror("mirror", "-c", w.isc(""), "file://"+archiveDir); code != 0 {
		t.Fatalf("mirror-to-disk: exit %d", code)
	}
	upLog.take()

	w.setRegistriesConf(fmt.Sprintf("[[registry]]\nlocation = %q\ninsecure = true\n[[registry]]\nprefix = %q\nlocation = %q\ninsecure = true\nblocked = true\n", w.up.Host(), w.up.Host()+"/apps", w.up.Host()+"/apps"))
	for _, trip := range [][]string{
		{"file://" + filepath.Join(w.dir, "archive2")},
		{"--workspace", "file://" + filepath.Join(w.dir, "ws"), "docker://" + w.dst.Host() + "/m"},
	} {
		code, out, _ := w.gapmirror(append([]string{"mirror", "-c", w.isc(""), "--retry-times", "0"}, trip...)...)
		want := fmt.Sprintf("(blocked): registry %s/apps is blocked in one of [%q", w.up.Host(), w.regsConf)
		if code != 8 || !strings.Contains(out, want) || !strings.Contains(out, "fix: registries.conf forbids pulling from") || !strings.Contains(out, w.images[0].Ref+" (mirror.additionalImages[0])") {
			t.Errorf("%v with a blocked source: exit %d (want 8), want %q in:\n%s", trip, code, want, out)
		}
		// The images outside the blocked namespace are mirrored (the
		// archive's from the store).
		if !strings.Contains(out, "4 failed") || strings.Contains(out, "tools/team-0/tool-02:v1 (mirror") {
			t.Errorf("%v: the images outside the blocked prefix were not copied:\n%s", trip, out)
		}
		for _, r := range upLog.take() {
			if strings.HasPrefix(r, "GET /v2/apps/") || strings.HasPrefix(r, "HEAD /v2/apps/") {
				t.Errorf("%v: the blocked repository was asked: %s", trip, r)
			}
		}
	}

	// A blocked mirror registry: refused up front, not one request sent.
	w.setRegistriesConf(fmt.Sprintf("[[registry]]\nlocation = %q\ninsecure = true\n[[registry]]\nlocation = %q\nblocked = true\n", w.up.Host(), w.dst.Host()))
	dstLog.take()
	for _, trip := range [][]string{
		{"--from", "file://" + archiveDir, "docker://" + w.dst.Host() + "/d2m"},
		{"-c", w.isc(""), "--workspace", "file://" + filepath.Join(w.dir, "ws3"), "docker://" + w.dst.Host() + "/m2m"},
	} {
		code, _, errOut := w.gapmirror(append([]string{"mirror", "--retry-times", "0"}, trip...)...)
		if code == 0 || !strings.Contains(errOut, "cannot use the mirror registry "+w.dst.Host()) || !strings.Contains(errOut, "is blocked") {
			t.Errorf("%v to a blocked mirror: exit %d, stderr:\n%s", trip, code, errOut)
		}
	}
	if reqs := dstLog.take(); len(reqs) > 0 {
		t.Errorf("the blocked mirror registry was sent %d requests: %v", len(reqs), reqs)
	}
	repos, _ := w.dst.Catalog()
	for _, r := range repos {
		if !strings.HasPrefix(r, "m/") {
			t.Errorf("pushed to a blocked mirror registry: %s", r)
		}
	}
}

// TestRegistriesConfNeverContactSource: a source registry blocked, with a
// [[registry.mirror]] (what OpenShift's mirrorSourcePolicy
// NeverContactSource writes): images and their signatures come from the
// mirror, the source is never contacted, even for signature lookups, and
// the mirror's own `insecure` decides how it is reached; the archive and
// the mirror registry get the images, IDMS/ITMS and the pinned
// configuration name the source, by digest.
func TestRegistriesConfNeverContactSource(t *testing.T) {
	t.Parallel()
	w := newSignedWorld(t, registrytest.Options{})
	w.srcTLSByConfig = true
	source := registrytest.Start(t, registrytest.Options{})
	var sourceLog requestLog
	source.SetWrap(sourceLog.Wrap)
	w.setRegistriesConf(fmt.Sprintf("[[registry]]\nlocation = %q\nblocked = true\n[[registry.mirror]]\nlocation = %q\ninsecure = true\n", source.Host(), w.up.Host()))
	w.rename(source.Host())

	archiveDir := filepath.Join(w.dir, "archive")
	code, out, _ := w.gapmirror("mirror", "-c", w.isc(""), "file://"+archiveDir)
	if code != 0 || !strings.Contains(out, "signatures: 3 copied") {
		t.Fatalf("mirror-to-disk: exit %d:\n%s", code, out)
	}
	w.applyArchive(archiveDir)
	w.assertSignatures(w.dst, "archive", true)

	ws := filepath.Join(w.dir, "ws")
	code, out, _ = w.gapmirror("mirror", "-c", w.isc(""), "--workspace", "file://"+ws, "docker://"+w.dst.Host()+"/m2m")
	if code != 0 || !strings.Contains(out, "signatures: 3 copied") {
		t.Fatalf("mirror-to-mirror: exit %d:\n%s", code, out)
	}
	w.assertMirrored(w.dst, "m2m")
	w.assertSignatures(w.dst, "m2m", true)
	if reqs := sourceLog.take(); len(reqs) > 0 {
		t.Errorf("the blocked source was sent %d requests: %v", len(reqs), reqs)
	}
	resources := filepath.Join(ws, "working-dir", "cluster-resources")
	idms, itms := readFile(t, filepath.Join(resources, "idms-gapmirror.yaml")), readFile(t, filepath.Join(resources, "itms-gapmirror.yaml"))
	if !strings.Contains(idms, "source: "+source.Host()+"/tools") || !strings.Contains(itms, "source: "+source.Host()+"/apps") || strings.Contains(idms+itms, w.up.Host()) {
		t.Errorf("IDMS/ITMS must name the source, not the registries.conf mirror:\n%s\n%s", idms, itms)
	}
	pinned, _ := filepath.Glob(filepath.Join(ws, "working-dir", "isc_pinned_*.yaml"))
	if len(pinned) != 1 {
		t.Fatalf("pinned configurations: %v", pinned)
	}
	p := readFile(t, pinned[0])
	for _, ex := range w.images {
		name, _, _ := strings.Cut(ex.Ref, ":v1")
		name, _, _ = strings.Cut(name, "@")
		if !strings.Contains(p, "name: "+name+"@"+ex.Digest.String()) {
			t.Errorf("pinned configuration lacks %s@%s:\n%s", name, ex.Digest, p)
		}
	}
}

// TestRegistriesConfLocationAndWildcard: a namespace rewritten to another
// location (insecure there), and a wildcard prefix with a mirror: the
// images, their signatures and the catalog come from where registries.conf
// sends pulls, `list operators` reads the catalog there too, and the
// mirror, IDMS/ITMS and pinned configuration keep the names as written.
func TestRegistriesConfLocationAndWildcard(t *testing.T) {
	t.Parallel()
	w := newSignedWorld(t, registrytest.Options{})
	w.srcTLSByConfig = true
	oc := w.pushCatalog("redhat/redhat-operator-index", "v4.18", catalogOptions{Spec: smallSpec, Single: true})
	// The catalog's bundles are named under the upstream, marked insecure.
	w.setRegistriesConf(fmt.Sprintf("[[registry]]\nprefix = \"registry.example.invalid/team\"\nlocation = %q\ninsecure = true\n"+
		"[[registry]]\nprefix = \"*.catalogs.invalid\"\n[[registry.mirror]]\nlocation = %q\ninsecure = true\n"+
		"[[registry]]\nlocation = %q\ninsecure = true\n", w.up.Host(), w.up.Host(), w.up.Host()))
	w.rename("registry.example.invalid/team")
	sigs := map[string]digest.Digest{}
	for name, d := range w.sigs {
		sigs["team/"+name] = d
	}
	w.sigs = sigs
	catalogRef := "index.catalogs.invalid/redhat/redhat-operator-index:v4.18"
	pkg := catalog.Packages(oc.Cat)[0].Name

	code, out, _ := w.gapmirror("list", "operators", "--catalog", catalogRef)
	if code != 0 || !strings.Contains(out, pkg) {
		t.Errorf("list operators through a wildcard mirror: exit %d:\n%s", code, out)
	}
	isc := w.isc(fmt.Sprintf("  operators:\n  - catalog: %s\n    packages:\n    - name: %s\n", catalogRef, pkg))
	ws := filepath.Join(w.dir, "ws")
	code, out, _ = w.gapmirror("mirror", "-c", isc, "--workspace", "file://"+ws, "docker://"+w.dst.Host()+"/m")
	if code != 0 || !strings.Contains(out, "signatures: 3 copied") {
		t.Fatalf("mirror-to-mirror: exit %d:\n%s", code, out)
	}
	w.assertMirrored(w.dst, "m")
	w.assertSignatures(w.dst, "m", true)
	if _, err := w.dst.ManifestDigest("m/redhat/redhat-operator-index", "v4.18"); err != nil {
		t.Errorf("the catalog is not at the mirror under its own path: %v", err)
	}
	resources := filepath.Join(ws, "working-dir", "cluster-resources")
	idms, itms := readFile(t, filepath.Join(resources, "idms-gapmirror.yaml")), readFile(t, filepath.Join(resources, "itms-gapmirror.yaml"))
	if !strings.Contains(idms, "source: registry.example.invalid/team") || !strings.Contains(itms, "source: registry.example.invalid/team") || strings.Contains(idms+itms, w.up.Host()+"/apps") {
		t.Errorf("IDMS/ITMS must name the images as written:\n%s\n%s", idms, itms)
	}
	cs, _ := filepath.Glob(filepath.Join(resources, "cs-*"))
	if len(cs) == 0 || !strings.Contains(readFile(t, cs[0]), w.dst.Host()+"/m/redhat/redhat-operator-index") {
		t.Errorf("no CatalogSource for the catalog at the mirror: %v", cs)
	}
}

// TestRegistriesConfPullFromMirror: a mirror is used for the references
// its pull-from-mirror allows (digest-only: by digest; tag-only: by tag)
// and the source for the others, as podman does; a source with an empty
// mirror falls back to the source. Every digest is verified: a mirror
// serving a damaged layer fails the image, and nothing damaged lands.
func TestRegistriesConfPullFromMirror(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(3, 8<<10) // image 2 named by digest
	w.srcTLSByConfig = true
	w.rename("registry.example.invalid")
	for _, c := range []struct {
		mode       string
		copied     int
		failedRepo string // the image that needs the unreachable source
	}{
		{"digest-only", 1, "apps/app-00"},
		{"tag-only", 2, "tools/team-0/tool-02"},
		{"all", 3, ""},
	} {
		w.setRegistriesConf(fmt.Sprintf("[[registry]]\nlocation = \"registry.example.invalid\"\n[[registry.mirror]]\nlocation = %q\ninsecure = true\npull-from-mirror = %q\n", w.up.Host(), c.mode))
		code, out, _ := w.gapmirror("mirror", "-c", w.isc(""), "--retry-times", "0", "--workspace", "file://"+filepath.Join(w.dir, c.mode), "docker://"+w.dst.Host()+"/"+c.mode)
		if !strings.Contains(out, fmt.Sprintf("3 images: %d copied,", c.copied)) || (c.failedRepo == "") != (code == 0) ||
			c.failedRepo != "" && !strings.Contains(out, "registry.example.invalid/"+c.failedRepo) {
			t.Errorf("pull-from-mirror = %s: exit %d, want %d copied and %q failed:\n%s", c.mode, code, c.copied, c.failedRepo, out)
		}
	}
	w.assertMirrored(w.dst, "all")

	// An empty mirror first: the source answers.
	w.images = w.images[:0]
	w.pushFleet(2, 8<<10)
	empty := registrytest.Start(t, registrytest.Options{})
	w.setRegistriesConf(fmt.Sprintf("[[registry]]\nlocation = %q\ninsecure = true\n[[registry.mirror]]\nlocation = %q\ninsecure = true\n", w.up.Host(), empty.Host()))
	if code, _, _ := w.gapmirror("mirror", "-c", w.isc(""), "--workspace", "file://"+filepath.Join(w.dir, "fallback"), "docker://"+w.dst.Host()+"/fallback"); code != 0 {
		t.Errorf("fallback to the source past an empty mirror: exit %d", code)
	}
	w.assertMirrored(w.dst, "fallback")

	// A mirror that damages a layer: the source is not asked again (as
	// containers/image, which keeps the source it opened), the image fails.
	data, _, err := w.up.Manifest(w.images[0].Repo, w.images[0].Digest.String())
	must(t, err)
	layers := layersOf(t, data)
	w.up.SetWrap(registrytest.NewBlobCorrupter(1000, layers[len(layers)-1]).Wrap)
	w.rename("registry.example.invalid")
	w.setRegistriesConf(fmt.Sprintf("[[registry]]\nlocation = \"registry.example.invalid\"\n[[registry.mirror]]\nlocation = %q\ninsecure = true\n", w.up.Host()))
	code, out, _ := w.gapmirror("mirror", "-c", w.isc(""), "--retry-times", "0", "--workspace", "file://"+filepath.Join(w.dir, "damaged"), "docker://"+w.dst.Host()+"/damaged")
	if code != 8 || !strings.Contains(out, "does not match") || !strings.Contains(out, "1 copied") {
		t.Errorf("a mirror serving a damaged layer: exit %d (want 8, a digest mismatch):\n%s", code, out)
	}
	if has, _ := w.dst.HasBlob("damaged/"+w.images[0].Repo, layers[len(layers)-1]); has {
		t.Errorf("the damaged layer reached the mirror")
	}
}

// TestRegistriesConfDropIn: --registries-conf-dir is read as
// containers/image reads registries.conf.d: a drop-in's mirror is used,
// and a drop-in that does not parse stops the run up front.
func TestRegistriesConfDropIn(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(2, 8<<10)
	w.srcTLSByConfig = true
	w.rename("registry.example.invalid")
	w.setRegistriesConf("")
	dropIn := filepath.Join(w.regsConfDir, "50-enclave.conf")
	must(t, os.WriteFile(dropIn, []byte(fmt.Sprintf("[[registry]]\nlocation = \"registry.example.invalid\"\n[[registry.mirror]]\nlocation = %q\ninsecure = true\n", w.up.Host())), 0o644))
	if code, _, _ := w.gapmirror("mirror", "-c", w.isc(""), "--workspace", "file://"+filepath.Join(w.dir, "ws"), "docker://"+w.dst.Host()+"/m"); code != 0 {
		t.Fatalf("mirror through a drop-in's mirror: exit %d", code)
	}
	w.assertMirrored(w.dst, "m")

	w.regsConfDir = filepath.Join(w.dir, "registries.conf.d-broken")
	must(t, os.Mkdir(w.regsConfDir, 0o755))
	dropIn = filepath.Join(w.regsConfDir, "50-enclave.conf")
	must(t, os.WriteFile(dropIn, []byte("[[registry]]\nlocation =\n"), 0o644))
	code, _, errOut := w.gapmirror("mirror", "-c", w.isc(""), "--workspace", "file://"+filepath.Join(w.dir, "ws"), "docker://"+w.dst.Host()+"/m")
	if code != 1 || !strings.Contains(errOut, dropIn) {
		t.Errorf("a broken drop-in: exit %d (want 1), stderr naming %s:\n%s", code, dropIn, errOut)
	}
	code, _, errOut = w.gapmirror("mirror", "-c", w.isc(""), "--registries-conf-dir", filepath.Join(w.dir, "none"), "file://"+filepath.Join(w.dir, "ar"))
	if code != 1 || !strings.Contains(errOut, "--registries-conf-dir "+filepath.Join(w.dir, "none")+": the directory does not exist") {
		t.Errorf("a missing --registries-conf-dir: exit %d, stderr:\n%s", code, errOut)
	}
}
