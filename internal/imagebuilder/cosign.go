package imagebuilder

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Cosign's media type and annotation for a simple-signing signature layer.
const (
	cosignSimpleSigningMediaType = "application/vnd.dev.cosign.simplesigning.v1+json"
	cosignSignatureAnnotation    = "dev.cosignproject.cosign/signature"
)

// CosignSignature builds the sigstore signature image cosign pushes as
// <repo>:sha256-<hex>.sig for manifest signed of dockerReference
// (host/repo): one simple-signing payload layer signed with key (ECDSA
// over its SHA-256), the signature in the layer's annotation. No Rekor
// bundle: verifiers that want one must be told not to.
func CosignSignature(key *ecdsa.PrivateKey, dockerReference string, signed digest.Digest) (*Image, error) {
	payload, err := json.Marshal(map[string]any{
		"critical": map[string]any{
			"identity": map[string]string{"docker-reference": dockerReference},
			"image":    map[string]string{"docker-manifest-digest": signed.String()},
			"type":     "cosign container image signature",
		},
		"optional": nil,
	})
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(payload)
	sig, err := ecdsa.SignASN1(rand.Reader, key, sum[:])
	if err != nil {
		return nil, fmt.Errorf("signing %s: %w", signed, err)
	}
	layer := newBlob(cosignSimpleSigningMediaType, payload)
	config, err := json.Marshal(map[string]any{
		"architecture": "", "os": "", "created": "0001-01-01T00:00:00Z", "config": map[string]any{},
		"rootfs":  map[string]any{"type": "layers", "diff_ids": []string{layer.Digest.String()}},
		"history": []map[string]string{{"created": "0001-01-01T00:00:00Z"}},
	})
	if err != nil {
		return nil, err
	}
	cfg := newBlob(ocispec.MediaTypeImageConfig, config)
	ld := layer.Descriptor()
	ld.Annotations = map[string]string{cosignSignatureAnnotation: base64.StdEncoding.EncodeToString(sig)}
	m := ocispec.Manifest{MediaType: ocispec.MediaTypeImageManifest, Config: cfg.Descriptor(), Layers: []ocispec.Descriptor{ld}}
	m.SchemaVersion = 2
	data, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return &Image{Manifest: data, MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(data), Config: cfg, Layers: []Blob{layer}}, nil
}
