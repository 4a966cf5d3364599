package cosigntest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/gapmirror/gapmirror/internal/imagebuilder"
)

// created is the creation time the fixtures' annotations carry: fixed, so
// a referrer's manifest depends on its content alone.
var created = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// Referrer is an OCI 1.1 artifact manifest whose subject is an image (or
// another referrer), with every blob it names.
type Referrer struct {
	// Manifest is the manifest JSON, byte for byte as pushed.
	Manifest []byte
	Digest   digest.Digest
	// ArtifactType is the manifest's artifactType.
	ArtifactType string
	// Annotations are the manifest's: a referrers index entry repeats them.
	Annotations map[string]string
	Subject     ocispec.Descriptor
	// Blobs are the empty config, then the layers.
	Blobs []imagebuilder.Blob
}

// Descriptor is the referrer as a referrers index lists it: with its
// artifactType and annotations.
func (r *Referrer) Descriptor() ocispec.Descriptor {
	return ocispec.Descriptor{
		MediaType:    ocispec.MediaTypeImageManifest,
		Digest:       r.Digest,
		Size:         int64(len(r.Manifest)),
		ArtifactType: r.ArtifactType,
		Annotations:  r.Annotations,
	}
}

// layer is the content of the referrer's first layer (a bundle's JSON).
func (r *Referrer) layer() []byte {
	rc := r.Blobs[1].Open()
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		panic(err) // an in-memory blob
	}
	return data
}

func b64(data []byte) string { return base64.RawURLEncoding.EncodeToString(data) }

// newReferrer builds the manifest cosign's WriteReferrer pushes (and oras
// attach, for other artifact types): artifactType, the empty config, one
// layer of layerType holding content, subject, annotations.
func newReferrer(subject ocispec.Descriptor, artifactType, layerType string, content []byte, annotations map[string]string) (*Referrer, error) {
	img, err := imagebuilder.Referrer(subject, artifactType, layerType, content, annotations)
	if err != nil {
		return nil, err
	}
	subj := ocispec.Descriptor{MediaType: subject.MediaType, Digest: subject.Digest, Size: subject.Size}
	return &Referrer{
		Manifest: img.Manifest, Digest: img.Digest, ArtifactType: artifactType,
		Annotations: annotations, Subject: subj, Blobs: img.Blobs(),
	}, nil
}

// BundleReferrer is the referrer cosign v3 pushes for bundle
// (WriteAttestationNewBundleFormat): artifactType and layer the bundle
// media type, annotated with the statement's predicate type.
func BundleReferrer(subject ocispec.Descriptor, bundle []byte, predicateType string) (*Referrer, error) {
	return newReferrer(subject, bundleMediaType, bundleMediaType, bundle, map[string]string{
		"org.opencontainers.image.created":  created.Format(time.RFC3339),
		"dev.sigstore.bundle.content":       "dsse-envelope",
		"dev.sigstore.bundle.predicateType": predicateType,
	})
}

// Signature is what `cosign sign --key` (v3, the default bundle format)
// attaches to subject: a bundle signing its digest with key.
func Signature(key *Key, subject ocispec.Descriptor) (*Referrer, error) {
	b, err := SignBundle(key, subject.Digest)
	if err != nil {
		return nil, err
	}
	return BundleReferrer(subject, b, SignPredicateType)
}

// Attestation is what `cosign attest --key --type slsaprovenance1` (v3)
// attaches to subject: a bundle signing an in-toto statement with a SLSA
// provenance predicate naming builder.
func Attestation(key *Key, subject ocispec.Descriptor, builder string) (*Referrer, error) {
	st, err := Statement(subject.Digest, SLSAProvenanceType, map[string]any{
		"buildDefinition": map[string]any{"buildType": "https://gapmirror.example/test/v1", "externalParameters": map[string]any{}},
		"runDetails":      map[string]any{"builder": map[string]any{"id": builder}},
	})
	if err != nil {
		return nil, err
	}
	b, err := SignStatement(key, st)
	if err != nil {
		return nil, err
	}
	return BundleReferrer(subject, b, SLSAProvenanceType)
}

// SBOM is an SPDX 2.3 JSON SBOM of subject, named name, attached as
// `oras attach --artifact-type application/spdx+json` does.
func SBOM(subject ocispec.Descriptor, name string) (*Referrer, error) {
	doc, err := json.Marshal(map[string]any{
		"spdxVersion":       "SPDX-2.3",
		"dataLicense":       "CC0-1.0",
		"SPDXID":            "SPDXRef-DOCUMENT",
		"name":              name,
		"documentNamespace": "https://gapmirror.example/spdx/" + subject.Digest.Encoded(),
		"creationInfo":      map[string]any{"created": created.Format(time.RFC3339), "creators": []string{"Tool: gapmirror-cosigntest"}},
		"packages": []map[string]any{{
			"SPDXID": "SPDXRef-Package", "name": name, "downloadLocation": "NOASSERTION",
			"checksums": []map[string]string{{"algorithm": "SHA256", "checksumValue": subject.Digest.Encoded()}},
		}},
	})
	if err != nil {
		return nil, err
	}
	return newReferrer(subject, spdxMediaType, spdxMediaType, doc, map[string]string{
		"org.opencontainers.image.created": created.Format(time.RFC3339),
	})
}

// notationSignature is a referrer typed as a Notation signature of subject
// (artifactType application/vnd.cncf.notary.signature, a JWS layer). Its
// envelope is a well-formed JWS whose payload names subject, but it is not
// signed by a Notation certificate: gapmirror mirrors Notation signatures
// and does not verify them.
func notationSignature(subject ocispec.Descriptor) (*Referrer, error) {
	payload, err := json.Marshal(map[string]any{"targetArtifact": ocispec.Descriptor{MediaType: subject.MediaType, Digest: subject.Digest, Size: subject.Size}})
	if err != nil {
		return nil, err
	}
	env, err := json.Marshal(map[string]any{
		"payload":   b64(payload),
		"protected": b64([]byte(`{"alg":"ES256","cty":"application/vnd.cncf.notary.payload.v1+json"}`)),
		"header":    map[string]any{"x5c": []string{}},
		"signature": b64([]byte("not a signature: test fixture " + subject.Digest.Encoded())),
	})
	if err != nil {
		return nil, err
	}
	return newReferrer(subject, notationSignatureType, notationJWSMediaType, env, map[string]string{
		"io.cncf.notary.x509chain.thumbprint#S256": `[]`,
		"org.opencontainers.image.created":         created.Format(time.RFC3339),
	})
}

// All is the set the referrer tests use for subject: a cosign signature
// and a SLSA attestation signed by key, an SPDX SBOM, a Notation-typed
// signature, and a cosign signature of the SBOM (a referrer of a referrer).
func All(key *Key, subject ocispec.Descriptor) ([]*Referrer, error) {
	sig, err := Signature(key, subject)
	if err != nil {
		return nil, fmt.Errorf("signature: %w", err)
	}
	att, err := Attestation(key, subject, "https://gapmirror.example/builder")
	if err != nil {
		return nil, fmt.Errorf("attestation: %w", err)
	}
	sbom, err := SBOM(subject, "app")
	if err != nil {
		return nil, fmt.Errorf("sbom: %w", err)
	}
	notation, err := notationSignature(subject)
	if err != nil {
		return nil, fmt.Errorf("notation: %w", err)
	}
	sbomSig, err := Signature(key, sbom.Descriptor())
	if err != nil {
		return nil, fmt.Errorf("signature of the sbom: %w", err)
	}
	return []*Referrer{sig, att, sbom, notation, sbomSig}, nil
}
