package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/imageset/catalog"
	"github.com/gapmirror/gapmirror/imageset/fbc"
	"github.com/gapmirror/gapmirror/internal/registrytest"
	"github.com/gapmirror/gapmirror/internal/releasetest"
)

// insecureConf writes a registries.conf marking hosts insecure, as an admin
// does for plain-HTTP registries.
func insecureConf(t *testing.T, dir string, hosts ...string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("unqualified-search-registries = []\n")
	for _, h := range hosts {
		fmt.Fprintf(&b, "\n[[registry]]\nlocation = %q\ninsecure = true\n", h)
	}
	p := filepath.Join(dir, "registries-insecure.conf")
	must(t, os.WriteFile(p, []byte(b.String()), 0o644))
	return p
}

// runPlain runs the CLI in-process with args exactly as given.
func runPlain(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	t.Logf("gapmirror %s → exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out.String(), errb.String())
	return code, out.String(), errb.String()
}

// TestRegistriesConfInsecure: with no TLS flag, registries.conf decides, as
// for skopeo: plain-HTTP registries marked `insecure = true` mirror in all
// three trips (and prune, through the shared client); unmarked they fail
// with the hint; an explicit --dest-tls-verify=true overrides the file.
func TestRegistriesConfInsecure(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(4, 16<<10)
	isc := w.isc("")
	conf := insecureConf(t, w.dir, w.up.Host(), w.dst.Host())
	common := []string{"--no-progress", "--registries-conf", conf, "--authfile", w.authFile, "--cache-dir", filepath.Join(w.dir, "cache")}
	gm := func(args ...string) (int, string, string) {
		return runPlain(t, append(append([]string{args[0]}, common...), args[1:]...)...)
	}
	archiveDir := filepath.Join(w.dir, "archive")
	if code, _, _ := gm("mirror", "-c", isc, "file://"+archiveDir); code != 0 {
		t.Fatalf("mirror-to-disk from an insecure upstream: exit %d", code)
	}
	if code, _, _ := gm("mirror", "-c", isc, "--from", "file://"+archiveDir, "docker://"+w.dst.Host()+"/d2m"); code != 0 {
		t.Fatalf("disk-to-mirror to an insecure mirror: exit %d", code)
	}
	w.assertMirrored(w.dst, "d2m")
	ws := filepath.Join(w.dir, "ws")
	if code, _, _ := gm("mirror", "-c", isc, "--workspace", "file://"+ws, "docker://"+w.dst.Host()+"/m2m", "--prune"); code != 0 {
		t.Fatalf("mirror-to-mirror: exit %d", code)
	}
	w.assertMirrored(w.dst, "m2m")

	code, _, errOut := gm("mirror", "-c", isc, "--retry-times", "0", "--dest-tls-verify", "--workspace", "file://"+ws, "docker://"+w.dst.Host()+"/m2m")
	if code == 0 || !strings.Contains(errOut, "plain HTTP") {
		t.Errorf("--dest-tls-verify=true must override registries.conf insecure: exit %d: %s", code, errOut)
	}
	plain := filepath.Join(w.dir, "plain.conf")
	must(t, os.WriteFile(plain, []byte("unqualified-search-registries = []\n"), 0o644))
	code, _, errOut = runPlain(t, "mirror", "--no-progress", "--registries-conf", plain, "--authfile", w.authFile, "--cache-dir", filepath.Join(w.dir, "cache"),
		"-c", isc, "--retry-times", "0", "--workspace", "file://"+filepath.Join(w.dir, "ws2"), "docker://"+w.dst.Host()+"/m2m")
	if code == 0 || !strings.Contains(errOut, "plain HTTP") {
		t.Errorf("unmarked plain-HTTP registry: want a refusal with the hint, exit %d: %s", code, errOut)
	}
}

// docLines are oc-mirror v2's documented command lines
// (oc-mirror-v2-command-lines.md), in an order that runs, each with what
// gapmirror answers: exit 0 and a piece of its output, or the refusal.
var docLines = []struct {
	line    string
	wantOut string // in stdout when it succeeds
	refuse  string // in stderr when gapmirror refuses it (exit 1)
}{
	{line: "oc-mirror --v2 list operators --catalog=registry.redhat.io/redhat/redhat-operator-index:v4.18", wantOut: "3 packages"},
	{line: "oc-mirror --v2 list operators --catalog=registry.redhat.io/redhat/redhat-operator-index:v4.18 --package=aws-load-balancer-operator", wantOut: "default channel"},
	{line: "oc-mirror --v2 list operators --catalog=registry.redhat.io/redhat/redhat-operator-index:v4.18 --package=aws-load-balancer-operator --channel=stable-v1", wantOut: "head "},
	{line: "oc-mirror --v2 list operators --catalogs --version=4.18", wantOut: "/redhat/redhat-operator-index:v4.18  sha256:"},
	{line: "oc-mirror --v2 list releases", wantOut: "4.18   4.18.10"},
	{line: "oc-mirror --v2 list releases --channel=fast-4.18 --version=4.18 --filter-by-archs amd64,arm64", wantOut: "# channel fast-4.18, arch arm64"},
	{line: "oc-mirror --v2 list releases --channel=stable-4.18", wantOut: "head 4.18.10"},
	{line: "oc-mirror --v2 list releases --channels --version=4.18", wantOut: "stable-4.18"},
	{line: "oc-mirror --v2 list releases --version=4.18", wantOut: "fast-4.18"},
	{line: "oc-mirror -c ./isc.yaml file:///home/<user>/oc-mirror/mirror1 --v2", wantOut: "mirror-to-disk: 3 images: 3 copied,"},
	{line: "oc-mirror -c ./isc.yaml --from file:///home/<user>/oc-mirror/mirror1 docker://localhost:6000 --v2", wantOut: "0 copied, 3 already at the destination, 0 built by gapmirror, 0 failed"},
	{line: "oc-mirror -c ./isc.yaml --workspace file:///home/<user>/oc-mirror/mirror1 docker://localhost:6000 --v2", wantOut: "0 copied, 3 already at the destination, 0 built by gapmirror, 0 failed"},
	{line: "oc-mirror delete -c ./delete-isc.yaml --generate --workspace file:///home/<user>/oc-mirror/delete1 --delete-id delete1-test docker://localhost:6000 --v2", wantOut: "delete-images-delete1-test.yaml"},
	{line: "oc-mirror delete --delete-yaml-file /home/<user>/oc-mirror/delete1/working-dir/delete/delete-images-delete1-test.yaml docker://localhost:6000 --v2"},
	{line: "oc-mirror --v2 -c ./isc.yaml file:///home/user/output", wantOut: "0 copied, 3 already at the destination"},
	{line: "oc-mirror --v2 -c ./isc.yaml --from file:///home/user/output docker://registry.example.com", wantOut: "disk-to-mirror: 3 images: 3 copied,"},
	{line: "oc-mirror --v2 -c ./isc.yaml --since 2024-06-01 file:///home/user/output", wantOut: "0 copied, 3 already at the destination"},
	{line: "oc-mirror --v2 -c ./isc.yaml --strict-archive file:///home/user/output", wantOut: "0 copied, 3 already at the destination"},
	{line: "oc-mirror delete --config delete-image-set-config.yaml --workspace file://<previously-mirrored-work-folder> --v2 --generate --delete-id v4.11 docker://<remote-registry> ", wantOut: "delete-images-v4.11.yaml"},
	{line: "oc-mirror delete --config delete-image-set-config.yaml --workspace file://<previously-mirrored-work-folder> --v2 --generate docker://<remote-registry> ", wantOut: "delete-images.yaml"},
	{line: "oc-mirror delete --v2 --delete-yaml-file <previously-mirrored-work-folder>/delete/delete-images-v4.11.yaml --force-cache-delete true docker://<remote-registry> ", refuse: "--force-cache-delete (oc-mirror) is not supported: gapmirror delete removes only from the mirror registry"},
	{line: "oc-mirror delete --v2 --delete-yaml-file <previously-mirrored-work-folder>/delete/delete-images-v4.11.yaml docker://<remote-registry> "},
	{line: "oc-mirror --v2 -c ./isc.yaml --dry-run file:///home/user/oc-mirror/output", wantOut: "planned"},
	{line: "oc-mirror --v2 -c ./isc.yaml file:///home/user/oc-mirror/output", wantOut: "0 copied, 3 already at the destination"},
	{line: "oc-mirror --v2 -c ./isc.yaml --dry-run --from file:///home/user/oc-mirror/output docker://registry.example.com", wantOut: "planned"},
	{line: "oc-mirror --v2 -c ./isc.yaml --dry-run --workspace file:///home/user/oc-mirror/workspace docker://registry.example.com", wantOut: "planned"},
	{line: "oc-mirror --v2 -c ./isc.yaml --from file:///home/user/oc-mirror/output docker://registry.example.com", wantOut: "0 copied, 3 already at the destination, 0 built by gapmirror, 0 failed"},
	{line: "oc-mirror --v2 -c ./isc.yaml --since 2024-06-01 file:///home/user/oc-mirror/output", wantOut: "0 copied, 3 already at the destination"},
	{line: "oc-mirror --v2 -c ./isc.yaml --workspace file:///home/user/oc-mirror/workspace docker://registry.example.com", wantOut: "0 copied, 3 already at the destination, 0 built by gapmirror, 0 failed"},
	{line: "oc-mirror --v2 --help", wantOut: "oc-mirror v2's command lines work unchanged"},
	{line: "oc-mirror --v2 -c isc-enclave.yaml", refuse: "name the destination: file://DIR (mirror-to-disk)"},
	{line: "oc-mirror --v2 -c isc-m2m.yaml --workspace file:///home/user/enterprise-content docker://enterprise-registry.in/", wantOut: "mirror-to-mirror: 3 images: 3 copied,"},
	{line: "oc-mirror --v2 -c isc.yaml --from file:///disk1/enterprise-content docker://enterprise-registry.in/", wantOut: "0 copied, 3 already at the destination, 0 built by gapmirror, 0 failed"},
}

// TestOcMirrorCommandLines runs every command line of oc-mirror v2's
// documentation, unchanged but for hosts and paths, against the test
// registries: the containers configuration comes from the environment
// (CONTAINERS_REGISTRIES_CONF marking both registries insecure,
// REGISTRY_AUTH_FILE, OC_MIRROR_CACHE, UPDATE_URL_OVERRIDE) as an oc-mirror
// user's would, so no gapmirror flag is added.
func TestOcMirrorCommandLines(t *testing.T) {
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(3, 16<<10)
	oc := w.pushCatalog("redhat/redhat-operator-index", "v4.18", catalogOptions{Spec: smallSpec})
	w.pushCatalog("redhat/certified-operator-index", "v4.18", catalogOptions{Spec: smallSpec, Single: true})
	pkg := catalog.Packages(oc.Cat)[0]

	gs := releasetest.NewGraphServer()
	for _, c := range []struct{ channel, arch string }{{"stable-4.17", "amd64"}, {"stable-4.18", "amd64"}, {"fast-4.18", "amd64"}, {"fast-4.18", "arm64"}} {
		versions := []string{"4.17.1", "4.17.2"}
		if strings.HasSuffix(c.channel, "4.18") {
			versions = []string{"4.17.2", "4.18.1", "4.18.10"}
		}
		must(t, gs.Put(c.channel, releasetest.NewGraph(c.arch, versions...).GenerateEdges()))
	}
	srv := httptest.NewServer(gs)
	t.Cleanup(srv.Close)

	base := filepath.Join(w.dir, "fs")
	t.Chdir(w.dir)
	t.Setenv("CONTAINERS_REGISTRIES_CONF", insecureConf(t, w.dir, w.up.Host(), w.dst.Host()))
	t.Setenv("REGISTRY_AUTH_FILE", w.authFile)
	t.Setenv("GAPMIRROR_CACHE", "")
	t.Setenv("OC_MIRROR_CACHE", filepath.Join(w.dir, "cache"))
	t.Setenv("UPDATE_URL_OVERRIDE", srv.URL+"/graph")

	isc := w.isc("")
	for _, name := range []string{"isc.yaml", "isc-m2m.yaml", "isc-enclave.yaml"} {
		data, err := os.ReadFile(isc)
		must(t, err)
		must(t, os.WriteFile(filepath.Join(w.dir, name), data, 0o644))
	}
	disc := "kind: DeleteImageSetConfiguration\napiVersion: mirror.openshift.io/v2alpha1\ndelete:\n  additionalImages:\n  - name: " + w.images[0].Ref + "\n"
	must(t, os.WriteFile(filepath.Join(w.dir, "delete-isc.yaml"), []byte(disc), 0o644))
	must(t, os.WriteFile(filepath.Join(w.dir, "delete-image-set-config.yaml"), []byte(disc), 0o644))
	// delete works on what a workspace pushed: these two mirror first.
	ws := filepath.Join(base, "deleted-from")
	for _, dir := range []string{filepath.Join(base, "home/user/oc-mirror/delete1"), ws} {
		if code, _, _ := runPlain(t, "-c", "isc.yaml", "--workspace", "file://"+dir, "docker://"+w.dst.Host()+"/del-"+filepath.Base(dir)); code != 0 {
			t.Fatalf("preparing the delete workspace %s failed", dir)
		}
	}

	subst := strings.NewReplacer(
		"registry.redhat.io/redhat/redhat-operator-index:v4.18", w.up.Host()+"/redhat/redhat-operator-index:v4.18",
		"--catalogs", "--catalogs --catalogs-registry "+w.up.Host()+"/redhat",
		"aws-load-balancer-operator", pkg.Name,
		"stable-v1", pkg.Channels[0].Name,
		"/home/<user>/", base+"/home/user/",
		"/home/user/", base+"/home/user/",
		"/disk1/enterprise-content", base+"/home/user/oc-mirror/mirror1",
		"<previously-mirrored-work-folder>/delete/", ws+"/working-dir/delete/",
		"<previously-mirrored-work-folder>", ws,
		"docker://localhost:6000", "docker://"+w.dst.Host()+"/del-delete1",
		"docker://<remote-registry>", "docker://"+w.dst.Host()+"/del-deleted-from",
		"docker://registry.example.com", "docker://"+w.dst.Host()+"/example",
		"docker://enterprise-registry.in/", "docker://"+w.dst.Host()+"/enterprise/",
	)
	for _, l := range docLines {
		args := strings.Fields(subst.Replace(l.line))[1:]
		code, out, errOut := runPlain(t, args...)
		switch {
		case l.refuse != "":
			if code != 1 || !strings.Contains(errOut, l.refuse) {
				t.Errorf("%s\n  want exit 1 and %q, got exit %d: %s", l.line, l.refuse, code, errOut)
			}
		case code != 0 || !strings.Contains(out, l.wantOut):
			t.Errorf("%s\n  want exit 0 and %q in the output, got exit %d:\n%s%s", l.line, l.wantOut, code, out, errOut)
		}
	}
	w.assertMirrored(w.dst, "example")
	w.assertMirrored(w.dst, "enterprise")
	if _, err := os.Stat(filepath.Join(w.dir, "cache", ".gapmirror", "store")); err != nil {
		t.Errorf("OC_MIRROR_CACHE did not place the store: %v", err)
	}

	// Every line of the reference is in the table above.
	ref, err := os.Open("/work/shared/reference/oc-mirror-v2-command-lines.md")
	if err != nil {
		t.Logf("oc-mirror-v2-command-lines.md not available (shared workspace data, not part of the repository): not checking the table covers it: %v", err)
		return
	}
	defer ref.Close()
	known := map[string]bool{}
	for _, l := range docLines {
		known[strings.TrimSpace(l.line)] = true
	}
	sc := bufio.NewScanner(ref)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); strings.HasPrefix(l, "oc-mirror ") && !known[l] {
			t.Errorf("documented command line not run by this test: %s", l)
		}
	}
}

// TestOcMirrorFlags: every oc-mirror v2 flag gapmirror does not take is
// refused with a sentence naming what to use; the ones it takes keep
// their meaning.
func TestOcMirrorFlags(t *testing.T) {
	dir := t.TempDir()
	isc := filepath.Join(dir, "isc.yaml")
	must(t, os.WriteFile(isc, []byte("kind: ImageSetConfiguration\napiVersion: mirror.openshift.io/v2alpha1\nmirror:\n  additionalImages:\n  - name: 127.0.0.1:1/a:v1\n"), 0o644))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--v2", "-c", isc, "--ignore-release-signature", "file://" + dir}, "use --skip-release-signature-verification"},
		{[]string{"mirror", "-c", isc, "--image-timeout", "30m", "file://" + dir}, "--retry-times"},
		{[]string{"-c", isc, "--dry-run-manifest-lists", "file://" + dir}, "use --dry-run"},
		{[]string{"--v1", "-c", isc, "file://" + dir}, "oc-mirror v2 only"},
		{[]string{"-p", "55000", "-c", isc, "file://" + dir}, "no port"},
		{[]string{"--rootless-storage-path", "/x", "-c", isc, "file://" + dir}, "--cache-dir"},
		{[]string{"delete", "--delete-v1-images", "--generate", "docker://h:5000"}, "oc-mirror v1"},
		{[]string{"--log-level", "loud", "-c", isc, "file://" + dir}, "use error, warn, info, debug or trace"},
		{[]string{"--src-creds", ":pw", "-c", isc, "file://" + dir}, "--src-creds: the user name is empty"},
		{[]string{"--dest-creds", "u:p", "--dest-no-creds", "-c", isc, "--workspace", "file://" + dir, "docker://h:5000"}, "exclude each other"},
		// skopeo's old name of --src-creds, which oc-mirror takes too.
		{[]string{"--screds", ":pw", "-c", isc, "file://" + dir}, "--src-creds: the user name is empty"},
		// skopeo's transport flags oc-mirror inherits, on mirror and delete.
		{[]string{"--src-shared-blob-dir", "/blobs", "-c", isc, "file://" + dir}, "--src-shared-blob-dir (oc-mirror) is not supported: gapmirror reads and writes no oci: transport directories"},
		{[]string{"mirror", "--dest-shared-blob-dir", "/blobs", "-c", isc, "file://" + dir}, "use --cache-dir to place it"},
		{[]string{"--src-daemon-host", "unix:///run/docker.sock", "-c", isc, "file://" + dir}, "never talks to a docker daemon"},
		{[]string{"delete", "--dest-daemon-host", "tcp://h:2375", "--delete-yaml-file", isc, "docker://h:5000"}, "--dest-daemon-host (oc-mirror) is not supported: gapmirror never talks to a docker daemon"},
		{[]string{"--dest-compress", "-c", isc, "file://" + dir}, "no dir: destination to compress into"},
		{[]string{"--dest-decompress", "-c", isc, "file://" + dir}, "no dir: destination to decompress into"},
		{[]string{"--dest-compress-format", "zstd", "-c", isc, "file://" + dir}, "byte for byte"},
		{[]string{"mirror", "--dest-compress-level", "9", "-c", isc, "file://" + dir}, "no level to choose"},
		{[]string{"--dest-oci-accept-uncompressed-layers", "-c", isc, "file://" + dir}, "uncompressed ones included"},
		{[]string{"--dest-precompute-digests", "-c", isc, "file://" + dir}, "uploads only the rest"},
		// oc-mirror's copy flags, which it takes on every command: delete
		// copies nothing and verifies nothing.
		{[]string{"delete", "--parallel-images", "4", "--delete-yaml-file", isc, "docker://h:5000"}, "--parallel-images (oc-mirror) is not supported: gapmirror delete copies no images"},
		{[]string{"delete", "--parallel-layers", "10", "--generate", "docker://h:5000"}, "delete moves no layers"},
		{[]string{"delete", "--retry-times", "3", "--delete-yaml-file", isc, "docker://h:5000"}, "run delete --generate again"},
		{[]string{"delete", "--retry-delay", "1s", "--delete-yaml-file", isc, "docker://h:5000"}, "sends each delete once"},
		{[]string{"delete", "--policy", "/etc/containers/policy.json", "--delete-yaml-file", isc, "docker://h:5000"}, "delete verifies no signatures"},
		{[]string{"delete", "--dest-authfile", "/nonexistent/auth.json", "--delete-yaml-file", isc, "docker://h:5000"}, "--dest-authfile /nonexistent/auth.json: the file does not exist"},
		// mirror takes the copy flags: the value is checked, not refused.
		{[]string{"mirror", "--parallel-images", "0", "-c", isc, "file://" + dir}, "--parallel-images 0: use 1 to 64"},
		{[]string{"--retry-times", "101", "-c", isc, "file://" + dir}, "--retry-times 101: use 0 to 100"},
	} {
		code, _, errOut := runPlain(t, c.args...)
		if code != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: want exit 1 and %q, got exit %d: %s", c.args, c.want, code, errOut)
		}
	}
	// Taken with oc-mirror's meaning: --log-level trace, -f (force), the
	// tri-state TLS flags with or without a value.
	if code, _, errOut := runPlain(t, "--v2", "--log-level", "trace", "-f", "--src-tls-verify", "--dest-tls-verify=false", "--tls-verify=true", "-q", "--help"); code != 0 {
		t.Errorf("oc-mirror's flags: exit %d: %s", code, errOut)
	}
	g := &globalFlags{stderr: io.Discard, logLevel: "trace"}
	if l, err := g.logger(io.Discard); err != nil || !l.Enabled(context.Background(), slog.LevelDebug) {
		t.Errorf("--log-level trace must log debug lines: %v", err)
	}
	g.src.creds = "user:secret:with:colons"
	if c, _, err := g.src.options("src"); err != nil || c.Username != "user" || c.Password != "secret:with:colons" {
		t.Errorf("--src-creds user:secret:with:colons = %+v, %v", c, err)
	}
}

// TestVersionCommand: version, commit and build date in text, JSON and
// YAML; --short prints the number alone.
func TestVersionCommand(t *testing.T) {
	version, commit, buildDate = "v9.8.7", "abc123", "2026-11-25T06:00:00Z"
	t.Cleanup(func() { version, commit, buildDate = "dev", "", "" })
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"version"}, "gapmirror v9.8.7\ncommit: abc123\nbuilt: 2026-11-25T06:00:00Z\n"},
		{[]string{"version", "--short"}, "v9.8.7\n"},
		{[]string{"version", "--output", "json"}, `"commit": "abc123"`},
		{[]string{"version", "-o", "yaml"}, "buildDate: \"2026-11-25T06:00:00Z\"\n"},
		{[]string{"--v2", "version", "--output", "json", "--short"}, "{\n  \"version\": \"v9.8.7\"\n}\n"},
	} {
		code, out, _ := runPlain(t, c.args...)
		if code != 0 || !strings.Contains(out, c.want) {
			t.Errorf("%v: exit %d, output %q, want %q", c.args, code, out, c.want)
		}
	}
	if code, _, errOut := runPlain(t, "version", "-o", "xml"); code != 1 || !strings.Contains(errOut, "use json or yaml") {
		t.Errorf("-o xml: exit %d: %s", code, errOut)
	}
}

// TestMirrorSetsHeldOnFailure: a run whose image failed does not rewrite
// the IDMS/ITMS an earlier run wrote when that image would change them, and
// says so; the next complete run rewrites them. Every generated object
// carries created-by, created-at and tool-version.
func TestMirrorSetsHeldOnFailure(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(3, 16<<10)
	im := w.images
	ws := filepath.Join(w.dir, "ws")
	dst := "docker://" + w.dst.Host() + "/m"
	itmsPath := filepath.Join(ws, "working-dir", "cluster-resources", "itms-gapmirror.yaml")
	if code, _, _ := w.gapmirror("mirror", "-c", w.iscOf("one.yaml", entry{name: im[0].Ref}), "--workspace", "file://"+ws, dst); code != 0 {
		t.Fatalf("first run: exit %d", code)
	}
	before, err := os.ReadFile(itmsPath)
	must(t, err)
	for _, a := range []string{"gapmirror.io/created-by: gapmirror", "gapmirror.io/created-at: \"20", "gapmirror.io/tool-version: "} {
		if !strings.Contains(string(before), a) {
			t.Errorf("ITMS lacks the annotation %q:\n%s", a, before)
		}
	}

	data, _, err := w.up.Manifest(im[1].Repo, im[1].Digest.String())
	must(t, err)
	all := layersOf(t, data)
	w.up.SetWrap(registrytest.NewBlobCorrupter(0, all[len(all)-1]).Wrap)
	both := w.iscOf("two.yaml", entry{name: im[0].Ref}, entry{name: im[1].Ref})
	code, stdout, _ := w.gapmirror("mirror", "-c", both, "--retry-times", "0", "--workspace", "file://"+ws, dst)
	if code != 8 || !strings.Contains(stdout, "IDMS/ITMS left as the earlier run wrote them") || !strings.Contains(stdout, im[1].Ref) {
		t.Fatalf("run with a failed image: exit %d, want 8 and the held mirror sets named:\n%s", code, stdout)
	}
	after, err := os.ReadFile(itmsPath)
	must(t, err)
	if string(after) != string(before) {
		t.Errorf("ITMS rewritten by a run whose image failed:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	held, err := os.Stat(itmsPath)
	must(t, err)
	w.up.SetWrap(nil)
	if code, stdout, _ := w.gapmirror("mirror", "-c", both, "--workspace", "file://"+ws, dst); code != 0 || strings.Contains(stdout, "left as the earlier run") {
		t.Fatalf("complete run: exit %d:\n%s", code, stdout)
	}
	if fi, err := os.Stat(itmsPath); err != nil || !fi.ModTime().After(held.ModTime()) {
		t.Errorf("the complete run did not rewrite the ITMS: %v", err)
	}
}

// TestDryRunGoNoGo: dry runs answer go/no-go. Mirror-to-disk counts what
// the store lacks and the archive size; disk-to-mirror and
// mirror-to-mirror reach the mirror (an unreachable one, refused
// credentials or refused push fail the dry run), count the images already
// there and the bytes to move, write the cluster resources into
// dry-run/cluster-resources and an absolute mapping.txt, and write no
// pinned configuration.
func TestDryRunGoNoGo(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(4, 64<<10)
	isc := w.isc("")
	archiveDir := filepath.Join(w.dir, "archive")

	code, out, _ := w.gapmirror("mirror", "-c", isc, "--dry-run", "file://"+archiveDir)
	if code != 0 || !strings.Contains(out, "local store: 0 images already there, 4 to download") || !strings.Contains(out, "the archive would be ") {
		t.Fatalf("mirror-to-disk dry run: exit %d:\n%s", code, out)
	}
	if pinned, _ := filepath.Glob(filepath.Join(archiveDir, "working-dir", "isc_pinned_*")); len(pinned) > 0 {
		t.Errorf("a dry run wrote a pinned configuration: %v", pinned)
	}
	if code, _, _ := w.gapmirror("mirror", "-c", isc, "file://"+archiveDir); code != 0 {
		t.Fatalf("mirror-to-disk: exit %d", code)
	}
	chunks, _ := filepath.Glob(filepath.Join(archiveDir, "mirror_*.tar"))
	if len(chunks) == 0 {
		t.Fatal("no archive")
	}

	// Half the images are at the mirror already.
	root := w.dst.Host() + "/d2m"
	half := w.iscOf("half.yaml", entry{name: w.images[0].Ref}, entry{name: w.images[1].Ref})
	if code, _, _ := w.gapmirror("mirror", "-c", half, "--workspace", "file://"+filepath.Join(w.dir, "pre"), "docker://"+root); code != 0 {
		t.Fatal("pre-seeding the mirror failed")
	}
	// The dry run checks as the run would: one catalog reading, no
	// manifest HEAD for the images of repositories the mirror lacks.
	var heads atomic.Int64
	w.dst.SetWrap(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodHead && strings.Contains(r.URL.Path, "/manifests/") {
				heads.Add(1)
			}
			next.ServeHTTP(rw, r)
		})
	})
	code, out, _ = w.gapmirror("mirror", "-c", isc, "--dry-run", "--from", "file://"+archiveDir, "docker://"+root)
	w.dst.SetWrap(nil)
	if code != 0 || !strings.Contains(out, "mirror "+root+": reachable, credentials and push accepted; 2 images already there, 2 to copy") {
		t.Fatalf("disk-to-mirror dry run: exit %d:\n%s", code, out)
	}
	if n := heads.Load(); n > 3 { // the 2 images there, and the mirror check
		t.Errorf("the dry run sent %d manifest HEADs for 2 images already there", n)
	}
	dry := filepath.Join(archiveDir, "working-dir", "dry-run")
	if _, err := os.Stat(filepath.Join(dry, "cluster-resources", "itms-gapmirror.yaml")); err != nil {
		t.Errorf("the dry run wrote no cluster resources: %v", err)
	}
	if _, err := os.Stat(filepath.Join(archiveDir, "working-dir", "cluster-resources")); err == nil {
		t.Errorf("the dry run wrote cluster resources where a real run does")
	}
	mapping := readFile(t, filepath.Join(dry, "mapping.txt"))
	if !strings.Contains(mapping, "=docker://"+root+"/"+w.images[2].Repo+":v1") {
		t.Errorf("mapping.txt destinations are not absolute:\n%s", mapping)
	}
	if got, _ := w.dst.Catalog(); len(got) != 2 {
		t.Errorf("the dry run pushed: the mirror holds %v", got)
	}

	// mirror-to-mirror answers the same, and writes no pinned configuration.
	m2mWS := filepath.Join(w.dir, "m2m-ws")
	code, out, _ = w.gapmirror("mirror", "-c", isc, "--dry-run", "--workspace", "file://"+m2mWS, "docker://"+root)
	if code != 0 || !strings.Contains(out, "mirror "+root+": reachable, credentials and push accepted; 2 images already there, 2 to copy") {
		t.Fatalf("mirror-to-mirror dry run: exit %d:\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(m2mWS, "working-dir", "dry-run", "cluster-resources", "idms-gapmirror.yaml")); err != nil {
		t.Errorf("the mirror-to-mirror dry run wrote no cluster resources: %v", err)
	}
	if pinned, _ := filepath.Glob(filepath.Join(m2mWS, "working-dir", "isc_pinned_*")); len(pinned) > 0 {
		t.Errorf("a mirror-to-mirror dry run wrote a pinned configuration: %v", pinned)
	}

	// No-go: nothing listening; a mirror that wants credentials we lack.
	dead := "127.0.0.1:1"
	code, _, errOut := w.gapmirror("mirror", "-c", isc, "--retry-times", "0", "--dry-run", "--workspace", "file://"+filepath.Join(w.dir, "ws"), "docker://"+dead+"/m")
	if code == 0 || !strings.Contains(errOut, "cannot use the mirror registry "+dead) {
		t.Errorf("mirror-to-mirror dry run against nothing: exit %d: %s", code, errOut)
	}
	locked := registrytest.Start(t, registrytest.Options{Username: "alice", Password: "s3cret"})
	code, _, errOut = w.gapmirror("mirror", "-c", isc, "--retry-times", "0", "--dry-run", "--from", "file://"+archiveDir, "docker://"+locked.Host()+"/m")
	if code == 0 || !strings.Contains(errOut, "credentials") {
		t.Errorf("disk-to-mirror dry run without credentials: exit %d: %s", code, errOut)
	}
}

// TestDiskToMirrorSubset: -c on disk-to-mirror may name a subset of the
// archive's configuration (entries as written or as the pinned
// configuration wrote them): exactly that subset is pushed and the cluster
// resources cover it alone; entries the archive does not hold, or a catalog
// filtered otherwise, are refused, each named, before anything is pushed.
func TestDiskToMirrorSubset(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(4, 16<<10)
	oc := w.pushCatalog("redhat/redhat-operator-index", "v4.18", catalogOptions{Spec: smallSpec, Single: true})
	pkgs := catalog.Packages(oc.Cat)
	catalogEntry := fmt.Sprintf("  operators:\n  - catalog: %s/redhat/redhat-operator-index:v4.18\n    packages:\n    - name: %s\n    - name: %s\n", w.up.Host(), pkgs[0].Name, pkgs[1].Name)
	isc := w.isc(catalogEntry)
	archiveDir := filepath.Join(w.dir, "archive")
	if code, _, _ := w.gapmirror("mirror", "-c", isc, "file://"+archiveDir); code != 0 {
		t.Fatal("mirror-to-disk failed")
	}
	pinned := pinnedConfig(t, archiveDir)
	p2 := pinned.Mirror.AdditionalImages[2]

	// Images 0 (as written), 2 (as pinned), 3 and the catalog; not image 1.
	var b strings.Builder
	fmt.Fprintf(&b, "kind: ImageSetConfiguration\napiVersion: mirror.openshift.io/v2alpha1\nmirror:\n  additionalImages:\n  - name: %s\n  - name: %s\n    targetTag: %s\n  - name: %s\n%s",
		w.images[0].Ref, p2.Name, p2.TargetTag, w.images[3].Ref, catalogEntry)
	subset := w.writeFile("subset.yaml", b.String())
	root := w.dst.Host() + "/enclave-a"
	code, out, _ := w.gapmirror("mirror", "-c", subset, "--from", "file://"+archiveDir, "docker://"+root)
	if code != 0 {
		t.Fatalf("disk-to-mirror with a subset: exit %d", code)
	}
	repos, _ := w.dst.Catalog()
	for _, i := range []int{0, 2, 3} {
		if !slices.Contains(repos, "enclave-a/"+w.images[i].Repo) {
			t.Errorf("image %d (%s) of the subset is not at the mirror: %v", i, w.images[i].Ref, repos)
		}
	}
	if slices.Contains(repos, "enclave-a/"+w.images[1].Repo) {
		t.Errorf("image 1 (%s) is not in the subset but was pushed", w.images[1].Ref)
	}
	if !slices.Contains(repos, "enclave-a/redhat/redhat-operator-index") {
		t.Errorf("the catalog of the subset is not at the mirror: %v", repos)
	}
	// Exactly the subset: the whole archive pushed elsewhere has image 1
	// more and nothing else.
	if code, _, _ := w.gapmirror("mirror", "-c", isc, "--from", "file://"+archiveDir, "docker://"+w.dst.Host()+"/whole"); code != 0 {
		t.Fatal("disk-to-mirror of the whole archive failed")
	}
	repos, _ = w.dst.Catalog()
	var subsetRepos, wholeRepos []string
	for _, r := range repos {
		if rest, ok := strings.CutPrefix(r, "enclave-a/"); ok {
			subsetRepos = append(subsetRepos, rest)
		} else if rest, ok := strings.CutPrefix(r, "whole/"); ok && rest != w.images[1].Repo {
			wholeRepos = append(wholeRepos, rest)
		}
	}
	if !slices.Equal(subsetRepos, wholeRepos) {
		t.Errorf("the subset pushed %v, want the whole archive less image 1: %v", subsetRepos, wholeRepos)
	}
	cs, _ := filepath.Glob(filepath.Join(archiveDir, "working-dir", "cluster-resources", "cs-*"))
	if len(cs) == 0 {
		t.Errorf("no CatalogSource generated for the subset's catalog")
	}
	if !strings.Contains(out, "disk-to-mirror: ") {
		t.Errorf("no summary:\n%s", out)
	}

	// Fewer packages of the same catalog: the catalog is filtered again
	// and rebuilt on the archive's image, and only the images of the kept
	// package are pushed.
	onePkg := w.writeISC("one-package.yaml", fmt.Sprintf("  operators:\n  - catalog: %s/redhat/redhat-operator-index:v4.18\n    packages:\n    - name: %s\n", w.up.Host(), pkgs[0].Name))
	if code, _, _ := w.gapmirror("mirror", "-c", onePkg, "--from", "file://"+archiveDir, "docker://"+w.dst.Host()+"/enclave-c"); code != 0 {
		t.Fatal("disk-to-mirror with fewer packages failed")
	}
	if left, _ := filepath.Glob(filepath.Join(archiveDir, "working-dir", "subset-catalogs-*")); len(left) > 0 {
		t.Errorf("the rebuilt catalogs' store was left behind: %v", left)
	}
	catRepo := "enclave-c/redhat/redhat-operator-index"
	d, err := w.dst.ManifestDigest(catRepo, "v4.18")
	if err != nil {
		t.Fatalf("the rebuilt catalog is not at the mirror: %v", err)
	}
	w.assertComplete(w.dst, catRepo, d)
	checkNoOPMCache(t, w.dst, catRepo, d)
	narrowed := mirroredCatalog(t, w.dst, catRepo, d)
	if got := narrowed.PackageNames(); !slices.Equal(got, []string{pkgs[0].Name}) {
		t.Errorf("the rebuilt catalog holds packages %v, want only %s", got, pkgs[0].Name)
	}
	whole := mirroredCatalog(t, w.dst, "whole/redhat/redhat-operator-index", mustDigest(t, w.dst, "whole/redhat/redhat-operator-index", "v4.18"))
	if n := w.checkImages(w.dst, "enclave-c", narrowed); n == 0 {
		t.Error("no image of the kept package checked")
	}
	for _, ref := range whole.RelatedImages() {
		if slices.ContainsFunc(narrowed.RelatedImages(), func(r fbc.ImageRef) bool { return r.Image == ref.Image }) {
			continue
		}
		named, err := reference.ParseNormalizedNamed(ref.Image)
		must(t, err)
		if _, err := w.dst.ManifestDigest("enclave-c/"+reference.Path(named), imageset.DigestTag(named.(reference.Canonical).Digest())); err == nil {
			t.Errorf("%s belongs to a package the subset leaves out, but was pushed", ref.Image)
		}
	}

	// What the archive does not hold is refused, every entry named.
	other := w.writeFile("other.yaml", fmt.Sprintf("kind: ImageSetConfiguration\napiVersion: mirror.openshift.io/v2alpha1\nmirror:\n  additionalImages:\n  - name: %s\n  - name: %s/not/in-archive:v1\n  operators:\n  - catalog: %s/redhat/redhat-operator-index:v4.18\n    packages:\n    - name: %s\n  blockedImages:\n  - name: not-in-the-archive\n",
		w.images[0].Ref, w.up.Host(), w.up.Host(), pkgs[2].Name))
	w.refusedSubset(other, archiveDir, "enclave-b", "mirror.additionalImages[1] "+w.up.Host()+"/not/in-archive:v1: not an additional image of the archive", "mirror.operators[0] ", pkgs[2].Name, "the archive's catalog holds only what its configuration selected", "mirror.blockedImages[0] not-in-the-archive: not a rule of the archive's configuration")
}

// TestSecurePolicyRegistriesD: --registries.d is read where --secure-policy
// verifies, as containers/image does: a registries.d that turns sigstore
// attachments off for the upstream registry makes its signed images fail
// the policy that accepts them otherwise.
func TestSecurePolicyRegistriesD(t *testing.T) {
	t.Parallel()
	w := newSignedWorld(t, registrytest.Options{})
	der, err := x509.MarshalPKIXPublicKey(&w.key.PublicKey)
	must(t, err)
	keyPath := filepath.Join(w.dir, "cosign.pub")
	must(t, os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644))
	policy := filepath.Join(w.dir, "policy.json")
	must(t, os.WriteFile(policy, []byte(`{"default":[{"type":"reject"}],"transports":{"docker":{"`+w.up.Host()+`":[`+
		`{"type":"sigstoreSigned","keyPath":"`+keyPath+`","signedIdentity":{"type":"matchRepository"}}]}}}`), 0o644))
	signed := w.iscOf("signed.yaml", entry{name: w.images[0].Ref})
	root := "docker://" + w.dst.Host() + "/m"
	if code, out, _ := w.gapmirror("mirror", "-c", signed, "--secure-policy", "--policy", policy, "--workspace", "file://"+filepath.Join(w.dir, "ws1"), root); code != 0 || !strings.Contains(out, "1 image: 1 copied,") {
		t.Fatalf("a signed image under the default registries.d: exit %d:\n%s", code, out)
	}
	regsD := filepath.Join(w.dir, "registries.d")
	must(t, os.MkdirAll(regsD, 0o755))
	must(t, os.WriteFile(filepath.Join(regsD, "upstream.yaml"), []byte("docker:\n  "+w.up.Host()+":\n    use-sigstore-attachments: false\n"), 0o644))
	code, out, _ := w.gapmirror("mirror", "-c", signed, "--secure-policy", "--policy", policy, "--registries.d", regsD, "--workspace", "file://"+filepath.Join(w.dir, "ws2"), root+"2")
	if code != 8 || !strings.Contains(out, "refused by the signature policy") {
		t.Errorf("--registries.d turning sigstore attachments off: exit %d (want 8):\n%s", code, out)
	}
}

// TestDiskToMirrorSubsetReleases: a -c that keeps fewer channel entries
// pushes the releases those entries selected, with their components and
// signature ConfigMaps, and no other release.
func TestDiskToMirrorSubsetReleases(t *testing.T) {
	t.Parallel()
	versions := []string{"4.18.1", "4.18.2", "4.18.3"}
	w := newReleaseWorld(t, versions, 2, false)
	// fast-4.18 serves the same payloads.
	g := releasetest.NewGraph("amd64", versions...)
	for _, v := range versions {
		g.SetPayload(v, w.payloads[v].PullSpec())
	}
	must(t, w.graphs.Put("fast-4.18", g.GenerateEdges()))
	one := "    - name: stable-4.18\n      minVersion: 4.18.1\n      maxVersion: 4.18.1\n"
	three := "    - name: fast-4.18\n      minVersion: 4.18.3\n      maxVersion: 4.18.3\n"
	isc := w.releaseISC("isc", "    channels:\n"+one+three)
	archiveDir := filepath.Join(w.dir, "archive")
	if code, _, _ := w.run("mirror", "-c", isc, "file://"+archiveDir); code != 0 {
		t.Fatal("mirror-to-disk failed")
	}
	subset := w.releaseISC("subset", "    channels:\n"+three)
	if code, _, _ := w.run("mirror", "-c", subset, "--from", "file://"+archiveDir, "docker://"+w.dst.Host()+"/enclave"); code != 0 {
		t.Fatal("disk-to-mirror of the subset failed")
	}
	w.assertRelease("enclave", w.payloads["4.18.3"], false)
	for _, v := range []string{"4.18.1", "4.18.2"} {
		if _, err := w.dst.ManifestDigest("enclave/openshift/release-images", w.payloads[v].Tag); err == nil {
			t.Errorf("release %s is not in the subset but was pushed", v)
		}
		for _, c := range w.payloads[v].Components {
			if _, err := w.dst.ManifestDigest("enclave/openshift/release", w.payloads[v].Tag+"-"+c.Name); err == nil {
				t.Errorf("component %s of release %s is not in the subset but was pushed", c.Name, v)
			}
		}
	}
	w.assertSignatureConfigMaps(filepath.Join(archiveDir, "working-dir", "cluster-resources", "signature-configmap.yaml"), []string{"4.18.3"})
}

// pinnedConfig loads the one pinned configuration a run wrote in dir's
// working-dir.
func pinnedConfig(t *testing.T, dir string) *imageset.ImageSetConfiguration {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "working-dir", "isc_pinned_*.yaml"))
	if len(files) != 1 {
		t.Fatalf("pinned configurations: %v", files)
	}
	pinned, err := imageset.LoadImageSetConfiguration(files[0])
	must(t, err)
	return pinned
}

func mustDigest(t *testing.T, reg *registrytest.Registry, repo, tag string) digest.Digest {
	t.Helper()
	d, err := reg.ManifestDigest(repo, tag)
	must(t, err)
	return d
}

// createdAt is the annotation line that differs between two runs that
// otherwise write the same cluster resources.
var createdAt = regexp.MustCompile(`(?m)^\s*"?gapmirror\.io/created-at"?: .*\n`)

// resourceFile reads a generated cluster resource for comparing with
// another run's: without its created-at annotations.
func resourceFile(t *testing.T, p string) string {
	t.Helper()
	return createdAt.ReplaceAllString(readFile(t, p), "")
}
