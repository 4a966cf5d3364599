package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/registry"
	"sigs.k8s.io/yaml"

	"github.com/gapmirror/gapmirror/internal/helmtest"
	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// chartClient is helm's own registry client for a test registry.
func chartClient(t *testing.T, reg *registrytest.Registry, user, password string) *registry.Client {
	t.Helper()
	opts := []registry.ClientOption{registry.ClientOptHTTPClient(reg.Client()), registry.ClientOptCredentialsFile(filepath.Join(t.TempDir(), "helm-registry.json"))}
	if !reg.TLS() {
		opts = append(opts, registry.ClientOptPlainHTTP())
	}
	if user != "" {
		opts = append(opts, registry.ClientOptBasicAuth(user, password))
	}
	c, err := registry.NewClient(opts...)
	must(t, err)
	return c
}

// pushChart publishes a chart as `helm push` does, at HOST/repo/NAME:VERSION,
// and returns the manifest digest.
func pushChart(t *testing.T, c *registry.Client, host, repo string, ch helmtest.Chart) digest.Digest {
	t.Helper()
	res, err := c.Push(ch.Archive(), fmt.Sprintf("%s/%s/%s:%s", host, repo, ch.Name, ch.Version))
	must(t, err)
	return digest.Digest(res.Manifest.Digest)
}

// assertChartServed pulls ref back from the mirror with helm's client: the
// chart bytes must be those of the source and, when want is set, the
// manifest digest that of the source.
func assertChartServed(t *testing.T, c *registry.Client, ref string, want digest.Digest, archive []byte) {
	t.Helper()
	res, err := c.Pull(ref)
	if err != nil {
		t.Errorf("helm pull oci://%s from the mirror: %v", ref, err)
		return
	}
	if want != "" && res.Manifest.Digest != want.String() {
		t.Errorf("oci://%s: mirror serves manifest %s, the source has %s", ref, res.Manifest.Digest, want)
	}
	if !bytes.Equal(res.Chart.Data, archive) {
		t.Errorf("oci://%s: the chart served differs from the source's .tgz (digest %s, want %s)", ref, res.Chart.Digest, digest.FromBytes(archive))
	}
}

// TestHelmOCICharts mirrors a chart from an oci:// repository (the latest
// stable version, picked from the registry's tags) and one from an HTTP
// repository, registry to registry and through an archive: each chart is
// served by the mirror as a helm OCI artifact that helm pulls, byte for
// byte the source's chart (the OCI one with the source's manifest digest),
// its images by digest, and listed in helm-charts.yaml; a chart dropped
// from the configuration is pruned.
func TestHelmOCICharts(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	up := w.up.Host()
	w.expectApp("web", "v1", 300)
	w.expectApp("jobs", "v1", 301)
	web := helmtest.Pod("web", "1.0.0", up+"/apps/web:v1")
	jobs := helmtest.Pod("jobs", "0.2.0", up+"/apps/jobs:v1")
	upCharts := chartClient(t, w.up, "", "")
	webDigest := pushChart(t, upCharts, up, "charts/stable", web)
	// A pre-release names an image that does not exist: picking it fails the run.
	pushChart(t, upCharts, up, "charts/stable", helmtest.Pod("web", "2.0.0-rc.1", up+"/apps/web:missing"))
	repo := helmtest.Serve(t, jobs)
	both := w.writeISC("helm-oci.yaml", fmt.Sprintf(`  helm:
    repositories:
    - name: stable
      url: oci://%s/charts/stable
      charts:
      - name: web
    - name: http
      url: %s
      charts:
      - name: jobs
        version: 0.2.0
`, up, repo.URL()))
	dst := chartClient(t, w.dst, "", "")
	assertServed := func(prefix string, ws string) {
		t.Helper()
		w.assertMirrored(w.dst, prefix)
		assertChartServed(t, dst, w.dst.Host()+"/"+prefix+"/charts/stable/web:1.0.0", webDigest, web.Archive())
		assertChartServed(t, dst, w.dst.Host()+"/"+prefix+"/charts/jobs:0.2.0", "", jobs.Archive())
		resources := filepath.Join(ws, "working-dir", "cluster-resources")
		w.assertChartDeploys(dst, w.dst.Host()+"/"+prefix+"/charts/stable/web:1.0.0", resources)
		w.assertChartDeploys(dst, w.dst.Host()+"/"+prefix+"/charts/jobs:0.2.0", resources)
		list, err := os.ReadFile(filepath.Join(resources, chartsFile))
		must(t, err)
		for _, want := range []string{`"reference":"oci://` + w.dst.Host() + "/" + prefix + `/charts/stable/web:1.0.0"`, `"chart":"oci://` + w.dst.Host() + "/" + prefix + `/charts/jobs"`, `"digest":"` + webDigest.String() + `"`} {
			if !strings.Contains(string(list), want) {
				t.Errorf("helm-charts.yaml lacks %s:\n%s", want, list)
			}
		}
	}

	ws := filepath.Join(w.dir, "ws")
	code, out, _ := w.gapmirror("mirror", "-c", both, "--workspace", "file://"+ws, "docker://"+w.dst.Host()+"/m2m")
	if code != 0 {
		t.Fatalf("mirror-to-mirror exit %d", code)
	}
	if !strings.Contains(out, "4 images: 2 copied, 0 already at the destination, 2 built by gapmirror") {
		t.Errorf("summary does not say 2 images copied and 2 charts built:\n%s", out)
	}
	assertServed("m2m", ws)
	// The pinned configurations name the version the run picked for web.
	for _, pattern := range []string{"isc_pinned_*.yaml", "disc_pinned_*.yaml"} {
		pinned, _ := filepath.Glob(filepath.Join(ws, "working-dir", pattern))
		if len(pinned) != 1 || !strings.Contains(readFile(t, pinned[0]), "- name: web\n        version: 1.0.0\n") {
			t.Errorf("%s does not pin chart web to the version mirrored (1.0.0): %v", pattern, pinned)
		}
	}
	assertCharts(t, filepath.Join(ws, "working-dir"), map[string][]byte{"stable/web-1.0.0.tgz": web.Archive(), "http/jobs-0.2.0.tgz": jobs.Archive()})

	// Through an archive: the air-gapped side has only the chunks.
	archiveDir := filepath.Join(w.dir, "archive")
	if code, _, _ := w.gapmirror("mirror", "-c", both, "file://"+archiveDir); code != 0 {
		t.Fatalf("mirror-to-disk exit %d", code)
	}
	airgap := filepath.Join(w.dir, "airgap")
	must(t, os.MkdirAll(airgap, 0o755))
	chunks, _ := filepath.Glob(filepath.Join(archiveDir, "mirror_*.tar"))
	for _, c := range chunks {
		data, err := os.ReadFile(c)
		must(t, err)
		must(t, os.WriteFile(filepath.Join(airgap, filepath.Base(c)), data, 0o644))
	}
	if code, _, _ := w.gapmirror("mirror", "--from", "file://"+airgap, "docker://"+w.dst.Host()+"/d2m"); code != 0 {
		t.Fatalf("disk-to-mirror exit %d", code)
	}
	assertServed("d2m", airgap)

	// Dropping the HTTP repository prunes its chart (and its image) from the mirror.
	webOnly := w.writeISC("helm-oci-web.yaml", fmt.Sprintf(`  helm:
    repositories:
    - name: stable
      url: oci://%s/charts/stable
      charts:
      - name: web
        version: 1.0.0
`, up))
	code, out, _ = w.gapmirror("mirror", "-c", webOnly, "--prune", "--workspace", "file://"+ws, "docker://"+w.dst.Host()+"/m2m")
	if code != 0 {
		t.Fatalf("mirror-to-mirror --prune exit %d:\n%s", code, out)
	}
	if _, err := w.dst.ManifestDigest("m2m/charts/jobs", "0.2.0"); err == nil {
		t.Errorf("the dropped chart jobs 0.2.0 is still at the mirror")
	}
	if _, err := w.dst.ManifestDigest("m2m/apps/jobs", "v1"); err == nil {
		t.Errorf("the image of the dropped chart is still at the mirror")
	}
	assertChartServed(t, dst, w.dst.Host()+"/m2m/charts/stable/web:1.0.0", webDigest, web.Archive())
	list, err := os.ReadFile(filepath.Join(ws, "working-dir", "cluster-resources", "helm-charts.yaml"))
	must(t, err)
	if strings.Contains(string(list), "jobs") {
		t.Errorf("helm-charts.yaml still lists the pruned chart:\n%s", list)
	}
}

// TestHelmOCIChartPrune: a chart from an oci:// repository dropped from the
// configuration is pruned with --prune: its artifact (tag and manifest)
// and the image only it deployed leave the mirror; the image a kept chart
// also deploys, and the kept chart, stay whole.
func TestHelmOCIChartPrune(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	up := w.up.Host()
	w.expectApp("common", "v1", 360)
	w.expectApp("gone", "v1", 361)
	common, only := w.images[0], w.images[1]
	kept := helmtest.Pod("kept", "1.0.0", up+"/apps/common:v1")
	dropped := helmtest.New("dropped", "2.0.0", "", map[string]string{"templates/pod.yaml": fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: dropped
spec:
  containers:
  - name: only
    image: %s/apps/gone:v1
  - name: common
    image: %s/apps/common:v1
`, up, up)})
	c := chartClient(t, w.up, "", "")
	keptDigest := pushChart(t, c, up, "charts/stable", kept)
	droppedDigest := pushChart(t, c, up, "charts/stable", dropped)
	repo := func(charts ...string) string {
		return fmt.Sprintf("  helm:\n    repositories:\n    - name: stable\n      url: oci://%s/charts/stable\n      charts:\n%s", up, strings.Join(charts, ""))
	}
	keptEntry, droppedEntry := "      - name: kept\n        version: 1.0.0\n", "      - name: dropped\n        version: 2.0.0\n"
	ws := filepath.Join(w.dir, "ws")
	dst := "docker://" + w.dst.Host() + "/m"
	if code, _, _ := w.gapmirror("mirror", "-c", w.writeISC("both.yaml", repo(keptEntry, droppedEntry)), "--workspace", "file://"+ws, dst); code != 0 {
		t.Fatalf("mirror-to-mirror exit %d", code)
	}
	w.assertMirrored(w.dst, "m")
	dstCharts := chartClient(t, w.dst, "", "")
	assertChartServed(t, dstCharts, w.dst.Host()+"/m/charts/stable/dropped:2.0.0", droppedDigest, dropped.Archive())

	code, out, _ := w.gapmirror("mirror", "-c", w.writeISC("kept.yaml", repo(keptEntry)), "--prune", "--workspace", "file://"+ws, dst)
	if code != 0 {
		t.Fatalf("mirror-to-mirror --prune exit %d:\n%s", code, out)
	}
	_, pruned := deletionFile(t, filepath.Join(ws, "working-dir", "prune", "*-pruned.json"))
	if pruned.Outcome == nil || len(pruned.Outcome.Failed) != 0 || len(pruned.Outcome.Done) == 0 {
		t.Fatalf("prune outcome: %+v", pruned.Outcome)
	}
	w.gone(w.dst, "m/charts/stable/dropped", "2.0.0", droppedDigest)
	w.gone(w.dst, "m/"+only.Repo, only.Tag, only.Digest)
	w.present(w.dst, "m/"+common.Repo, common.Tag, common.Digest)
	w.present(w.dst, "m/charts/stable/kept", "1.0.0", keptDigest)
	assertChartServed(t, dstCharts, w.dst.Host()+"/m/charts/stable/kept:1.0.0", keptDigest, kept.Archive())
	list := readFile(t, filepath.Join(ws, "working-dir", "cluster-resources", chartsFile))
	if strings.Contains(list, "dropped") || !strings.Contains(list, `"reference":"oci://`+w.dst.Host()+`/m/charts/stable/kept:1.0.0"`) {
		t.Errorf("helm-charts.yaml after the prune must list kept only:\n%s", list)
	}
}

// TestHelmOCIChartsTLSAuth pulls a chart from an oci:// repository served
// over TLS (verified with --src-cert-dir) that wants credentials (basic
// auth, and the bearer token flow), with the credentials of the same auth
// file as the images.
func TestHelmOCIChartsTLSAuth(t *testing.T) {
	t.Parallel()
	t.Run("basic", func(t *testing.T) {
		testHelmOCIChartsTLSAuth(t, registrytest.Options{TLS: true, Username: "charts", Password: "s3cret-pw"}, "charts", "s3cret-pw")
	})
	// The bearer token flow (Quay, Harbor, ghcr.io) with a pull-only account.
	t.Run("token", func(t *testing.T) {
		testHelmOCIChartsTLSAuth(t, registrytest.Options{TLS: true, Username: "pusher", Password: "push-Pw-1",
			Token: &registrytest.TokenAuth{Users: []registrytest.TokenUser{{Username: "reader", Password: "read-Pw-2", Actions: []string{"pull"}}}}}, "reader", "read-Pw-2")
	})
}

func testHelmOCIChartsTLSAuth(t *testing.T, opts registrytest.Options, user, password string) {
	w := newWorld(t, opts)
	up := w.up.Host()
	img, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(310, 8<<10)}})
	must(t, err)
	must(t, imagebuilder.Push(context.Background(), imagebuilder.Target{URL: w.up.URL(), Client: w.up.Client(), Username: opts.Username, Password: opts.Password}, "apps/secure", "v1", img))
	w.images = append(w.images, example{Ref: up + "/apps/secure:v1", Repo: "apps/secure", Tag: "v1", Digest: img.Digest})
	ch := helmtest.Pod("secure", "0.1.0", up+"/apps/secure:v1")
	src := pushChart(t, chartClient(t, w.up, opts.Username, opts.Password), up, "charts", ch)
	auth, err := json.Marshal(map[string]any{"auths": map[string]any{up: map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte(user + ":" + password))}}})
	must(t, err)
	must(t, os.WriteFile(w.authFile, auth, 0o600))
	isc := w.writeISC("helm-tls.yaml", fmt.Sprintf(`  helm:
    repositories:
    - name: secure
      url: oci://%s/charts
      charts:
      - name: secure
        version: 0.1.0
`, up))
	ws := filepath.Join(w.dir, "ws")
	code, out, stderr := w.gapmirror("mirror", "-c", isc, "--src-tls-verify=true", "--src-cert-dir", w.up.CertsDir(), "--workspace", "file://"+ws, "docker://"+w.dst.Host()+"/tls")
	if code != 0 {
		t.Fatalf("mirror-to-mirror exit %d", code)
	}
	if strings.Contains(out+stderr, password) {
		t.Errorf("the output shows the password")
	}
	w.assertMirrored(w.dst, "tls")
	assertChartServed(t, chartClient(t, w.dst, "", ""), w.dst.Host()+"/tls/charts/secure:0.1.0", src, ch.Archive())

	// Without credentials the chart source is refused, with what to do.
	must(t, os.WriteFile(w.authFile, []byte(`{"auths":{}}`), 0o600))
	code, out, _ = w.gapmirror("mirror", "-c", isc, "--src-tls-verify=true", "--src-cert-dir", w.up.CertsDir(), "--workspace", "file://"+filepath.Join(w.dir, "noauth"), "docker://"+w.dst.Host()+"/noauth")
	if code&16 == 0 || !strings.Contains(out, "--authfile") {
		t.Errorf("a chart registry without credentials: exit %d (want the helm bit 16), summary:\n%s", code, out)
	}
	must(t, os.WriteFile(w.authFile, auth, 0o600))

	// Without the CA the chart source is refused, with what to do.
	code, out, _ = w.gapmirror("mirror", "-c", isc, "--src-tls-verify=true", "--workspace", "file://"+filepath.Join(w.dir, "noca"), "docker://"+w.dst.Host()+"/noca")
	if code&16 == 0 || !strings.Contains(out, "--src-cert-dir") {
		t.Errorf("an unverifiable chart registry: exit %d (want the helm bit 16), summary:\n%s", code, out)
	}
}

// TestHelmOCIChartsCredentials: a chart registry using the bearer token
// flow is reached with the credentials the source images get: an identity
// token (OAuth2 refresh token) from the auth file, --src-registry-token (a
// bearer token sent as is), --src-creds; and with --src-no-creds it is
// asked anonymously even though the auth file has an account for it. No
// token or password reaches the output.
func TestHelmOCIChartsCredentials(t *testing.T) {
	t.Parallel()
	const refresh = "chartRefresh-4x"
	w := newWorld(t, registrytest.Options{TLS: true, Username: "pusher", Password: upPush,
		Token: &registrytest.TokenAuth{Users: []registrytest.TokenUser{
			{Username: "reader", Password: upPull, Actions: []string{"pull"}},
			{Username: "robot", Password: "unused-" + refresh, RefreshToken: refresh, Actions: []string{"pull"}}}}})
	up := w.up.Host()
	ch := helmtest.New("private", "0.1.0", "", map[string]string{"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: private\ndata: {}\n"})
	src := pushChart(t, chartClient(t, w.up, "pusher", upPush), up, "charts", ch)
	isc := w.writeISC("helm-creds.yaml", fmt.Sprintf("  helm:\n    repositories:\n    - name: private\n      url: oci://%s/charts\n      charts:\n      - name: private\n        version: 0.1.0\n", up))
	dst := chartClient(t, w.dst, "", "")
	var output strings.Builder
	mirrorTo := func(prefix string, extra ...string) int {
		t.Helper()
		args := append([]string{"mirror", "-c", isc, "--src-tls-verify=true", "--src-cert-dir", w.up.CertsDir(), "--workspace", "file://" + filepath.Join(w.dir, "ws-"+prefix)}, extra...)
		code, out, stderr := w.gapmirror(append(args, "docker://"+w.dst.Host()+"/"+prefix)...)
		output.WriteString(out + stderr)
		return code
	}

	w.setAuth(login{up, "robot", "", refresh})
	if code := mirrorTo("identity"); code != 0 {
		t.Errorf("an identity token in the auth file: exit %d", code)
	}
	assertChartServed(t, dst, w.dst.Host()+"/identity/charts/private:0.1.0", src, ch.Archive())

	// A token the token server issued to reader for the chart's repository.
	req, err := http.NewRequest(http.MethodGet, w.up.TokenRealm()+"?service=registrytest&scope=repository:charts/private:pull", nil)
	must(t, err)
	req.SetBasicAuth("reader", upPull)
	resp, err := w.up.Client().Do(req)
	must(t, err)
	var tok struct {
		Token string `json:"token"`
	}
	must(t, json.NewDecoder(resp.Body).Decode(&tok))
	resp.Body.Close()
	if tok.Token == "" {
		t.Fatalf("the token server issued no token (%s)", resp.Status)
	}
	w.setAuth()
	if code := mirrorTo("token", "--src-registry-token", tok.Token); code != 0 {
		t.Errorf("--src-registry-token: exit %d", code)
	}
	assertChartServed(t, dst, w.dst.Host()+"/token/charts/private:0.1.0", src, ch.Archive())

	if code := mirrorTo("creds", "--src-creds", "reader:"+upPull); code != 0 {
		t.Errorf("--src-creds: exit %d", code)
	}
	assertChartServed(t, dst, w.dst.Host()+"/creds/charts/private:0.1.0", src, ch.Archive())

	w.setAuth(login{up, "reader", upPull, ""})
	if code := mirrorTo("anonymous", "--src-no-creds"); code&16 == 0 {
		t.Errorf("--src-no-creds with an account in the auth file: exit %d, want the helm bit 16 (the chart asked for anonymously)", code)
	}
	if _, err := w.dst.ManifestDigest("anonymous/charts/private", "0.1.0"); err == nil {
		t.Errorf("--src-no-creds: the chart was pulled with the auth file's account")
	}

	for _, secret := range []string{refresh, tok.Token, upPull} {
		if strings.Contains(output.String(), secret) {
			t.Errorf("the output shows a secret (%.8s…)", secret)
		}
	}
}

// TestHelmChartsRefusedByMirror: a mirror that refuses OCI artifacts gets
// the images; the charts are reported once, with its answer, and stay in
// working-dir/helm.
func TestHelmChartsRefusedByMirror(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	up := w.up.Host()
	w.expectApp("web", "v1", 320)
	web := helmtest.Pod("web", "1.0.0", up+"/apps/web:v1")
	repo := helmtest.Serve(t, web)
	w.dst.SetWrap(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/manifests/") {
				body, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(body))
				if bytes.Contains(body, []byte(registry.ConfigMediaType)) {
					rw.Header().Set("Content-Type", "application/json")
					rw.WriteHeader(http.StatusBadRequest)
					_, _ = rw.Write([]byte(`{"errors":[{"code":"MANIFEST_INVALID","message":"manifest invalid","detail":"config media type not allowed"}]}`))
					return
				}
			}
			next.ServeHTTP(rw, r)
		})
	})
	isc := w.writeISC("helm-refused.yaml", fmt.Sprintf(`  helm:
    repositories:
    - name: http
      url: %s
      charts:
      - name: web
`, repo.URL()))
	ws := filepath.Join(w.dir, "ws")
	code, out, _ := w.gapmirror("mirror", "-c", isc, "--workspace", "file://"+ws, "docker://"+w.dst.Host()+"/m")
	if code != 0 {
		t.Errorf("a mirror refusing charts: exit %d, want 0 (the images are mirrored)", code)
	}
	w.assertMirrored(w.dst, "m")
	if n := strings.Count(out, "refused the helm charts as OCI artifacts"); n != 1 || !strings.Contains(out, "manifest invalid") {
		t.Errorf("the refusal is reported %d times (want once, with the registry's answer):\n%s", n, out)
	}
	assertCharts(t, filepath.Join(ws, "working-dir"), map[string][]byte{"http/web-1.0.0.tgz": web.Archive()})
	if _, err := os.Stat(filepath.Join(ws, "working-dir", "cluster-resources", "helm-charts.yaml")); err == nil {
		t.Errorf("helm-charts.yaml lists charts the mirror refused")
	}
}

// TestAdditionalImageTransports mirrors additional images written as
// oc-mirror writes them: docker:// references (also in blockedImages and
// with targetRepo/targetTag) and oci:// layouts on disk, registry to
// registry and through an archive, each verified by digest.
func TestAdditionalImageTransports(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	up := w.up.Host()
	ubi := w.pushApp("ubi", "9", 330)
	tool, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(332, 8<<10)}})
	must(t, err)
	toolDir := filepath.Join(w.dir, "layouts", "Tool")
	must(t, imagebuilder.WriteLayout(toolDir, "v1", tool))
	multi, err := imagebuilder.BuildIndex(imagebuilder.IndexSpec{Images: []imagebuilder.ImageSpec{
		{Platform: imagebuilder.Platform{OS: "linux", Architecture: "amd64"}, Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(333, 4<<10)}},
		{Platform: imagebuilder.Platform{OS: "linux", Architecture: "arm64"}, Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(334, 4<<10)}},
	}})
	must(t, err)
	multiDir := filepath.Join(w.dir, "layouts", "multi")
	must(t, imagebuilder.WriteIndexLayout(multiDir, "", multi))
	multiRepo := strings.TrimPrefix(filepath.ToSlash(strings.ToLower(multiDir)), "/")
	w.images = append(w.images,
		example{Ref: "docker://" + up + "/apps/ubi:9", Repo: "apps/ubi", Tag: "9", Digest: ubi},
		example{Ref: "docker://" + up + "/apps/ubi:9 as base/ubi:stable", Repo: "base/ubi", Tag: "stable", Digest: ubi},
		example{Ref: "oci://" + toolDir, Repo: "tools/tool", Tag: "v1", Digest: tool.Digest},
		example{Ref: "oci://" + multiDir, Repo: multiRepo, Tag: "latest", Digest: multi.Digest},
	)
	isc := w.writeISC("transports.yaml", fmt.Sprintf(`  additionalImages:
  - name: docker://%[1]s/apps/ubi:9
  - name: docker://%[1]s/apps/ubi:9
    targetRepo: base/ubi
    targetTag: stable
  - name: oci://%[2]s
    targetRepo: tools/tool
    targetTag: v1
  - name: oci://%[3]s
  blockedImages:
  - name: docker://%[1]s/apps/unwanted
`, up, toolDir, multiDir))

	code, _, _ := w.gapmirror("mirror", "-c", isc, "--workspace", "file://"+filepath.Join(w.dir, "ws"), "docker://"+w.dst.Host()+"/m2m")
	if code != 0 {
		t.Fatalf("mirror-to-mirror exit %d", code)
	}
	w.assertMirrored(w.dst, "m2m")

	// delete names them the same ways; --generate plans from the records.
	disc := w.disc("transports-delete.yaml", fmt.Sprintf("  additionalImages:\n  - name: docker://%s/apps/ubi:9\n    targetRepo: base/ubi\n    targetTag: stable\n  - name: oci://%s\n", up, multiDir))
	code, _, _ = w.gapmirror("delete", "-c", disc, "--generate", "--workspace", "file://"+filepath.Join(w.dir, "ws"), "docker://"+w.dst.Host()+"/m2m")
	if code != 0 {
		t.Fatalf("delete --generate exit %d", code)
	}
	plan := readFile(t, filepath.Join(w.dir, "ws", "working-dir", "delete", "delete-images.yaml"))
	for _, want := range []string{"docker://" + w.dst.Host() + "/m2m/base/ubi:stable", "docker://" + w.dst.Host() + "/m2m/" + multiRepo + ":latest"} {
		if !strings.Contains(plan, want) {
			t.Errorf("the delete plan lacks %s:\n%s", want, plan)
		}
	}
	if strings.Contains(plan, "/m2m/apps/ubi:9") || strings.Contains(plan, "tools/tool") {
		t.Errorf("the delete plan names images the configuration does not:\n%s", plan)
	}

	archiveDir := filepath.Join(w.dir, "archive")
	if code, _, _ := w.gapmirror("mirror", "-c", isc, "file://"+archiveDir); code != 0 {
		t.Fatalf("mirror-to-disk exit %d", code)
	}
	// The layouts are read on the connected side only: the archive carries them.
	must(t, os.RemoveAll(filepath.Join(w.dir, "layouts")))
	if code, _, _ := w.gapmirror("mirror", "--from", "file://"+archiveDir, "docker://"+w.dst.Host()+"/d2m"); code != 0 {
		t.Fatalf("disk-to-mirror exit %d", code)
	}
	w.assertMirrored(w.dst, "d2m")
	for _, f := range []string{"idms-gapmirror.yaml", "itms-gapmirror.yaml"} {
		if data, err := os.ReadFile(filepath.Join(archiveDir, "working-dir", "cluster-resources", f)); err == nil && strings.Contains(string(data), "layouts") {
			t.Errorf("%s maps a layout on disk:\n%s", f, data)
		}
	}
}

// TestAdditionalImageLayoutBadInput: a missing, malformed or incomplete
// layout stops the run with the file, line and field path of the entry,
// the directory, and what to do: what a layout is for a path that holds
// none, which blob is missing and how to write the layout again for one
// that is incomplete (not the advice for an incremental archive).
func TestAdditionalImageLayoutBadInput(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	broken := filepath.Join(w.dir, "broken")
	must(t, os.MkdirAll(broken, 0o755))
	must(t, os.WriteFile(filepath.Join(broken, "index.json"), []byte("{not json"), 0o644))
	empty := filepath.Join(w.dir, "empty")
	must(t, os.MkdirAll(empty, 0o755))
	good, partial := filepath.Join(w.dir, "good"), filepath.Join(w.dir, "partial")
	img, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(370, 4<<10)}})
	must(t, err)
	must(t, imagebuilder.WriteLayout(good, "v1", img))
	img, err = imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(371, 4<<10)}})
	must(t, err)
	must(t, imagebuilder.WriteLayout(partial, "v1", img))
	layer := img.Layers[0].Digest
	must(t, os.Remove(filepath.Join(partial, "blobs", "sha256", layer.Encoded())))
	skopeo := "skopeo copy docker://IMAGE oci:"
	for name, c := range map[string]struct {
		layout string
		want   []string
	}{
		"missing":   {filepath.Join(w.dir, "nowhere"), []string{"no OCI image layout at " + filepath.Join(w.dir, "nowhere"), "point it at a directory holding oci-layout, index.json and blobs/", skopeo + "DIR:TAG"}},
		"a file":    {filepath.Join(broken, "index.json"), []string{"is a file, not an OCI image layout directory", skopeo + "DIR:TAG"}},
		"not json":  {broken, []string{broken + "/index.json is not an OCI index"}},
		"no index":  {empty, []string{empty + " is not an OCI image layout", skopeo + "DIR:TAG"}},
		"no digest": {"", []string{`"oci://" names no directory`}},
		"no blob": {partial, []string{"the OCI layout " + partial + " is incomplete: it lacks blob " + layer.String(),
			filepath.Join(partial, "blobs", "sha256", layer.Encoded()), skopeo + partial + ":TAG"}},
	} {
		// The bad layout is the second entry, after a good one: line 7.
		isc := w.writeISC("bad-"+strings.ReplaceAll(name, " ", "-")+".yaml", fmt.Sprintf("  additionalImages:\n  - name: oci://%s\n    targetRepo: tools/good\n  - name: oci://%s\n", good, c.layout))
		code, _, stderr := w.gapmirror("mirror", "-c", isc, "--workspace", "file://"+filepath.Join(w.dir, "ws"), "docker://"+w.dst.Host()+"/bad")
		if code == 0 || !strings.Contains(stderr, "error: "+isc+":7: mirror.additionalImages[1].name: ") || strings.Contains(stderr, "goroutine") || strings.Contains(stderr, "earlier archive") {
			t.Errorf("%s: exit %d, want the error located at %s:7: mirror.additionalImages[1].name, stderr:\n%s", name, code, isc, stderr)
		}
		for _, want := range c.want {
			if !strings.Contains(stderr, want) {
				t.Errorf("%s: the error does not say %q:\n%s", name, want, stderr)
			}
		}
	}
}

// TestHelmOCIChartsInsecureByRegistriesConf: with no --src-tls-verify flag,
// registries.conf decides for a chart registry as for images. A plain-HTTP
// registry without an entry fails with that cause and its fix; marked
// insecure (by host, or by a path prefix of the chart's repository) it is
// reached; an explicit --src-tls-verify=true wins over the entry, as in
// skopeo.
func TestHelmOCIChartsInsecureByRegistriesConf(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.srcTLSByConfig = true
	up := w.up.Host()
	ch := helmtest.New("plain", "0.1.0", "", map[string]string{"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\ndata: {}\n"})
	src := pushChart(t, chartClient(t, w.up, "", ""), up, "charts", ch)
	isc := w.writeISC("helm-plain.yaml", fmt.Sprintf("  helm:\n    repositories:\n    - name: plain\n      url: oci://%s/charts\n      charts:\n      - name: plain\n        version: 0.1.0\n", up))
	mirrorTo := func(prefix string, extra ...string) (int, string) {
		t.Helper()
		args := append([]string{"mirror", "-c", isc, "--workspace", "file://" + filepath.Join(w.dir, "ws-"+prefix)}, extra...)
		code, out, _ := w.gapmirror(append(args, "docker://"+w.dst.Host()+"/"+prefix)...)
		return code, out
	}

	code, out := mirrorTo("noentry")
	if code&16 == 0 || !strings.Contains(out, "server gave HTTP response to HTTPS client") || !strings.Contains(out, "insecure = true") {
		t.Errorf("a plain-HTTP chart registry registries.conf does not mark insecure: exit %d (want the helm bit 16), the cause and its fix in the summary:\n%s", code, out)
	}
	if _, err := w.dst.ManifestDigest("noentry/charts/plain", "0.1.0"); err == nil {
		t.Errorf("the chart reached the mirror over plain HTTP without the insecure entry")
	}

	// A new file: containers/image caches registries.conf by path for the process.
	w.regsConf = filepath.Join(w.dir, "registries-insecure.conf")
	must(t, os.WriteFile(w.regsConf, []byte(fmt.Sprintf("unqualified-search-registries = []\n[[registry]]\nlocation = %q\ninsecure = true\n", up)), 0o644))
	if code, _ := mirrorTo("plain"); code != 0 {
		t.Fatalf("mirror-to-mirror exit %d", code)
	}
	assertChartServed(t, chartClient(t, w.dst, "", ""), w.dst.Host()+"/plain/charts/plain:0.1.0", src, ch.Archive())

	code, out = mirrorTo("forced", "--src-tls-verify=true")
	if code&16 == 0 || !strings.Contains(out, "server gave HTTP response to HTTPS client") {
		t.Errorf("--src-tls-verify=true must win over registries.conf insecure: exit %d, summary:\n%s", code, out)
	}

	// An entry scoped to a path (prefix HOST/charts) covers the charts under it.
	w.regsConf = filepath.Join(w.dir, "registries-prefix.conf")
	must(t, os.WriteFile(w.regsConf, []byte(fmt.Sprintf("unqualified-search-registries = []\n[[registry]]\nlocation = %q\ninsecure = true\n", up+"/charts")), 0o644))
	if code, _ := mirrorTo("prefix"); code != 0 {
		t.Fatalf("mirror-to-mirror with a path-scoped insecure entry: exit %d", code)
	}
	assertChartServed(t, chartClient(t, w.dst, "", ""), w.dst.Host()+"/prefix/charts/plain:0.1.0", src, ch.Archive())
}

// TestHelmOCIChartsCertsD: with no TLS flag, the CA of a chart registry is
// found where containers/image looks for it without --src-cert-dir, the
// per-user certs.d ($HOME/.config/containers/certs.d/HOST:PORT/ca.crt):
// the chart and the image it deploys are mirrored; without the CA there the
// chart fails with the TLS cause and where to put the CA.
func TestHelmOCIChartsCertsD(t *testing.T) {
	w := newWorld(t, registrytest.Options{TLS: true})
	w.srcTLSByConfig = true
	home := filepath.Join(w.dir, "home")
	t.Setenv("HOME", home)
	up := w.up.Host()
	img, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(350, 8<<10)}})
	must(t, err)
	must(t, imagebuilder.Push(context.Background(), w.upTarget(), "apps/tls", "v1", img))
	ch := helmtest.Pod("tls", "0.1.0", up+"/apps/tls:v1")
	src := pushChart(t, chartClient(t, w.up, "", ""), up, "charts", ch)
	isc := w.writeISC("helm-certsd.yaml", fmt.Sprintf("  helm:\n    repositories:\n    - name: tls\n      url: oci://%s/charts\n      charts:\n      - name: tls\n        version: 0.1.0\n", up))

	code, out, _ := w.gapmirror("mirror", "-c", isc, "--workspace", "file://"+filepath.Join(w.dir, "ws-noca"), "docker://"+w.dst.Host()+"/noca")
	if code&16 == 0 || !strings.Contains(out, "x509: certificate signed by unknown authority") || !strings.Contains(out, "certs.d/"+up) {
		t.Errorf("a chart registry whose CA is nowhere: exit %d (want the helm bit 16), the TLS cause and where the CA goes in the summary:\n%s", code, out)
	}

	certsD := filepath.Join(home, ".config", "containers", "certs.d", up)
	must(t, os.MkdirAll(certsD, 0o755))
	must(t, os.WriteFile(filepath.Join(certsD, "ca.crt"), w.up.CAPEM(), 0o644))
	w.images = append(w.images, example{Ref: up + "/apps/tls:v1", Repo: "apps/tls", Tag: "v1", Digest: img.Digest})
	if code, _, _ := w.gapmirror("mirror", "-c", isc, "--workspace", "file://"+filepath.Join(w.dir, "ws"), "docker://"+w.dst.Host()+"/certsd"); code != 0 {
		t.Fatalf("mirror-to-mirror with the CA in certs.d: exit %d", code)
	}
	w.assertMirrored(w.dst, "certsd")
	assertChartServed(t, chartClient(t, w.dst, "", ""), w.dst.Host()+"/certsd/charts/tls:0.1.0", src, ch.Archive())
}

// assertChartDeploys does on the air-gapped side what `helm template
// oci://<mirror>/…` followed by the cluster's image pulls does: it pulls the
// chart from the mirror with helm's registry client, renders it with helm's
// loader and template engine (default values), and follows every image the
// rendered objects deploy through the IDMS/ITMS in resources to the mirror,
// where it must be, with the digest its source has.
func (w *world) assertChartDeploys(c *registry.Client, ref, resources string) {
	t := w.t
	t.Helper()
	res, err := c.Pull(ref)
	if err != nil {
		t.Errorf("helm pull oci://%s: %v", ref, err)
		return
	}
	ch, err := loader.LoadArchive(bytes.NewReader(res.Chart.Data))
	must(t, err)
	vals, err := chartutil.ToRenderValues(ch, map[string]any{}, chartutil.ReleaseOptions{Name: ch.Name(), Namespace: "default", Revision: 1, IsInstall: true}, chartutil.DefaultCapabilities.Copy())
	must(t, err)
	files, err := engine.Render(ch, vals)
	if err != nil {
		t.Errorf("helm template oci://%s: %v", ref, err)
		return
	}
	var images []string
	for name, body := range files {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		for _, doc := range strings.Split(body, "\n---") {
			var obj any
			must(t, yaml.Unmarshal([]byte(doc), &obj))
			images = append(images, containerImages(obj)...)
		}
	}
	if len(images) == 0 {
		t.Errorf("oci://%s renders no container image: the test checks nothing", ref)
	}
	entries := mirrorEntries(t, resources)
	for _, img := range images {
		named, err := reference.ParseNormalizedNamed(img)
		must(t, err)
		named = reference.TagNameOnly(named)
		kind, at := "itms", ""
		if c, ok := named.(reference.Canonical); ok {
			kind, at = "idms", c.Digest().String()
		} else {
			at = named.(reference.Tagged).Tag()
		}
		mirrored := ""
		for _, e := range entries[kind] {
			if rest, ok := strings.CutPrefix(named.Name(), e.Source); ok && (rest == "" || rest[0] == '/') && len(e.Mirrors) > 0 {
				mirrored = e.Mirrors[0] + rest
				break
			}
		}
		if mirrored == "" {
			t.Errorf("oci://%s deploys %s, which no %s entry sends to the mirror", ref, img, kind)
			continue
		}
		host, repo, _ := strings.Cut(mirrored, "/")
		want, err := w.up.ManifestDigest(reference.Path(named), at)
		must(t, err)
		if got, err := w.dst.ManifestDigest(repo, at); host != w.dst.Host() || err != nil || got != want {
			t.Errorf("oci://%s deploys %s: the cluster pulls %s:%s, which the mirror has at %s (%v), want %s", ref, img, mirrored, at, got, err, want)
		}
	}
}

// containerImages are the images of every containers and initContainers
// list in a rendered object.
func containerImages(obj any) []string {
	var out []string
	switch v := obj.(type) {
	case map[string]any:
		for k, sub := range v {
			if list, ok := sub.([]any); ok && (k == "containers" || k == "initContainers") {
				for _, c := range list {
					if m, ok := c.(map[string]any); ok {
						if s, ok := m["image"].(string); ok {
							out = append(out, s)
						}
					}
				}
				continue
			}
			out = append(out, containerImages(sub)...)
		}
	case []any:
		for _, sub := range v {
			out = append(out, containerImages(sub)...)
		}
	}
	return out
}

// mirrorEntries reads the IDMS and ITMS entries of a cluster-resources
// directory, by "idms" and "itms".
func mirrorEntries(t *testing.T, dir string) map[string][]mirrorEntry {
	t.Helper()
	out := map[string][]mirrorEntry{}
	for _, kind := range []string{"idms", "itms"} {
		data, err := os.ReadFile(filepath.Join(dir, kind+"-gapmirror.yaml"))
		if os.IsNotExist(err) {
			continue
		}
		must(t, err)
		for _, doc := range strings.Split(string(data), "\n---\n") {
			var ms mirrorSet
			must(t, yaml.Unmarshal([]byte(doc), &ms))
			out[kind] = append(out[kind], append(ms.Spec.Digest, ms.Spec.Tag...)...)
		}
	}
	return out
}

// TestHelmChartRetryFailed: charts the mirror fails to take (a server
// error, not a refusal of the artifact) fail the run with the helm bit;
// --retry-failed pushes them from the run record's plan without asking the
// chart sources again, and then the mirror serves them and helm-charts.yaml
// lists them as a complete run's does. With --max-nested-paths a chart's
// repository is shortened like an image's, and still served and listed.
func TestHelmChartRetryFailed(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	up := w.up.Host()
	w.expectApp("web", "v1", 340)
	w.expectApp("jobs", "v1", 341)
	web := helmtest.Pod("web", "1.0.0", up+"/apps/web:v1")
	jobs := helmtest.Pod("jobs", "0.2.0", up+"/apps/jobs:v1")
	webDigest := pushChart(t, chartClient(t, w.up, "", ""), up, "charts/stable", web)
	repo := helmtest.Serve(t, jobs)
	isc := w.writeISC("helm-retry.yaml", fmt.Sprintf(`  helm:
    repositories:
    - name: stable
      url: oci://%s/charts/stable
      charts:
      - name: web
        version: 1.0.0
    - name: http
      url: %s
      charts:
      - name: jobs
        version: 0.2.0
`, up, repo.URL()))
	w.dst.SetWrap(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/manifests/") {
				body, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(body))
				if bytes.Contains(body, []byte(registry.ConfigMediaType)) {
					http.Error(rw, "storage backend unavailable", http.StatusServiceUnavailable)
					return
				}
			}
			next.ServeHTTP(rw, r)
		})
	})
	ws := filepath.Join(w.dir, "ws")
	dst := "docker://" + w.dst.Host() + "/m"
	code, out, _ := w.gapmirror("mirror", "-c", isc, "--retry-times", "1", "--retry-delay", "10ms", "--workspace", "file://"+ws, dst)
	if code&16 == 0 || strings.Contains(out, "refused the helm charts") {
		t.Fatalf("charts failing at the mirror: exit %d (want the helm bit 16, no refusal):\n%s", code, out)
	}
	failed := retryHint(t, out)
	if _, err := os.Stat(filepath.Join(ws, "working-dir", "cluster-resources", "helm-charts.yaml")); err == nil {
		t.Errorf("helm-charts.yaml lists charts the mirror does not have")
	}

	w.dst.SetWrap(nil)
	var asked atomic.Int32
	w.up.SetWrap(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if strings.Contains(r.URL.Path, "/charts/") {
				asked.Add(1)
			}
			next.ServeHTTP(rw, r)
		})
	})
	index := repo.Count("/index.yaml")
	code, out, _ = w.gapmirror("mirror", "--retry-failed", failed, "--workspace", "file://"+ws, dst)
	if code != 0 || !strings.Contains(out, "0 copied, 2 already at the destination, 2 built by gapmirror, 0 failed") {
		t.Fatalf("retry: exit %d (want 0, the 2 charts copied):\n%s", code, out)
	}
	if n := asked.Load(); n != 0 || repo.Count("/index.yaml") != index {
		t.Errorf("the retry asked the chart sources again (%d registry requests, %d index reads): it must start from the record", n, repo.Count("/index.yaml")-index)
	}
	w.up.SetWrap(nil)
	c := chartClient(t, w.dst, "", "")
	resources := filepath.Join(ws, "working-dir", "cluster-resources")
	assertChartServed(t, c, w.dst.Host()+"/m/charts/stable/web:1.0.0", webDigest, web.Archive())
	assertChartServed(t, c, w.dst.Host()+"/m/charts/jobs:0.2.0", "", jobs.Archive())
	w.assertChartDeploys(c, w.dst.Host()+"/m/charts/jobs:0.2.0", resources)

	whole := filepath.Join(w.dir, "whole")
	if code, _, _ := w.gapmirror("mirror", "-c", isc, "--workspace", "file://"+whole, dst); code != 0 {
		t.Fatalf("complete run: exit %d", code)
	}
	for _, f := range []string{chartsFile, "itms-gapmirror.yaml"} {
		if got, want := resourceFile(t, filepath.Join(resources, f)), resourceFile(t, filepath.Join(whole, "working-dir", "cluster-resources", f)); got != want {
			t.Errorf("%s after the retry differs from a complete run's:\nretry:\n%s\ncomplete:\n%s", f, got, want)
		}
	}

	// --max-nested-paths shortens a chart's repository like an image's;
	// helm-charts.yaml names it as the mirror serves it.
	flat := filepath.Join(w.dir, "flat")
	if code, _, _ := w.gapmirror("mirror", "-c", isc, "--max-nested-paths", "2", "--workspace", "file://"+flat, "docker://"+w.dst.Host()+"/flat"); code != 0 {
		t.Fatalf("--max-nested-paths 2: exit %d", code)
	}
	ref := w.dst.Host() + "/flat/charts-stable-web:1.0.0"
	if list := readFile(t, filepath.Join(flat, "working-dir", "cluster-resources", chartsFile)); !strings.Contains(list, `"reference":"oci://`+ref+`"`) {
		t.Errorf("helm-charts.yaml does not name the shortened %s:\n%s", ref, list)
	}
	assertChartServed(t, c, ref, webDigest, web.Archive())
	w.assertChartDeploys(c, ref, filepath.Join(flat, "working-dir", "cluster-resources"))
}

const chartsFile = "helm-charts.yaml"
