package cosigntest

import (
	"encoding/json"
	"fmt"

	intoto "github.com/in-toto/attestation/go/v1"
	"github.com/opencontainers/go-digest"
	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	sgbundle "github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/sign"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

// Media and predicate types of what cosign v3 attaches.
const (
	// bundleMediaType is a Sigstore bundle v0.3: the artifactType of the
	// referrer manifest cosign pushes and the media type of its one layer.
	bundleMediaType = "application/vnd.dev.sigstore.bundle.v0.3+json"
	// inTotoPayloadType is the DSSE payload type of an in-toto statement.
	inTotoPayloadType = "application/vnd.in-toto+json"
	// SignPredicateType is the predicate of the statement `cosign sign`
	// signs (pkg/types.CosignSignPredicateType).
	SignPredicateType = "https://sigstore.dev/cosign/sign/v1"
	// SLSAProvenanceType is the predicate of the attestation fixture.
	SLSAProvenanceType = "https://slsa.dev/provenance/v1"
	// spdxMediaType is an SPDX JSON SBOM (`oras attach --artifact-type`).
	spdxMediaType = "application/spdx+json"
	// notationSignatureType is the artifactType of a Notation signature.
	notationSignatureType = "application/vnd.cncf.notary.signature"
	// notationJWSMediaType is the media type of its signature envelope.
	notationJWSMediaType = "application/jose+json"
)

// Statement is the in-toto v1 statement whose one subject is the image
// digest subject, with predicate (nil: empty), marshalled as cosign
// marshals it (protojson).
func Statement(subject digest.Digest, predicateType string, predicate map[string]any) ([]byte, error) {
	pred, err := structpb.NewStruct(predicate)
	if err != nil {
		return nil, fmt.Errorf("predicate: %w", err)
	}
	st := &intoto.Statement{
		Type:          intoto.StatementTypeUri,
		Subject:       []*intoto.ResourceDescriptor{{Digest: map[string]string{string(subject.Algorithm()): subject.Encoded()}}},
		PredicateType: predicateType,
		Predicate:     pred,
	}
	return protojson.Marshal(st)
}

// SignStatement signs statement (an in-toto statement) with key into a
// Sigstore bundle v0.3 holding a DSSE envelope, the key's hint as
// verification material and no transparency log entry or timestamp (what
// `cosign sign --key` builds where no Rekor is reachable), as JSON.
func SignStatement(key *Key, statement []byte) ([]byte, error) {
	pb, err := sign.Bundle(&sign.DSSEData{Data: statement, PayloadType: inTotoPayloadType}, key, sign.BundleOptions{})
	if err != nil {
		return nil, fmt.Errorf("signing the bundle: %w", err)
	}
	return (&sgbundle.Bundle{Bundle: pb}).MarshalJSON()
}

// SignBundle is the bundle `cosign sign` attaches to the image manifest
// subject: the statement of SignPredicateType about subject, signed by key.
func SignBundle(key *Key, subject digest.Digest) ([]byte, error) {
	st, err := Statement(subject, SignPredicateType, nil)
	if err != nil {
		return nil, err
	}
	return SignStatement(key, st)
}

// TamperPayload returns bundle with the DSSE payload's subject digest
// replaced by other, its signature left as it was: what an attacker who
// re-targets a signature to another image would publish.
func TamperPayload(bundle []byte, other digest.Digest) ([]byte, error) {
	return editBundle(bundle, func(b *protobundle.Bundle) error {
		env := b.GetDsseEnvelope()
		if env == nil {
			return fmt.Errorf("the bundle holds no DSSE envelope")
		}
		var st map[string]any
		if err := json.Unmarshal(env.Payload, &st); err != nil {
			return fmt.Errorf("the DSSE payload: %w", err)
		}
		st["subject"] = []map[string]any{{"digest": map[string]string{string(other.Algorithm()): other.Encoded()}}}
		payload, err := json.Marshal(st)
		if err != nil {
			return err
		}
		env.Payload = payload
		return nil
	})
}

// TamperSignature returns bundle with one bit of its DSSE signature flipped.
func TamperSignature(bundle []byte) ([]byte, error) {
	return editBundle(bundle, func(b *protobundle.Bundle) error {
		env := b.GetDsseEnvelope()
		if env == nil || len(env.Signatures) == 0 || len(env.Signatures[0].Sig) == 0 {
			return fmt.Errorf("the bundle holds no DSSE signature")
		}
		sig := append([]byte(nil), env.Signatures[0].Sig...)
		sig[len(sig)/2] ^= 0x01
		env.Signatures[0].Sig = sig
		return nil
	})
}

func editBundle(data []byte, edit func(*protobundle.Bundle) error) ([]byte, error) {
	var b sgbundle.Bundle
	b.Bundle = new(protobundle.Bundle)
	if err := protojson.Unmarshal(data, b.Bundle); err != nil {
		return nil, fmt.Errorf("reading the bundle: %w", err)
	}
	if err := edit(b.Bundle); err != nil {
		return nil, err
	}
	return b.MarshalJSON()
}
