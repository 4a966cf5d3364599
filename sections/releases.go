package sections

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/imageset/release"
	"github.com/gapmirror/gapmirror/ocistore"
	"github.com/gapmirror/gapmirror/transfer"
	"github.com/gapmirror/gapmirror/workspace"
)

// ReleaseOptions say where release payloads, their update graphs and
// signatures come from, and how the signatures are checked.
type ReleaseOptions struct {
	// GraphURL is the update graph endpoint for every channel type; empty:
	// $UPDATE_URL_OVERRIDE (OpenShift channels), then the public services.
	GraphURL string
	// SignatureURL is the release signature store; empty:
	// $OCP_SIGNATURE_URL, then mirror.openshift.com.
	SignatureURL string
	// SignatureKeys are trusted key files or directories; empty:
	// $OCP_SIGNATURE_VERIFICATION_PK, then Red Hat's installed release key.
	SignatureKeys []string
	// SkipSignatureVerification mirrors releases whether or not a trusted
	// signature vouches for them (loudly logged).
	SkipSignatureVerification bool
	// IncludeConditional lets upgrade paths take updates with known risks.
	IncludeConditional bool
	// GraphDataURL serves the update graph data tarball (graph: true);
	// empty: release.DefaultGraphDataURL.
	GraphDataURL string
	// GraphBaseImage is the image the graph data is layered on; empty:
	// release.DefaultGraphBaseImage.
	GraphBaseImage string
	// HTTPClient sends the update service and signature store requests;
	// nil: system trust store, proxy from the environment.
	HTTPClient *http.Client
}

// ocpReleaseRepository is the repository OpenShift release signatures name
// as identity; accepted even when the update service lists payloads in
// another registry (an enclave's mirror), since the digest must match anyway.
const ocpReleaseRepository = "quay.io/openshift-release-dev/ocp-release"

// releaseContributor resolves mirror.platform: update graphs, release
// selection, signature verification, payload components, graph image.
type releaseContributor struct {
	t     *Env
	up    *transfer.Registry
	store *ocistore.Store
	// out is the plan being made.
	out *workspace.Plan
	// ws holds the signatures earlier runs verified (read only).
	ws string
}

func (c *releaseContributor) Sections() []string { return []string{"mirror.platform"} }

// Contribute adds the selected releases and their components to r.Set. A
// release that cannot be proved genuine, or whose payload cannot be read,
// fails on its own (release exit bit); bad configuration and unreachable
// update services stop the run.
func (c *releaseContributor) Contribute(ctx context.Context, cfg *imageset.ImageSetConfiguration, r *imageset.Resolving) error {
	p := cfg.Mirror.Platform
	if len(p.Channels) == 0 && p.Release == "" && !p.Graph {
		if p.KubeVirtContainer {
			r.Warn("mirror.platform.kubeVirtContainer has no effect without channels or release")
		}
		return nil
	}
	if len(p.Platforms) > 0 {
		// platforms means the multi payload, copied sparse (validation
		// keeps architectures out).
		p.Architectures = []string{release.ArchMulti}
	}
	opts := c.t.Releases
	var releases []release.Release
	switch {
	case p.Release != "":
		if len(p.Channels) > 0 {
			r.Warn("mirror.platform.release is set, so mirror.platform.channels are ignored (as oc-mirror does)")
		}
		rel, err := c.single(ctx, p)
		if err != nil {
			return err
		}
		releases = append(releases, rel)
	case len(p.Channels) > 0:
		plan, err := c.plan(ctx, p, opts)
		if err != nil {
			return err
		}
		for _, w := range plan.Warnings {
			r.Warn("%s", w)
		}
		releases = plan.Releases
	}

	var verdicts []release.Verdict
	if len(releases) > 0 {
		verifier, err := c.verifier()
		if err != nil {
			return err
		}
		if verifier.Keyring != nil {
			defer verifier.Keyring.Close()
		}
		verdicts = c.verifyAll(ctx, verifier, releases)
	}
	type accepted struct {
		rel     release.Release
		verdict release.Verdict
	}
	var ok []accepted
	for _, v := range verdicts {
		rel := v.Release
		if err := v.Err(); err != nil {
			c.t.Log.Error("release refused", "version", rel.Version, "arch", rel.Arch, "digest", rel.Digest, "reason", v.Reason)
			r.Fail(imageset.Unresolved{Origin: rel.Payload, Kind: imageset.KindRelease, Why: strings.Join(rel.Why, "; "), Err: err})
			continue
		}
		if v.Status == release.StatusSkipped {
			c.t.Log.Warn(v.Reason)
		} else {
			c.t.Log.Info("release signature verified", "version", rel.Version, "arch", rel.Arch, "digest", rel.Digest, "key", v.Fingerprint, "signature", v.Index)
		}
		ok = append(ok, accepted{rel, v})
	}

	// Payloads are read in parallel; images are added in plan order so the
	// Set does not depend on timing.
	payloads := make([]*release.Payload, len(ok))
	errs := make([]error, len(ok))
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(1, r.Parallel))
	for i, a := range ok {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			payloads[i], errs[i] = c.readPayload(ctx, a.rel, p.KubeVirtContainer)
		}()
	}
	wg.Wait()
	for i, a := range ok {
		rel := a.rel
		if errs[i] != nil {
			r.Fail(imageset.Unresolved{Origin: rel.Payload, Kind: imageset.KindRelease, Why: strings.Join(rel.Why, "; "), Err: errs[i]})
			continue
		}
		added, err := c.addRelease(r, rel, payloads[i], imageset.PlatformNames(p.Platforms))
		if err != nil {
			return err
		}
		if !added {
			continue
		}
		var sigs [][]byte
		for _, s := range a.verdict.Signatures {
			if s.Verified || a.verdict.Status == release.StatusSkipped {
				sigs = append(sigs, s.Data)
			}
		}
		if err := c.keepSignatures(rel.Digest, sigs); err != nil {
			return err
		}
	}
	if p.Graph {
		if err := c.graphImage(ctx, r); err != nil {
			return err
		}
	}
	return nil
}

// verifier builds the signature checker from the options, or fails when no
// trusted key is available and verification is not skipped.
func (c *releaseContributor) verifier() (*release.Verifier, error) {
	opts := c.t.Releases
	copts := c.t.Copy.WithDefaults()
	v := &release.Verifier{
		// A store's 503 is retried as a registry's would be (--retry-times, --retry-delay).
		Source: &release.SignatureStore{URL: opts.SignatureURL, HTTPClient: opts.HTTPClient, UserAgent: "gapmirror/" + c.t.ToolVersion,
			Retries: copts.Retries, RetryDelay: copts.RetryDelay},
		AcceptIdentities: []string{ocpReleaseRepository},
		Skip:             opts.SkipSignatureVerification,
	}
	if opts.SkipSignatureVerification {
		c.t.Log.Warn("RELEASE SIGNATURE VERIFICATION IS OFF (--skip-release-signature-verification): release payloads are mirrored without proof that their publisher released them")
		return v, nil
	}
	paths, err := release.TrustedKeyPaths(opts.SignatureKeys)
	if err != nil {
		return nil, fmt.Errorf("mirror.platform: %w", err)
	}
	kr, err := release.LoadKeyring(paths...)
	if err != nil {
		return nil, fmt.Errorf("mirror.platform: %w: fix --release-signature-key or %s", err, release.EnvSignatureKey)
	}
	v.Keyring = kr
	c.t.Log.Info("release signatures checked against", "keys", strings.Join(kr.Fingerprints(), ","), "store", v.Source.(*release.SignatureStore).BaseURL())
	return v, nil
}

// verifyAll checks every release, first with the signatures an earlier run
// saved in the workspace, then, for those they do not prove, with the
// signature store. Signatures of a digest never change and cached ones are
// checked against the trusted keys like fresh ones, so reruns need the
// store only for new releases.
func (c *releaseContributor) verifyAll(ctx context.Context, v *release.Verifier, releases []release.Release) []release.Verdict {
	if v.Skip || c.ws == "" {
		return v.VerifyAll(ctx, releases)
	}
	cached := *v
	cached.Source = release.SignatureDir(filepath.Join(c.ws, workspace.ReleaseSignaturesDir))
	out := cached.VerifyAll(ctx, releases)
	var again []int
	var rels []release.Release
	for i, vd := range out {
		if vd.Status != release.StatusVerified {
			again = append(again, i)
			rels = append(rels, releases[i])
		} else {
			c.t.Log.Debug("release verified with the signatures saved by an earlier run", "version", releases[i].Version, "digest", releases[i].Digest)
		}
	}
	for j, vd := range v.VerifyAll(ctx, rels) {
		out[again[j]] = vd
	}
	return out
}

// ReleaseSpec turns mirror.platform into a planning spec.
func ReleaseSpec(p imageset.Platform, includeConditional bool) release.Spec {
	s := release.Spec{Architectures: p.Architectures, IncludeConditional: includeConditional}
	for _, ch := range p.Channels {
		s.Channels = append(s.Channels, release.ChannelSpec{
			Name: ch.Name, Type: release.ChannelType(ch.ReleaseType()), MinVersion: ch.MinVersion, MaxVersion: ch.MaxVersion,
			ShortestPath: ch.ShortestPath, Full: ch.Full,
		})
	}
	return s
}

// plan fetches the update graphs (kept in the plan, for the workspace and
// the archive) and selects the releases of the channels.
func (c *releaseContributor) plan(ctx context.Context, p imageset.Platform, opts ReleaseOptions) (*release.Plan, error) {
	client := &release.GraphClient{HTTPClient: opts.HTTPClient, UserAgent: "gapmirror/" + c.t.ToolVersion}
	if opts.GraphURL != "" {
		client.OCPURL, client.OKDURL = opts.GraphURL, opts.GraphURL
	}
	s := ReleaseSpec(p, opts.IncludeConditional)
	graphs, err := release.FetchGraphs(ctx, client, s)
	if err != nil {
		return nil, c.t.locate(err)
	}
	keys := make([]release.GraphKey, 0, len(graphs))
	for k := range graphs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool { return keys[a].String() < keys[b].String() })
	for _, k := range keys {
		g := graphs[k]
		if len(g.Raw) > 0 {
			c.out.AddFile(path.Join(workspace.ReleaseGraphsDir, release.GraphFileName(k.Channel, k.Arch)), g.Raw)
		}
	}
	plan, err := release.NewPlan(graphs, s)
	if err != nil {
		return nil, c.t.locate(err)
	}
	if len(plan.Releases) == 0 {
		return nil, fmt.Errorf("mirror.platform.channels: no release images found: check the channels and version bounds")
	}
	// The plan (and --dry-run) names the risks of every conditional update
	// an upgrade path takes, next to the release it leads to.
	for _, u := range plan.ConditionalUpdates {
		var risks []string
		for _, rk := range u.Risks {
			if rk.URL != "" {
				risks = append(risks, rk.Name+" ("+rk.URL+")")
			} else {
				risks = append(risks, rk.Name)
			}
		}
		note := fmt.Sprintf("conditional update %s → %s (channel %s) taken despite known risks: %s", u.From, u.To, u.Channel, strings.Join(risks, ", "))
		for i := range plan.Releases {
			if plan.Releases[i].Arch == u.Arch && plan.Releases[i].Version == u.To {
				plan.Releases[i].Why = append(plan.Releases[i].Why, note)
			}
		}
	}
	for _, rel := range plan.Releases {
		c.t.Log.Info("release selected", "version", rel.Version, "arch", rel.Arch, "channels", strings.Join(rel.Channels, ","), "why", strings.Join(rel.Why, "; "))
	}
	return plan, nil
}

// single resolves mirror.platform.release, a release image by tag or digest.
func (c *releaseContributor) single(ctx context.Context, p imageset.Platform) (release.Release, error) {
	named, err := reference.ParseNormalizedNamed(p.Release)
	if err != nil {
		return release.Release{}, fmt.Errorf("mirror.platform.release: %q is not an image reference: %w", p.Release, err)
	}
	named = reference.TagNameOnly(named)
	d, err := c.up.ResolveDigest(ctx, named)
	if err != nil {
		return release.Release{}, fmt.Errorf("mirror.platform.release: resolving %s: %w", p.Release, err)
	}
	arch := ""
	if len(p.Architectures) > 1 {
		return release.Release{}, fmt.Errorf("mirror.platform.architectures: a single release image (mirror.platform.release) has one architecture; list at most one")
	}
	if len(p.Architectures) == 1 {
		if arch, err = release.GraphArch(p.Architectures[0]); err != nil {
			return release.Release{}, fmt.Errorf("mirror.platform.architectures[0]: %w", err)
		}
	}
	return release.Release{
		Arch:    arch,
		Type:    release.TypeOCP,
		Payload: reference.TrimNamed(named).String() + "@" + d.String(),
		Digest:  d.String(),
		Why:     []string{"mirror.platform.release " + p.Release},
	}, nil
}

// payloadImages reads release images through the upstream registry.
type payloadImages struct{ up *transfer.Registry }

func (p payloadImages) Manifest(ctx context.Context, ref string, d digest.Digest) ([]byte, string, error) {
	data, mt, err := p.up.Manifest(ctx, imageset.Image{Source: ref}, d)
	if err == nil {
		// The payload is mirrored too: its signature lookup and the copy's
		// planning take it from here.
		p.up.KeepResolved(ref, d, data)
	}
	return data, mt, err
}

func (p payloadImages) Blob(ctx context.Context, ref string, d digest.Digest, size int64) (io.ReadCloser, error) {
	return p.up.Blob(ctx, imageset.Image{Source: ref}, ocispec.Descriptor{Digest: d, Size: size})
}

// readPayload reads the component list of a release, retrying transient
// registry errors like the copy does.
func (c *releaseContributor) readPayload(ctx context.Context, rel release.Release, kubeVirt bool) (*release.Payload, error) {
	var opts []release.PayloadOption
	if kubeVirt {
		opts = append(opts, release.WithKubeVirt())
	}
	var p *release.Payload
	err := transfer.Retry(ctx, c.up.Retries, c.up.RetryDelay, func() (err error) {
		p, err = release.ReadPayload(ctx, payloadImages{c.up}, rel.Payload, digest.Digest(rel.Digest), rel.Arch, opts...)
		return err
	})
	if err != nil {
		if rel.Version != "" {
			return nil, fmt.Errorf("release %s (arch %s): %w", rel.Version, rel.Arch, err)
		}
		return nil, err
	}
	if rel.Version != "" && p.Version != rel.Version {
		return nil, fmt.Errorf("release image %s says it is version %s, but the update graph lists it as %s: the update service and the registry disagree; retry later or report it", rel.Payload, p.Version, rel.Version)
	}
	return p, nil
}

// addRelease puts a release image and its components into the Set, at
// oc-mirror's layout: openshift/release-images:<version>-<arch> and
// openshift/release:<version>-<arch>-<component>; sparse when platforms
// (mirror.platform.platforms) are set.
func (c *releaseContributor) addRelease(r *imageset.Resolving, rel release.Release, p *release.Payload, platforms []string) (added bool, err error) {
	rel.Version = p.Version
	if rel.Arch == "" {
		rel.Arch = p.Arch
		if p.Instance != digest.Digest(rel.Digest) {
			rel.Arch = release.ArchMulti
		}
	}
	img := imageset.Image{
		Source: rel.Payload, Origin: rel.Payload, Digest: rel.Digest,
		Destination: rel.Destination(), Kind: imageset.KindRelease, Why: rel.Why, Platforms: platforms,
	}
	if b := r.Block(img.Origin, img.DestinationRepo()); b != "" {
		r.Warn("release %s (arch %s) is blocked by %s: none of its images is mirrored", rel.Version, rel.Arch, b)
		return false, nil
	}
	if err := r.Set.Add(img); err != nil {
		return false, fmt.Errorf("release %s (arch %s): %w", rel.Version, rel.Arch, err)
	}
	comps := p.Components
	if p.NoKubeVirt != "" {
		// As oc-mirror: the release is mirrored without the disk it does
		// not ship (arm64 and ppc64le releases never have one).
		r.Warn("mirror.platform.kubeVirtContainer: release %s (arch %s) is mirrored without a KubeVirt container disk: %s", rel.Version, rel.Arch, p.NoKubeVirt)
	}
	if len(p.KubeVirt) > 0 {
		comps = append(append([]release.Component(nil), comps...), p.KubeVirt...)
	}
	why := fmt.Sprintf("component of release %s (arch %s)", rel.Version, rel.Arch)
	for _, comp := range comps {
		named, err := reference.ParseNormalizedNamed(comp.Image)
		if err != nil {
			return false, fmt.Errorf("release %s component %s: %w", rel.Version, comp.Name, err)
		}
		ci := imageset.Image{
			Source:      reference.TrimNamed(named).String() + "@" + comp.Digest.String(),
			Origin:      comp.Image,
			Digest:      comp.Digest.String(),
			Destination: rel.ComponentDestination(comp.Name),
			Kind:        imageset.KindReleaseComponent,
			Why:         []string{why},
			Platforms:   platforms,
		}
		if b := r.Block(ci.Origin, ci.DestinationRepo()); b != "" {
			r.Warn("component %s of release %s is blocked by %s: clusters cannot install or update to %s from this mirror", comp.Name, rel.Version, b, rel.Version)
			continue
		}
		if err := r.Set.Add(ci); err != nil {
			return false, fmt.Errorf("release %s component %s: %w", rel.Version, comp.Name, err)
		}
	}
	c.t.Log.Info("release payload read", "version", rel.Version, "arch", rel.Arch, "components", len(comps))
	return true, nil
}

// SignatureExtra is the archive name of signature n (1-based) of a release.
func SignatureExtra(releaseDigest string, n int) string {
	return path.Join(workspace.ReleaseSignaturesDir, strings.Replace(releaseDigest, ":", "=", 1), "signature-"+strconv.Itoa(n))
}

// keepSignatures puts a release's signatures into the plan, for the
// cluster resources, the archive and the workspace.
func (c *releaseContributor) keepSignatures(releaseDigest string, sigs [][]byte) error {
	for i, s := range sigs {
		c.out.AddFile(SignatureExtra(releaseDigest, i+1), s)
	}
	return nil
}

// graphImage builds the update graph data image into the local store and
// adds it to the Set (graph: true).
func (c *releaseContributor) graphImage(ctx context.Context, r *imageset.Resolving) error {
	opts := c.t.Releases
	override := os.Getenv(release.EnvUpdateURLOverride)
	dataURL := opts.GraphDataURL
	if dataURL == "" {
		dataURL = release.DefaultGraphDataURL
		// An enclave's own update service (UPDATE_URL_OVERRIDE) is where
		// api.openshift.com is out of reach: as oc-mirror, reuse the graph
		// image an earlier run built rather than download the graph data.
		if override != "" {
			if img, ok := c.builtGraphImage(); ok {
				c.t.Log.Info("mirror.platform.graph: "+release.EnvUpdateURLOverride+" is set: reusing the graph image an earlier run built (pass --graph-data-url to build it anew)", "digest", img.Digest, "updateService", override)
				return r.Set.Add(img)
			}
		}
	}
	baseRef := opts.GraphBaseImage
	if baseRef == "" {
		baseRef = release.DefaultGraphBaseImage
	}
	tgz, err := release.FetchGraphData(ctx, opts.HTTPClient, dataURL)
	if err != nil {
		if override != "" && opts.GraphDataURL == "" {
			return fmt.Errorf("mirror.platform.graph: %w (%s is set and no earlier run built a graph image to reuse: point --graph-data-url at a reachable copy of the graph data)", err, release.EnvUpdateURLOverride)
		}
		return fmt.Errorf("mirror.platform.graph: %w", err)
	}
	named, err := reference.ParseNormalizedNamed(baseRef)
	if err != nil {
		return fmt.Errorf("--graph-base-image %q is not an image reference: %w", baseRef, err)
	}
	named = reference.TagNameOnly(named)
	bd, err := c.up.ResolveDigest(ctx, named)
	if err != nil {
		return fmt.Errorf("mirror.platform.graph: graph image base %s: %w (pick another with --graph-base-image)", baseRef, err)
	}
	base := imageset.Image{Source: reference.TrimNamed(named).String() + "@" + bd.String(), Origin: named.String(), Digest: bd.String(),
		Destination: "gapmirror-graph-base:" + imageset.DigestTag(bd), Kind: imageset.KindReleaseGraph}
	// Planned, so its progress has its total from the first frame.
	res := transfer.CopyPlanned(ctx, &imageset.Set{Images: []imageset.Image{base}}, c.up, transfer.StoreDestination(c.store), c.t.Copy)
	if err := res.Err(); err != nil {
		return fmt.Errorf("mirror.platform.graph: copying the graph image base %s into the local store: %w", baseRef, err)
	}
	d, err := release.BuildGraphImage(c.store, bd, tgz)
	if err != nil {
		return fmt.Errorf("mirror.platform.graph: %w", err)
	}
	data, err := c.store.ReadBlob(d)
	if err != nil {
		return err
	}
	c.store.Tag(release.GraphImageDestination, ocispec.Descriptor{MediaType: transfer.MediaTypeOf(data), Digest: d, Size: int64(len(data))})
	if err := c.store.SaveIndex(); err != nil {
		return err
	}
	img := graphImageOf(d, fmt.Sprintf("mirror.platform.graph: update graph data from %s on %s", dataURL, baseRef))
	if err := r.Set.Add(img); err != nil {
		return fmt.Errorf("mirror.platform.graph: %w", err)
	}
	c.t.Log.Info("graph data image built", "digest", d, "base", baseRef, "graphData", dataURL)
	return nil
}

// graphImageOf is the Set's image of the graph image d, built here.
func graphImageOf(d digest.Digest, why string) imageset.Image {
	ref := "localhost/gapmirror/graph-image@" + d.String()
	return imageset.Image{Source: ref, Origin: ref, Digest: d.String(), Destination: release.GraphImageDestination,
		Kind: imageset.KindReleaseGraph, Built: true, Why: []string{why}}
}

// builtGraphImage is the graph image an earlier run built into the store,
// when the store still holds all of it.
func (c *releaseContributor) builtGraphImage() (imageset.Image, bool) {
	desc, ok := c.store.Resolve(release.GraphImageDestination)
	if !ok {
		return imageset.Image{}, false
	}
	img := graphImageOf(desc.Digest, "mirror.platform.graph: the graph image an earlier run built ("+release.EnvUpdateURLOverride+" is set)")
	if _, err := transfer.StoreBlobs(c.store, img); err != nil {
		return imageset.Image{}, false
	}
	return img, true
}

// KeptSignatures gives a plan made from a Set alone (a format-1 failure
// file, or one moved away from its run record) the signatures an earlier
// run kept in the workspace ws for the Set's releases, as plan files: the
// plan then carries them into the archive, the record and the cluster
// resources like a plan that resolution made. A release without kept
// signatures gets none (generate warns of it).
func KeptSignatures(plan *workspace.Plan, ws string) {
	if ws == "" {
		return
	}
	dir := release.SignatureDir(filepath.Join(ws, workspace.ReleaseSignaturesDir))
	for _, img := range plan.Set.Images {
		if img.Kind != imageset.KindRelease {
			continue
		}
		sigs, err := dir.Signatures(context.Background(), img.Digest)
		if err != nil {
			continue
		}
		for i, s := range sigs {
			plan.AddFile(SignatureExtra(img.Digest, i+1), s)
		}
	}
}
