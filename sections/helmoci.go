package sections

// Helm charts as OCI artifacts: charts pulled from oci:// repositories with
// helm's own registry client, and every mirrored chart (HTTP, local or OCI
// source) put into the local store as the artifact `helm push` makes, so
// that it travels and is pushed, verified, recorded and pruned like an
// image of the Set (kind helm-chart).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/distribution/reference"
	"github.com/docker/distribution/registry/api/errcode"
	v2 "github.com/docker/distribution/registry/api/v2"
	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/image/v5/docker"
	"go.podman.io/image/v5/pkg/docker/config"
	"go.podman.io/image/v5/types"
	"helm.sh/helm/v3/pkg/registry"
	"oras.land/oras-go/v2/registry/remote/auth"

	"github.com/gapmirror/gapmirror/archive"
	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/imageset/helm"
	"github.com/gapmirror/gapmirror/registryapi"
)

// chartsRepo is where charts from HTTP repositories and local paths go
// under the mirror root: <mirror>/charts/<chart>:<version>. Charts from an
// oci:// repository keep their path: <mirror>/<source path>/<chart>:<version>.
const chartsRepo = "charts"

// ociArtifact is a chart as an OCI registry held it: the exact manifest and
// config, and the provenance layer when it has one, so that the mirror
// serves the same digest as the source.
type ociArtifact struct {
	ref      string // host/path/name:tag it was pulled from
	manifest []byte
	config   []byte
	prov     []byte
}

// ociRepository pulls the charts of an oci:// repository with helm's
// registry client: each chart is HOST/PATH/NAME:VERSION.
func (h *helmCharts) ociRepository(rp string, repo imageset.HelmRepository, paths [][]helm.ImagePath, r *imageset.Resolving) []*helmChart {
	base := strings.Trim(strings.TrimPrefix(repo.URL, "oci://"), "/")
	host, srcPath, _ := strings.Cut(base, "/")
	whole := &helmChart{path: rp, label: fmt.Sprintf("helm repository %s (oci://%s)", repo.Name, base)}
	if len(repo.Charts) == 0 {
		r.Fail(chartFailure(whole, fmt.Errorf("an oci:// repository has no index listing its charts: name each chart (and version) under %s.charts", rp)))
		return nil
	}
	var out []*helmChart
	for j, ch := range repo.Charts {
		chp := fmt.Sprintf("%s.charts[%d]", rp, j)
		ver := ch.Version
		c := &helmChart{path: chp, label: fmt.Sprintf("helm chart %s %s from repository %s", ch.Name, orLatest(ver), repo.Name),
			repo: repo.Name, url: "oci://" + base, paths: paths[j], name: ch.Name,
			dest: strings.TrimPrefix(path.Join(srcPath, ch.Name), "/"), platforms: imageset.PlatformNames(ch.Platforms)}
		ref := base + "/" + ch.Name
		client, err := h.t.chartRegistry(host, ref)
		if err != nil {
			r.Fail(chartFailure(c, err))
			continue
		}
		if ver == "" {
			if ver, err = client.latest(ref); err != nil {
				r.Fail(chartFailure(c, fmt.Errorf("%w: set %s.version", err, chp)))
				continue
			}
		}
		c.ver = ver
		c.label = fmt.Sprintf("helm chart %s %s from repository %s", ch.Name, ver, repo.Name)
		// A chart listed twice is pulled once, with the image paths of both entries.
		if k := slices.IndexFunc(out, func(o *helmChart) bool { return o.name == c.name && o.ver == c.ver }); k >= 0 {
			out[k].paths = append(out[k].paths, c.paths...)
			continue
		}
		art, data, err := client.pull(ref + ":" + chartTag(ver))
		if err != nil {
			r.Fail(chartFailure(c, fmt.Errorf("%w: check %s (chart %s at oci://%s:%s)", err, chp, ch.Name, ref, chartTag(ver))))
			continue
		}
		c.data, c.oci = data, art
		out = append(out, c)
	}
	return out
}

func orLatest(v string) string {
	if v == "" {
		return "(latest)"
	}
	return v
}

// chartTag is the OCI tag of a chart version: helm writes '+' as '_'.
func chartTag(version string) string { return strings.ReplaceAll(version, "+", "_") }

// chartRegistry reaches the charts of one repository (HOST/PATH/NAME) as
// the source images are reached: credentials from the same auth file, TLS
// verified with --src-cert-dir or certs.d unless --src-tls-verify=false or
// the registries.conf entry of the repository (its longest matching prefix,
// as for images) marks it insecure (which also allows plain HTTP).
type chartRegistry struct {
	host     string
	insecure bool
	// verify is an explicit --src-tls-verify=true (registries.conf not read).
	verify bool
	opts   []registry.ClientOption
}

func (t *Env) chartRegistry(host, repo string) (*chartRegistry, error) {
	sys := t.Upstream.SystemContext()
	// As for images: an explicit --src-tls-verify wins over registries.conf;
	// certificates from --src-cert-dir, else certs.d.
	tr, insecure, err := registryapi.RepositoryTransport(host, repo, sys)
	if err != nil {
		return nil, err
	}
	cr := &chartRegistry{host: host, insecure: insecure, verify: t.Upstream.TLSVerify == types.OptionalBoolTrue}
	hc := &http.Client{Transport: tr, Timeout: 5 * time.Minute}
	// The credentials are those containers/image gives the repository, as
	// for the images: --src-creds, --src-no-creds (none), else the auth
	// file's entry for the repository, a namespace of it or the host, and
	// credential helpers; an identity token is the OAuth2 refresh token,
	// --src-registry-token the bearer token itself. helm's own stores
	// (~/.config/helm/registry, the docker config) are not read.
	cred, err := config.GetCredentials(sys, repo)
	if err != nil {
		return nil, fmt.Errorf("reading the credentials for %s (--authfile): %w", repo, err)
	}
	authorizer := auth.Client{Client: hc, Cache: auth.NewCache(), Credential: auth.StaticCredential(host, auth.Credential{
		Username: cred.Username, Password: cred.Password, RefreshToken: cred.IdentityToken, AccessToken: sys.DockerBearerRegistryToken})}
	if ua := t.Upstream.UserAgent; ua != "" {
		authorizer.SetUserAgent(ua)
	}
	cr.opts = append(cr.opts, registry.ClientOptHTTPClient(hc), registry.ClientOptAuthorizer(authorizer), registry.ClientOptWriter(nopWriter{}))
	if sys.AuthFilePath != "" {
		// Unused (the authorizer answers), but read by helm's client: the
		// auth file rather than helm's own.
		cr.opts = append(cr.opts, registry.ClientOptCredentialsFile(sys.AuthFilePath))
	}
	return cr, nil
}

type nopWriter struct{}

func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }

// try runs op with a client over TLS and, for an insecure registry that
// answers plain HTTP, again over plain HTTP, as containers/image does.
func (cr *chartRegistry) try(op func(*registry.Client) error) error {
	c, err := registry.NewClient(cr.opts...)
	if err != nil {
		return err
	}
	err = op(c)
	if err != nil && cr.insecure && strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") {
		c, cerr := registry.NewClient(append(cr.opts, registry.ClientOptPlainHTTP())...)
		if cerr != nil {
			return cerr
		}
		err = op(c)
	}
	switch {
	case err == nil:
	case strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") && cr.verify:
		err = fmt.Errorf("%w: the registry speaks plain HTTP and --src-tls-verify=true forces TLS: drop the flag and mark %s insecure in registries.conf, or pass --src-tls-verify=false", err, cr.host)
	case strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		err = fmt.Errorf("%w: the registry speaks plain HTTP: mark it insecure in registries.conf ([[registry]] location = %q, insecure = true) or pass --src-tls-verify=false", err, cr.host)
	case strings.Contains(err.Error(), "certificate") && !cr.insecure:
		err = fmt.Errorf("%w: give the registry's CA with --src-cert-dir (or certs.d/%s), or turn verification off with --src-tls-verify=false", err, cr.host)
	case strings.Contains(err.Error(), "401") || strings.Contains(strings.ToLower(err.Error()), "unauthorized") || strings.Contains(err.Error(), "credential not found"):
		err = fmt.Errorf("%w: %s wants credentials: log in (podman login %s) or give the auth file with --authfile, as for images", err, cr.host, cr.host)
	}
	return err
}

// latest is the highest stable semantic version tagged in repository ref.
func (cr *chartRegistry) latest(ref string) (string, error) {
	var tags []string
	err := cr.try(func(c *registry.Client) (err error) { tags, err = c.Tags(ref); return err })
	if err != nil {
		return "", fmt.Errorf("listing the chart versions of oci://%s: %w", ref, err)
	}
	for _, t := range tags { // highest first
		if v, err := semver.NewVersion(t); err == nil && v.Prerelease() == "" {
			return t, nil
		}
	}
	return "", fmt.Errorf("oci://%s has no stable semantic version tag (it has %s)", ref, helm.ShortList(tags))
}

// pull fetches a chart and checks what it got against the digests the
// manifest names.
func (cr *chartRegistry) pull(ref string) (*ociArtifact, []byte, error) {
	var res *registry.PullResult
	err := cr.try(func(c *registry.Client) (err error) {
		res, err = c.Pull(ref, registry.PullOptWithProv(true), registry.PullOptIgnoreMissingProv(true))
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(res.Manifest.Data, &m); err != nil || digest.FromBytes(res.Manifest.Data).String() != res.Manifest.Digest {
		return nil, nil, fmt.Errorf("the manifest of %s does not match its digest %s", ref, res.Manifest.Digest)
	}
	if got := digest.FromBytes(res.Chart.Data).String(); got != res.Chart.Digest {
		return nil, nil, fmt.Errorf("the chart layer of %s has digest %s, its manifest says %s", ref, got, res.Chart.Digest)
	}
	art := &ociArtifact{ref: ref, manifest: res.Manifest.Data, config: res.Config.Data}
	if len(res.Prov.Data) > 0 {
		art.prov = res.Prov.Data
	}
	return art, res.Chart.Data, nil
}

// artifact is the chart as `helm push` stores it: the source's own
// manifest for an OCI chart, else one made the way helm makes it (config =
// the chart's metadata, one chart layer holding the .tgz byte for byte,
// helm's annotations without a creation time, so every run makes the same
// digest).
func (c *helmChart) artifact() (manifest []byte, blobs map[digest.Digest][]byte, err error) {
	blobs = map[digest.Digest][]byte{digest.FromBytes(c.data): c.data}
	if c.oci != nil {
		blobs[digest.FromBytes(c.oci.config)] = c.oci.config
		if c.oci.prov != nil {
			blobs[digest.FromBytes(c.oci.prov)] = c.oci.prov
		}
		var m ocispec.Manifest
		if err := json.Unmarshal(c.oci.manifest, &m); err != nil {
			return nil, nil, err
		}
		for _, d := range append([]ocispec.Descriptor{m.Config}, m.Layers...) {
			if _, ok := blobs[d.Digest]; !ok {
				return nil, nil, fmt.Errorf("oci://%s: the manifest names blob %s (%s), which the pull did not return", c.oci.ref, d.Digest, d.MediaType)
			}
		}
		return c.oci.manifest, blobs, nil
	}
	ch, err := helm.LoadArchive(c.data)
	if err != nil {
		return nil, nil, err
	}
	config, err := json.Marshal(ch.Metadata)
	if err != nil {
		return nil, nil, err
	}
	blobs[digest.FromBytes(config)] = config
	ann := map[string]string{
		ocispec.AnnotationTitle:   ch.Metadata.Name,
		ocispec.AnnotationVersion: ch.Metadata.Version,
	}
	if ch.Metadata.Description != "" {
		ann[ocispec.AnnotationDescription] = ch.Metadata.Description
	}
	if ch.Metadata.Home != "" {
		ann[ocispec.AnnotationURL] = ch.Metadata.Home
	}
	m := ocispec.Manifest{
		Versioned:   specs.Versioned{SchemaVersion: 2},
		MediaType:   ocispec.MediaTypeImageManifest,
		Config:      ocispec.Descriptor{MediaType: registry.ConfigMediaType, Digest: digest.FromBytes(config), Size: int64(len(config))},
		Layers:      []ocispec.Descriptor{{MediaType: registry.ChartLayerMediaType, Digest: digest.FromBytes(c.data), Size: int64(len(c.data))}},
		Annotations: ann,
	}
	manifest, err = json.Marshal(m)
	return manifest, blobs, err
}

// destination is where the chart goes under the mirror root.
func (c *helmChart) destination() string {
	repo := c.dest
	if repo == "" {
		repo = path.Join(chartsRepo, c.name)
	}
	return strings.ToLower(repo) + ":" + chartTag(c.ver)
}

// addArtifact puts the chart's OCI artifact into the store and the Set and
// returns its manifest digest and destination ("" when it is not served).
func (h *helmCharts) addArtifact(c *helmChart, r *imageset.Resolving) (string, string, error) {
	if h.store == nil {
		return "", "", nil
	}
	manifest, blobs, err := c.artifact()
	if err != nil {
		r.Fail(chartFailure(c, err))
		return "", "", nil
	}
	dest := c.destination()
	if _, err := reference.ParseNamed("localhost/" + dest); err != nil {
		r.Fail(chartFailure(c, fmt.Errorf("cannot serve the chart from the mirror as %s: %w", dest, err)))
		return "", "", nil
	}
	for d, b := range blobs {
		if err := h.store.Put(d, int64(len(b)), bytes.NewReader(b)); err != nil {
			return "", "", err
		}
	}
	d := digest.FromBytes(manifest)
	if err := h.store.Put(d, int64(len(manifest)), bytes.NewReader(manifest)); err != nil {
		return "", "", err
	}
	h.store.Tag(dest, ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: d, Size: int64(len(manifest))})
	origin := c.url + "/" + c.name + ":" + c.ver
	if c.oci != nil {
		origin = c.oci.ref
	}
	img := imageset.Image{Source: "localhost/gapmirror/helm-chart@" + d.String(), Origin: origin, Digest: d.String(), Destination: dest,
		Kind: imageset.KindHelmChart, Built: true,
		// helmWhy's form, so that delete of the chart deletes its artifact too.
		Why: []string{fmt.Sprintf("%s: helm chart %s %s: the chart, served as oci://<mirror>/%s", c.path, c.name, c.ver, dest)}}
	if err := r.Set.Add(img); err != nil {
		r.Fail(chartFailure(c, err))
		return "", "", nil
	}
	return d.String(), dest, nil
}

// ChartRefused reports whether err is a registry's refusal of an OCI
// artifact (the manifest or its config type), as opposed to a failure of
// the registry or the network.
func ChartRefused(err error) bool {
	if err == nil {
		return false
	}
	var ec errcode.Error
	if errors.As(err, &ec) && (ec.Code == v2.ErrorCodeManifestInvalid || ec.Code == errcode.ErrorCodeUnsupported) {
		return true
	}
	var status docker.UnexpectedHTTPStatusError
	if errors.As(err, &status) && (status.StatusCode == http.StatusBadRequest || status.StatusCode == http.StatusUnsupportedMediaType) {
		return true
	}
	// Other clients' answers (and codes in an errcode.Errors list) as text.
	msg := strings.ToLower(err.Error())
	for _, s := range []string{"manifest invalid", "manifest_invalid", "unsupported media type", "unsupported manifest", "media type", "mediatype", "415 unsupported", "400 bad request"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// chartReference is one line of the cluster resource listing the charts
// the mirror serves.
type chartReference struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Chart is the OCI reference without the version, as helm install,
	// Argo CD (repoURL) and Flux (OCIRepository url) take it.
	Chart string `json:"chart"`
	// Reference is the full oci:// reference of this version.
	Reference string `json:"reference"`
	Digest    string `json:"digest"`
	Source    string `json:"source"`
}

// chartReferencesFile is the cluster resource listing the mirrored charts.
const chartReferencesFile = "helm-charts.yaml"

// WriteChartReferences writes (or removes, when the mirror serves no chart)
// the list of the charts done holds, with their oci:// references under root.
func WriteChartReferences(dir, root string, done *imageset.Set) (string, error) {
	p := filepath.Join(dir, chartReferencesFile)
	var refs []chartReference
	for _, img := range done.Images {
		if img.Kind != imageset.KindHelmChart {
			continue
		}
		name, ver := chartOf(img)
		repo := root + "/" + img.DestinationRepo()
		refs = append(refs, chartReference{Name: name, Version: ver, Chart: "oci://" + repo,
			Reference: "oci://" + repo + ":" + img.DestinationTag(), Digest: img.Digest, Source: img.Origin})
	}
	if len(refs) == 0 {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		return "", nil
	}
	var b strings.Builder
	b.WriteString("# Helm charts served by the mirror as OCI artifacts (written by gapmirror).\n")
	b.WriteString("# helm install NAME <chart> --version <version>; Argo CD: repoURL <chart without oci:// and\n")
	b.WriteString("# the last path element>, chart <name>; Flux: OCIRepository url <chart>, ref.tag <version>.\n")
	b.WriteString("charts:\n")
	for _, r := range refs {
		data, err := json.Marshal(r)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "- %s\n", data)
	}
	return p, archive.WriteFileAtomic(p, []byte(b.String()))
}

// chartOf reads the chart name and version from a chart image's Why.
func chartOf(img imageset.Image) (name, version string) {
	for _, w := range img.Why {
		if m := HelmWhy.FindStringSubmatch(w); m != nil {
			return m[2], m[3]
		}
	}
	return path.Base(img.DestinationRepo()), img.DestinationTag()
}

// HelmWhy matches the reason helmCharts.images gives an image:
// "<config path>: helm chart <name> <version>: <object> (<template>)".
var HelmWhy = regexp.MustCompile(`^(mirror\.helm\.\S+): helm chart (\S+) (\S+): `)
