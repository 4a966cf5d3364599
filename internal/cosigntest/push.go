package cosigntest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// Push uploads r's blobs and manifest into repo on t, by digest. Where the
// registry has no referrers API (tagSchema), r is then added to the
// referrers tag schema index of its subject, repo:sha256-<hex>, as the
// distribution spec asks of a client: the index there is read and r merged
// into it, never replacing what other clients listed, never listing r
// twice. (imagebuilder.PushReferrer decides by asking the registry.) A
// registry with the API is registrytest.StartReferrersAPI; distribution
// (registrytest.Start) has none.
func Push(ctx context.Context, t imagebuilder.Target, repo string, r *Referrer, tagSchema bool) error {
	for _, b := range r.Blobs {
		if err := imagebuilder.PushBlob(ctx, t, repo, b); err != nil {
			return err
		}
	}
	if err := imagebuilder.PushManifest(ctx, t, repo, r.Digest.String(), ocispec.MediaTypeImageManifest, r.Manifest); err != nil {
		return err
	}
	if !tagSchema {
		return nil
	}
	tag := tagSchemaTag(r.Subject)
	idx, err := fetchIndex(ctx, t, repo, tag)
	if err != nil {
		return err
	}
	for _, m := range idx.Manifests {
		if m.Digest == r.Digest {
			return nil
		}
	}
	idx.Manifests = append(idx.Manifests, r.Descriptor())
	data, err := json.Marshal(idx)
	if err != nil {
		return err
	}
	return imagebuilder.PushManifest(ctx, t, repo, tag, ocispec.MediaTypeImageIndex, data)
}

// PushAll is Push for every referrer of refs, in order.
func PushAll(ctx context.Context, t imagebuilder.Target, repo string, refs []*Referrer, tagSchema bool) error {
	for _, r := range refs {
		if err := Push(ctx, t, repo, r, tagSchema); err != nil {
			return fmt.Errorf("referrer %s (%s): %w", r.Digest, r.ArtifactType, err)
		}
	}
	return nil
}

// tagSchemaTag is the tag of subject's referrers tag schema index:
// "<alg>-<hex>".
func tagSchemaTag(subject ocispec.Descriptor) string {
	return string(subject.Digest.Algorithm()) + "-" + subject.Digest.Encoded()
}

// fetchIndex reads repo:tag on t as an image index, or an empty index
// when there is none. Basic credentials only: the registries the tests
// write tag schema indexes to take them or none.
func fetchIndex(ctx context.Context, t imagebuilder.Target, repo, tag string) (ocispec.Index, error) {
	idx := ocispec.Index{MediaType: ocispec.MediaTypeImageIndex, Manifests: []ocispec.Descriptor{}}
	idx.SchemaVersion = 2
	base := t.URL
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+"/v2/"+repo+"/manifests/"+tag, nil)
	if err != nil {
		return idx, err
	}
	req.Header.Set("Accept", ocispec.MediaTypeImageIndex)
	if t.Username != "" {
		req.SetBasicAuth(t.Username, t.Password)
	}
	client := t.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return idx, fmt.Errorf("reading the referrers index %s:%s: %w", repo, tag, err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusNotFound:
		return idx, nil
	case http.StatusOK:
	default:
		return idx, fmt.Errorf("reading the referrers index %s:%s: %s", repo, tag, resp.Status)
	}
	var got ocispec.Index
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		return idx, fmt.Errorf("the referrers index %s:%s: %w", repo, tag, err)
	}
	if got.MediaType != ocispec.MediaTypeImageIndex {
		return idx, fmt.Errorf("%s:%s is a %q, not a referrers index: the tag schema's tag is taken", repo, tag, got.MediaType)
	}
	return got, nil
}

// startReferrersRegistry starts a registry with the OCI referrers API for
// the life of the test and returns its host:port: registrytest's
// StartReferrersAPI, kept under this name for the tests written against it.
func startReferrersRegistry(t testing.TB) string {
	t.Helper()
	return registrytest.StartReferrersAPI(t).Host()
}
