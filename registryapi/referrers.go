package registryapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/opencontainers/go-digest"
)

// Media types of the referrers list and of an empty config.
const (
	ociIndex        = "application/vnd.oci.image.index.v1+json"
	ociEmptyConfig  = "application/vnd.oci.empty.v1+json"
	referrersPageMB = 4
)

// ErrFallbackTagTaken marks a referrers tag schema tag (sha256-<hex>) that
// names something other than a referrers index: most often the subject
// itself, tagged by its digest as oc-mirror tags an image named by digest.
// Writing the index there would take the tag from it.
var ErrFallbackTagTaken = errors.New("the referrers tag names a manifest that is not a referrers index")

// FallbackTag is the referrers tag schema's tag for the referrers of d:
// "<alg>-<hex>".
func FallbackTag(d digest.Digest) string {
	return d.Algorithm().String() + "-" + d.Encoded()
}

// Referrers lists the manifests in repo whose subject is d: the OCI 1.1 referrers API
// (GET /v2/<repo>/referrers/<d>, with ?artifactType= when artifactType is not ""; pages
// followed by Link), or where the registry lacks the API (404 on that endpoint, per the
// distribution spec), the referrers tag schema index (tag sha256-<hex> of d). fallback says which
// was used. A subject with no referrers is an empty list, not an error.
func (c *Client) Referrers(ctx context.Context, repo string, d digest.Digest, artifactType string) (refs []v1.Descriptor, fallback bool, err error) {
	if err := d.Validate(); err != nil {
		return nil, false, fmt.Errorf("referrers of %s@%s: %w", repo, d, err)
	}
	u := c.url("/v2/" + repo + "/referrers/" + d.String())
	if artifactType != "" {
		u += "?" + url.Values{"artifactType": {artifactType}}.Encode()
	}
	filtered := true
	for page := 0; u != ""; page++ {
		if page == 1000 {
			return nil, false, fmt.Errorf("referrers of %s/%s@%s: more than 1000 pages", c.host, repo, d)
		}
		if page == 0 && c.noReferrersAPI.Load() {
			refs, err := c.fallbackReferrers(ctx, repo, d)
			return filterReferrers(refs, artifactType), true, err
		}
		resp, err := c.send(ctx, http.MethodGet, u, http.Header{"Accept": {ociIndex}}, nil, 0)
		if err != nil {
			return nil, false, c.wrap(err)
		}
		if resp.StatusCode == http.StatusNotFound && page == 0 {
			// The spec forbids a registry with the API to answer 404 here.
			c.sawNoReferrersAPI(resp)
			refs, err := c.fallbackReferrers(ctx, repo, d)
			return filterReferrers(refs, artifactType), true, err
		}
		if resp.StatusCode != http.StatusOK {
			return nil, false, c.answer(resp, http.MethodGet)
		}
		var idx v1.IndexManifest
		err = json.NewDecoder(io.LimitReader(resp.Body, referrersPageMB<<20)).Decode(&idx)
		drain(resp)
		if err != nil {
			return nil, false, fmt.Errorf("referrers of %s/%s@%s: the registry's answer is not an OCI index: %w", c.host, repo, d, err)
		}
		c.referrersAPI.Store(true) // a push to this host then needs no probe
		refs = append(refs, idx.Manifests...)
		if !slices.Contains(strings.Split(strings.ReplaceAll(resp.Header.Get("OCI-Filters-Applied"), " ", ""), ","), "artifactType") {
			filtered = false
		}
		if u, err = c.nextLink(resp); err != nil {
			return nil, false, err
		}
	}
	if refs, err = c.trueArtifactTypes(ctx, repo, refs); err != nil {
		return nil, false, err
	}
	if artifactType != "" && !filtered {
		refs = filterReferrers(refs, artifactType)
	}
	if refs == nil {
		refs = []v1.Descriptor{}
	}
	return refs, false, nil
}

// sawNoReferrersAPI takes a 404 from the referrers endpoint. One without
// the spec's error codes is the registry's answer to a path it does not
// route (distribution's "404 page not found"): the host has no API, and the
// rest of the run goes straight to the tag schema (a request less per
// manifest). A NAME_UNKNOWN may be a registry with the API answering for a
// repository it does not have: asked again next time.
func (c *Client) sawNoReferrersAPI(resp *http.Response) {
	e := c.answer(resp, http.MethodGet)
	if len(e.Codes) == 0 {
		c.noReferrersAPI.Store(true)
	}
}

// HasReferrersAPI reports whether the registry serves the referrers API,
// asking it about subject in repo unless an earlier answer told.
func (c *Client) HasReferrersAPI(ctx context.Context, repo string, subject digest.Digest) (bool, error) {
	switch { // known: no need to queue behind a probe
	case c.noReferrersAPI.Load():
		return false, nil
	case c.referrersAPI.Load():
		return true, nil
	}
	c.referrersProbe.Lock() // one probe per host, not one per referrer pushed at once
	defer c.referrersProbe.Unlock()
	if c.noReferrersAPI.Load() {
		return false, nil
	}
	if c.referrersAPI.Load() {
		return true, nil
	}
	resp, err := c.send(ctx, http.MethodGet, c.url("/v2/"+repo+"/referrers/"+subject.String()), http.Header{"Accept": {ociIndex}}, nil, 0)
	if err != nil {
		return false, c.wrap(err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
		drain(resp)
		c.referrersAPI.Store(true)
		return true, nil
	case http.StatusNotFound:
		c.sawNoReferrersAPI(resp)
		return false, nil
	}
	return false, c.answer(resp, http.MethodGet)
}

// trueArtifactTypes reads the referrers listed with the empty config's
// media type as artifactType: some registries (go-containerregistry's)
// list the config's media type although the manifest has an artifactType
// of its own, which is what the spec has them list.
func (c *Client) trueArtifactTypes(ctx context.Context, repo string, refs []v1.Descriptor) ([]v1.Descriptor, error) {
	for i, r := range refs {
		if r.ArtifactType != ociEmptyConfig {
			continue
		}
		data, mt, err := c.Manifest(ctx, repo, r.Digest.String())
		if err != nil {
			return nil, err
		}
		d, err := ReferrerDescriptor(data, mt)
		if err != nil {
			return nil, fmt.Errorf("referrer %s/%s@%s: %w", c.host, repo, r.Digest, err)
		}
		refs[i].ArtifactType = d.ArtifactType
		if refs[i].Annotations == nil {
			refs[i].Annotations = d.Annotations
		}
	}
	return refs, nil
}

// fallbackReferrers reads the referrers tag schema index of d. No tag is no
// referrers; a tag that names something other than an OCI index (the
// subject itself, tagged by digest) is none either.
func (c *Client) fallbackReferrers(ctx context.Context, repo string, d digest.Digest) ([]v1.Descriptor, error) {
	idx, err := c.fallbackIndex(ctx, repo, d)
	if errors.Is(err, ErrFallbackTagTaken) {
		return []v1.Descriptor{}, nil
	}
	if err != nil || idx == nil {
		return []v1.Descriptor{}, err
	}
	return idx.Manifests, nil
}

// fallbackIndex is the referrers tag schema index of d in repo: nil when
// the tag does not exist, ErrFallbackTagTaken when it names something else.
func (c *Client) fallbackIndex(ctx context.Context, repo string, d digest.Digest) (*v1.IndexManifest, error) {
	tag := FallbackTag(d)
	// A HEAD first: most images have no referrers, and a HEAD is what
	// registries that limit pulls (Docker Hub) do not count.
	hd, hmt, err := c.Head(ctx, repo, tag)
	if IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if hd == d || (hmt != "" && hmt != ociIndex) {
		return nil, fmt.Errorf("%s/%s:%s (%s): %w", c.host, repo, tag, hmt, ErrFallbackTagTaken)
	}
	data, mt, err := c.Manifest(ctx, repo, tag)
	if IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if mt != ociIndex || digest.FromBytes(data) == d {
		return nil, fmt.Errorf("%s/%s:%s (%s): %w", c.host, repo, tag, mt, ErrFallbackTagTaken)
	}
	var idx v1.IndexManifest
	if err := json.Unmarshal(data, &idx); err != nil {
		return nil, fmt.Errorf("referrers index %s/%s:%s: %w", c.host, repo, tag, err)
	}
	if idx.Manifests == nil {
		idx.Manifests = []v1.Descriptor{}
	}
	return &idx, nil
}

// AddFallbackReferrers maintains the referrers tag schema index of subject
// in repo as the distribution spec asks of a client pushing to a registry
// without the referrers API: the index there is read, the descriptors it
// lacks are added (those it has are kept as they are), and the index is
// PUT back under the tag, only when it changed. A tag that names something
// else is left alone: ErrFallbackTagTaken.
func (c *Client) AddFallbackReferrers(ctx context.Context, repo string, subject digest.Digest, add []v1.Descriptor) error {
	idx, err := c.fallbackIndex(ctx, repo, subject)
	if err != nil {
		return err
	}
	if idx == nil {
		idx = &v1.IndexManifest{SchemaVersion: 2, MediaType: ociIndex, Manifests: []v1.Descriptor{}}
	}
	changed := false
	for _, a := range add {
		if !slices.ContainsFunc(idx.Manifests, func(m v1.Descriptor) bool { return m.Digest == a.Digest }) {
			idx.Manifests = append(idx.Manifests, a)
			changed = true
		}
	}
	if !changed {
		return nil
	}
	data, err := json.Marshal(idx)
	if err != nil {
		return err
	}
	return c.PutManifest(ctx, repo, FallbackTag(subject), ociIndex, data)
}

// ReferrerDescriptor is the descriptor a referrers list gives manifest data
// (media type mt): its artifactType, else its config's media type, and its
// annotations, as the distribution spec has a registry build it.
func ReferrerDescriptor(data []byte, mt string) (v1.Descriptor, error) {
	var m struct {
		MediaType    string            `json:"mediaType"`
		ArtifactType string            `json:"artifactType"`
		Config       *v1.Descriptor    `json:"config"`
		Annotations  map[string]string `json:"annotations"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return v1.Descriptor{}, err
	}
	h, err := v1.NewHash(digest.FromBytes(data).String())
	if err != nil {
		return v1.Descriptor{}, err
	}
	if mt == "" {
		mt = m.MediaType
	}
	at := m.ArtifactType
	if at == "" && m.Config != nil {
		at = string(m.Config.MediaType)
	}
	return v1.Descriptor{MediaType: types.MediaType(mt), Size: int64(len(data)), Digest: h, ArtifactType: at, Annotations: m.Annotations}, nil
}

// filterReferrers keeps the referrers of artifactType (all when "").
func filterReferrers(refs []v1.Descriptor, artifactType string) []v1.Descriptor {
	if artifactType == "" {
		return refs
	}
	out := []v1.Descriptor{}
	for _, r := range refs {
		if r.ArtifactType == artifactType {
			out = append(out, r)
		}
	}
	return out
}

// nextLink is the absolute URL of the Link header's rel="next", "" when
// none. A next page elsewhere than the registry is refused: the client's
// credentials are for it alone.
func (c *Client) nextLink(resp *http.Response) (string, error) {
	for _, link := range resp.Header.Values("Link") {
		for _, part := range strings.Split(link, ",") {
			target, params, ok := strings.Cut(strings.TrimSpace(part), ";")
			if !ok || !strings.Contains(strings.ReplaceAll(params, " ", ""), `rel="next"`) {
				continue
			}
			u, err := url.Parse(strings.Trim(strings.TrimSpace(target), "<>"))
			if err != nil {
				return "", fmt.Errorf("%s: the registry's next page link %q: %w", redact(resp.Request.URL), target, err)
			}
			next := resp.Request.URL.ResolveReference(u)
			if next.Host != c.host {
				return "", fmt.Errorf("%s: the registry sends the next page to %s, another host: not followed", redact(resp.Request.URL), next.Host)
			}
			return next.String(), nil
		}
	}
	return "", nil
}
