package sections

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/distribution/reference"
	"go.podman.io/image/v5/pkg/tlsclientconfig"

	"github.com/gapmirror/gapmirror/companion"
	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/imageset/helm"
	"github.com/gapmirror/gapmirror/ocistore"
	"github.com/gapmirror/gapmirror/workspace"
)

// helmCharts resolves mirror.helm: it fetches or loads each chart, renders
// it with its default values, adds the images it deploys to the set and
// keeps the chart for the archive and working-dir/helm.
type helmCharts struct {
	t      *Env
	client *http.Client
	plan   *workspace.Plan
	// ws holds the charts earlier runs kept (read only).
	ws string
	// store receives each chart as an OCI artifact (nil: charts are not
	// served from the mirror).
	store *ocistore.Store
}

func (h *helmCharts) Sections() []string { return []string{"mirror.helm"} }

// helmChart is one chart selected by the configuration.
type helmChart struct {
	path  string // configuration path, e.g. mirror.helm.repositories[0].charts[1]
	label string // "helm chart podinfo 6.5.0 from repository demo"
	repo  string // repository name, or "local"
	url   string // redacted repository URL, or the local path
	data  []byte // the .tgz
	paths []helm.ImagePath
	// index is the digest the repository index gives, when it gives one.
	index string
	name  string
	ver   string
	// oci is the chart as its oci:// repository holds it; nil for HTTP and local charts.
	oci *ociArtifact
	// dest is the repository path under the mirror root (empty: charts/<name>).
	dest string
	// platforms narrows the chart's multi-platform images to these
	// os/architectures (nil: every platform), as on additional images.
	platforms []string
}

// ChartRecord is what helm/charts.json says of one carried chart, so the
// air-gapped side can check each .tgz and see what it was mirrored for.
type ChartRecord struct {
	Source     string   `json:"source"`
	Repository string   `json:"repository"`
	URL        string   `json:"url"`
	Name       string   `json:"name"`
	Version    string   `json:"version"`
	Digest     string   `json:"digest"`
	File       string   `json:"file"`
	Images     []string `json:"images"`
	// Artifact is the digest of the chart's OCI manifest and Served the
	// repository:tag under the mirror root that serves it (empty when the
	// chart is not pushed to the mirror).
	Artifact string `json:"artifact,omitempty"`
	Served   string `json:"served,omitempty"`
}

// wantedHelmImage is one image the charts name and every place that names it.
type wantedHelmImage struct {
	named     reference.Named
	why       []string
	platforms []string // merged over the charts naming it (nil: every platform)
}

// Contribute adds the images of every selected chart. A chart that cannot be
// fetched, loaded or rendered is a failure of that chart (exit bit 16); the
// other charts go on.
func (h *helmCharts) Contribute(ctx context.Context, cfg *imageset.ImageSetConfiguration, r *imageset.Resolving) error {
	hc := cfg.Mirror.Helm
	if len(hc.Repositories) == 0 && len(hc.Local) == 0 {
		return nil
	}
	if h.client == nil {
		client, err := h.t.helmHTTPClient()
		if err != nil {
			return err
		}
		h.client = client
	}
	var charts []*helmChart
	for i, repo := range hc.Repositories {
		list, err := h.repository(ctx, fmt.Sprintf("mirror.helm.repositories[%d]", i), repo, r)
		if err != nil {
			return err
		}
		charts = append(charts, list...)
	}
	for i, lc := range hc.Local {
		c, err := h.local(ctx, fmt.Sprintf("mirror.helm.local[%d]", i), lc, r)
		if err != nil {
			return err
		}
		if c != nil {
			charts = append(charts, c)
		}
	}

	wanted := map[string]*wantedHelmImage{}
	var records []ChartRecord
	kept := map[string]string{} // file → digest
	for _, c := range charts {
		images, ok := h.images(ctx, c, wanted, r)
		if !ok {
			continue
		}
		d := helm.Digest(c.data)
		if have, dup := kept[c.file()]; dup {
			if have != d {
				r.Fail(chartFailure(c, fmt.Errorf("another entry gives a different chart %s %s (%s, this one %s): give them different versions", c.name, c.ver, have, d)))
			}
			continue
		}
		kept[c.file()] = d
		rec, err := h.keep(c, images)
		if err != nil {
			return err
		}
		if rec.Artifact, rec.Served, err = h.addArtifact(c, r); err != nil {
			return err
		}
		records = append(records, rec)
	}
	if err := h.keepRecords(records); err != nil {
		return err
	}
	if h.store != nil && len(records) > 0 {
		if err := h.store.SaveIndex(); err != nil {
			return err
		}
	}
	h.pin(ctx, wanted, r)
	return nil
}

func chartFailure(c *helmChart, err error) imageset.Unresolved {
	return imageset.Unresolved{Origin: c.label, Kind: imageset.KindHelm, Why: c.path, Err: err, NotImage: true}
}

// repository selects, downloads and checks the charts of one repository.
func (h *helmCharts) repository(ctx context.Context, rp string, repo imageset.HelmRepository, r *imageset.Resolving) ([]*helmChart, error) {
	hr := helm.Repository{URL: repo.URL, Client: h.client}
	whole := &helmChart{path: rp, label: fmt.Sprintf("helm repository %s (%s)", repo.Name, hr.Redacted())}
	paths := make([][]helm.ImagePath, len(repo.Charts))
	for j, c := range repo.Charts {
		for k, e := range c.ImagePaths {
			p, err := helm.CompileImagePath(e)
			if err != nil {
				return nil, fmt.Errorf("%s.charts[%d].imagePaths[%d]: %w", rp, j, k, err)
			}
			paths[j] = append(paths[j], p)
		}
	}
	if strings.HasPrefix(repo.URL, "oci://") {
		return h.ociRepository(rp, repo, paths, r), nil
	}
	ix, indexData, err := hr.Index(ctx)
	if err != nil {
		r.Fail(chartFailure(whole, fmt.Errorf("%w: check %s.url and that this host reaches it (proxy settings come from HTTPS_PROXY/NO_PROXY)", err, rp)))
		return nil, nil
	}
	h.plan.AddFile(path.Join(workspace.HelmDir, "indexes", safeName(repo.Name), "index.yaml"), indexData)

	type pick struct {
		path      string
		cv        helm.ChartVersion
		paths     []helm.ImagePath
		platforms []string
	}
	var picks []pick
	if len(repo.Charts) == 0 {
		for _, cv := range ix.All() {
			picks = append(picks, pick{path: rp, cv: cv})
		}
	}
	for j, c := range repo.Charts {
		chp := fmt.Sprintf("%s.charts[%d]", rp, j)
		cv, err := ix.Version(c.Name, c.Version)
		if err != nil {
			ver := c.Version
			if ver == "" {
				ver = "(latest)"
			}
			failed := &helmChart{path: chp, label: fmt.Sprintf("helm chart %s %s from repository %s", c.Name, ver, repo.Name)}
			r.Fail(chartFailure(failed, fmt.Errorf("%w: fix %s", err, chp)))
			continue
		}
		// A chart listed twice is fetched once, with the image paths of both entries.
		if k := slices.IndexFunc(picks, func(p pick) bool { return p.cv.Name == cv.Name && p.cv.Version == cv.Version }); k >= 0 {
			picks[k].paths = append(picks[k].paths, paths[j]...)
			picks[k].platforms = imageset.MergePlatforms(picks[k].platforms, imageset.PlatformNames(c.Platforms))
			continue
		}
		picks = append(picks, pick{path: chp, cv: cv, paths: paths[j], platforms: imageset.PlatformNames(c.Platforms)})
	}
	var out []*helmChart
	for _, p := range picks {
		c := &helmChart{path: p.path, label: fmt.Sprintf("helm chart %s %s from repository %s", p.cv.Name, p.cv.Version, repo.Name),
			repo: repo.Name, url: hr.Redacted(), paths: p.paths, index: p.cv.Digest, name: p.cv.Name, ver: p.cv.Version, platforms: p.platforms}
		if c.data, err = h.download(ctx, hr, c, p.cv); err != nil {
			r.Fail(chartFailure(c, err))
			continue
		}
		out = append(out, c)
	}
	return out, nil
}

// download fetches a chart, or reuses the copy an earlier run kept in the
// workspace when the index vouches for it by digest.
func (h *helmCharts) download(ctx context.Context, hr helm.Repository, c *helmChart, cv helm.ChartVersion) ([]byte, error) {
	if c.index != "" && h.ws != "" {
		if data, err := os.ReadFile(filepath.Join(h.ws, filepath.FromSlash(c.file()))); err == nil && helm.CheckDigest(data, c.index) == nil {
			return data, nil
		}
	}
	return hr.Download(ctx, cv)
}

// local loads a chart directory or .tgz from disk.
func (h *helmCharts) local(ctx context.Context, lp string, lc imageset.LocalHelmChart, r *imageset.Resolving) (*helmChart, error) {
	c := &helmChart{path: lp, label: fmt.Sprintf("helm chart %s (local, %s)", lc.Name, lc.Path), repo: "local", url: lc.Path, platforms: imageset.PlatformNames(lc.Platforms)}
	for k, e := range lc.ImagePaths {
		p, err := helm.CompileImagePath(e)
		if err != nil {
			return nil, fmt.Errorf("%s.imagePaths[%d]: %w", lp, k, err)
		}
		c.paths = append(c.paths, p)
	}
	fail := func(err error) (*helmChart, error) {
		if !errors.As(err, new(*companion.UnavailableError)) {
			err = fmt.Errorf("%w: fix %s.path", err, lp)
		}
		r.Fail(chartFailure(c, err))
		return nil, nil
	}
	fi, err := os.Stat(lc.Path)
	if err != nil {
		return fail(err)
	}
	ch, err := helm.Load(lc.Path)
	if err != nil {
		return fail(err)
	}
	c.name, c.ver = ch.Name(), ch.Metadata.Version
	if fi.IsDir() {
		if c.data, err = helm.Package(ctx, lc.Path); err != nil {
			return fail(err)
		}
	} else if c.data, err = os.ReadFile(lc.Path); err != nil {
		return fail(err)
	}
	return c, nil
}

// images renders a chart and adds what it names to wanted; false when the
// chart could not be loaded or rendered (reported in r).
func (h *helmCharts) images(ctx context.Context, c *helmChart, wanted map[string]*wantedHelmImage, r *imageset.Resolving) ([]string, bool) {
	ch, err := helm.LoadArchive(c.data)
	if err != nil {
		r.Fail(chartFailure(c, err))
		return nil, false
	}
	if c.name == "" {
		c.name, c.ver = ch.Name(), ch.Metadata.Version
	}
	found, err := helm.Images(ctx, c.data, c.paths)
	if err != nil {
		if !errors.As(err, new(*companion.UnavailableError)) {
			err = fmt.Errorf("%w; gapmirror renders charts with their default values only: mirror such a chart's images as mirror.additionalImages", err)
		}
		r.Fail(chartFailure(c, err))
		return nil, false
	}
	var images []string
	for _, f := range found {
		why := fmt.Sprintf("%s: helm chart %s %s: %s (%s)", c.path, c.name, c.ver, f.Object, f.Template)
		named, err := reference.ParseNormalizedNamed(f.Image)
		if err != nil {
			// The chart rendered: it is kept, and this one image fails.
			r.Fail(chartFailure(c, fmt.Errorf("%s in %s renders image %q, which is not an image reference (%v): the chart needs values gapmirror does not set; mirror its images as mirror.additionalImages", f.Object, f.Template, f.Image, err)))
			continue
		}
		named = reference.TagNameOnly(named)
		origin := named.String()
		images = append(images, origin)
		w := wanted[origin]
		if w == nil {
			w = &wantedHelmImage{named: named, platforms: c.platforms}
			wanted[origin] = w
		} else {
			w.platforms = imageset.MergePlatforms(w.platforms, c.platforms)
		}
		if !slices.Contains(w.why, why) {
			w.why = append(w.why, why)
		}
	}
	sort.Strings(images)
	return slices.Compact(images), true
}

// pin resolves the wanted images to digests and adds them to the set.
func (h *helmCharts) pin(ctx context.Context, wanted map[string]*wantedHelmImage, r *imageset.Resolving) {
	var list []imageset.Wanted
	for _, origin := range slices.Sorted(maps.Keys(wanted)) {
		w := wanted[origin]
		if b := r.Block(origin, reference.Path(w.named)); b != "" {
			r.Warn("%s: %s left out by %s", w.why[0], origin, b)
			continue
		}
		list = append(list, imageset.Wanted{Named: w.named, Kind: imageset.KindHelm, Why: w.why, ByTag: w.why[0] + ":", Platforms: w.platforms})
	}
	_ = r.AddPinned(ctx, list) // none is Configured: no error
}

// file is where the chart lives under working-dir and in the archive.
func (c *helmChart) file() string {
	return path.Join(workspace.HelmDir, "charts", safeName(c.repo), safeName(c.name+"-"+c.ver)+".tgz")
}

// keep puts the chart into the plan, for the archive and working-dir/helm.
func (h *helmCharts) keep(c *helmChart, images []string) (ChartRecord, error) {
	rec := ChartRecord{Source: c.path, Repository: c.repo, URL: c.url, Name: c.name, Version: c.ver, Digest: helm.Digest(c.data), File: c.file(), Images: images}
	h.plan.AddFile(rec.File, c.data)
	return rec, nil
}

func (h *helmCharts) keepRecords(records []ChartRecord) error {
	if len(records) == 0 {
		return nil
	}
	data, err := json.MarshalIndent(records, "", "  ")
	if err != nil {
		return err
	}
	h.plan.AddFile(workspace.HelmChartsFile, data)
	return nil
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._+-]`)

// safeName makes a repository, chart or version name a single safe path
// element: an index could name a chart "../x".
func safeName(s string) string {
	s = unsafeChars.ReplaceAllString(s, "_")
	if s == "" || strings.Trim(s, ".") == "" {
		return "_" + s
	}
	return s
}

// helmHTTPClient reaches chart repositories as the source registries are
// reached: TLS verified unless --src-tls-verify=false, the CA and client
// certificates of --src-cert-dir, proxies from the environment.
func (t *Env) helmHTTPClient() (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	if t.Upstream.CertDir != "" {
		if err := tlsclientconfig.SetupCertificates(t.Upstream.CertDir, tr.TLSClientConfig); err != nil {
			return nil, fmt.Errorf("--src-cert-dir %s: %w", t.Upstream.CertDir, err)
		}
	}
	if t.Upstream.Insecure() {
		tr.TLSClientConfig.InsecureSkipVerify = true //nolint:gosec // the user's --src-tls-verify=false
	}
	return &http.Client{Transport: tr, Timeout: 5 * time.Minute}, nil
}

// CheckCharts checks the helm charts a plan read from an archive carries:
// each one helm/charts.json lists is there, under helm/charts, with the
// digest the list gives.
func CheckCharts(plan *workspace.Plan) error {
	data, ok := plan.File(workspace.HelmChartsFile)
	if !ok {
		return nil
	}
	var records []ChartRecord
	if err := json.Unmarshal(data, &records); err != nil {
		return fmt.Errorf("archive extra %s is not a chart list: %w; the archive is damaged", workspace.HelmChartsFile, err)
	}
	for _, rec := range records {
		if !strings.HasPrefix(rec.File, workspace.HelmDir+"/charts/") {
			return fmt.Errorf("archive extra %s lists chart file %q outside %s/charts: the archive is damaged or from another tool", workspace.HelmChartsFile, rec.File, workspace.HelmDir)
		}
		chart, ok := plan.File(rec.File)
		if !ok {
			return fmt.Errorf("helm chart %s %s: archive extra %s: %w", rec.Name, rec.Version, rec.File, fs.ErrNotExist)
		}
		if helm.Digest(chart) != rec.Digest {
			return fmt.Errorf("helm chart %s %s in the archive has digest %s, %s says %s: the archive is damaged", rec.Name, rec.Version, helm.Digest(chart), workspace.HelmChartsFile, rec.Digest)
		}
	}
	return nil
}

// PinnedHelm is the helm section with each chart entry's version the one
// the plan mirrored, from the plan's chart list: an entry without a version
// (the latest) or with a range names the version resolution picked, so the
// pinned configuration mirrors, and its delete configuration deletes,
// exactly these charts. (An entry that repeats an earlier one's chart is
// recorded under the earlier entry and left as written.)
func PinnedHelm(hc imageset.Helm, plan *workspace.Plan) imageset.Helm {
	data, ok := plan.File(workspace.HelmChartsFile)
	if !ok {
		return hc
	}
	var records []ChartRecord
	if err := json.Unmarshal(data, &records); err != nil {
		return hc
	}
	out := hc
	out.Repositories = slices.Clone(hc.Repositories)
	for i := range out.Repositories {
		repo := &out.Repositories[i]
		repo.Charts = slices.Clone(repo.Charts)
		for j := range repo.Charts {
			ch := &repo.Charts[j]
			path := fmt.Sprintf("mirror.helm.repositories[%d].charts[%d]", i, j)
			for _, rec := range records {
				if rec.Source == path {
					ch.Version = rec.Version
					break
				}
			}
		}
	}
	return out
}
