package imagebuilder

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Artifact types of the referrers gapmirror's tests attach to images.
const (
	SigstoreBundleType = "application/vnd.dev.sigstore.bundle.v0.3+json"
	InTotoType         = "application/vnd.in-toto+json"
	SPDXType           = "application/spdx+json"
	NotationType       = "application/vnd.cncf.notary.signature"
)

// Referrer builds an OCI 1.1 artifact manifest attached to subject: its
// artifactType, the empty config, one layer of payload (of layerType, or
// artifactType when ""), as cosign v3, notation and SBOM tools push them.
func Referrer(subject ocispec.Descriptor, artifactType, layerType string, payload []byte, annotations map[string]string) (*Image, error) {
	if layerType == "" {
		layerType = artifactType
	}
	layer := newBlob(layerType, payload)
	cfg := newBlob(ocispec.MediaTypeEmptyJSON, []byte("{}"))
	subj := ocispec.Descriptor{MediaType: subject.MediaType, Digest: subject.Digest, Size: subject.Size}
	m := ocispec.Manifest{
		MediaType:    ocispec.MediaTypeImageManifest,
		ArtifactType: artifactType,
		Config:       cfg.Descriptor(),
		Layers:       []ocispec.Descriptor{layer.Descriptor()},
		Subject:      &subj,
		Annotations:  annotations,
	}
	m.SchemaVersion = 2
	data, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return &Image{Manifest: data, MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(data), Config: cfg, Layers: []Blob{layer}}, nil
}

// PushReferrer uploads referrer img (built by Referrer) into repo by digest
// and, where the registry has no referrers API (404 on it), adds it to the
// referrers tag schema index of its subject as oras and cosign do: the
// index there is read, the referrer appended, the index PUT back.
func PushReferrer(ctx context.Context, t Target, repo string, img *Image) error {
	p, err := newPusher(t)
	if err != nil {
		return err
	}
	if err := p.pushImage(ctx, repo, "", img); err != nil {
		return err
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(img.Manifest, &m); err != nil || m.Subject == nil {
		return fmt.Errorf("pushing referrer %s: not a manifest with a subject", img.Digest)
	}
	subject := m.Subject.Digest
	resp, err := p.do(ctx, http.MethodGet, p.endpoint("/v2/"+repo+"/referrers/"+subject.String()), nil, nil)
	if err != nil {
		return err
	}
	drain(resp)
	if resp.StatusCode != http.StatusNotFound {
		return nil // the registry lists it
	}
	tag := subject.Algorithm().String() + "-" + subject.Encoded()
	idx := ocispec.Index{MediaType: ocispec.MediaTypeImageIndex, Manifests: []ocispec.Descriptor{}}
	idx.SchemaVersion = 2
	resp, err = p.do(ctx, http.MethodGet, p.endpoint("/v2/"+repo+"/manifests/"+tag), nil, http.Header{"Accept": {ocispec.MediaTypeImageIndex}})
	if err != nil {
		return err
	}
	if resp.StatusCode == http.StatusOK {
		err = json.NewDecoder(resp.Body).Decode(&idx)
		drain(resp)
		if err != nil {
			return fmt.Errorf("referrers index %s: %w", tag, err)
		}
	} else {
		drain(resp)
	}
	idx.Manifests = append(idx.Manifests, ocispec.Descriptor{MediaType: img.MediaType, Digest: img.Digest, Size: int64(len(img.Manifest)), ArtifactType: m.ArtifactType, Annotations: m.Annotations})
	data, err := json.Marshal(idx)
	if err != nil {
		return err
	}
	return p.pushManifest(ctx, repo, tag, ocispec.MediaTypeImageIndex, data)
}
