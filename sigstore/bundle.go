package sigstore

import (
	"crypto"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	sgbundle "github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/signature"
)

// Media and predicate types of the Sigstore bundles cosign v3 attaches.
const (
	// bundleMediaType is the artifactType of the referrer manifest cosign
	// v3 pushes for a signature or attestation, and of its one layer.
	bundleMediaType = "application/vnd.dev.sigstore.bundle.v0.3+json"
	// signPredicateType is the predicate of the in-toto statement
	// `cosign sign` signs: the image digest is signed, nothing more.
	signPredicateType = "https://sigstore.dev/cosign/sign/v1"
	// maxBundle bounds the bundle read from a registry.
	maxBundle = 1 << 20
)

// errBundleRefused marks a bundle that does not verify.
var errBundleRefused = errors.New("cosign bundle refused")

// offline is what bundle verification does not do, said in refusals and
// docs: an air gap reaches no Rekor and no timestamp authority.
const offline = "verified offline with the policy's key: no transparency log or timestamp authority is consulted (as cosign verify --insecure-ignore-tlog)"

// publicKey is a key the policy trusts and where it says so, for errors.
type publicKey struct {
	Key crypto.PublicKey
	// From is where the policy gives it: "keyPath /etc/pki/cosign.pub",
	// "keyData".
	From string
}

// verifyBundle checks that bundle, a Sigstore bundle's JSON, is a cosign
// signature of the image manifest subject by one of keys: its DSSE
// envelope verifies with the key and holds an in-toto statement of
// predicate signPredicateType whose subjects include subject. Verification
// is offline: a transparency log entry or timestamp the bundle holds is
// not checked (Offline). The error says why the bundle is refused.
func verifyBundle(bundle []byte, subject digest.Digest, keys []publicKey) error {
	if len(keys) == 0 {
		return fmt.Errorf("%w: the policy gives no key to verify it with", errBundleRefused)
	}
	if err := subject.Validate(); err != nil {
		return fmt.Errorf("%w: subject %q: %w", errBundleRefused, subject, err)
	}
	want, err := hex.DecodeString(subject.Encoded())
	if err != nil {
		return fmt.Errorf("%w: subject %s: %w", errBundleRefused, subject, err)
	}
	var b sgbundle.Bundle
	if err := b.UnmarshalJSON(bundle); err != nil {
		return fmt.Errorf("%w: not a Sigstore bundle: %w", errBundleRefused, err)
	}
	if b.GetDsseEnvelope() == nil {
		return fmt.Errorf("%w: the bundle holds a message signature, not the DSSE envelope cosign sign writes for an image", errBundleRefused)
	}
	var why []string
	for _, k := range keys {
		err := verifyWithKey(&b, k.Key, subject, want)
		if err == nil {
			return nil
		}
		var wrong *statementError
		if errors.As(err, &wrong) {
			// Signed by this key: what it signs is the answer.
			return fmt.Errorf("%w: %w", errBundleRefused, err)
		}
		why = append(why, fmt.Sprintf("%s: %v", k.From, err))
	}
	return fmt.Errorf("%w: its signature does not verify with the policy's key: the bundle was changed after signing, or another key signed it (%s); %s", errBundleRefused, strings.Join(why, "; "), offline)
}

// statementError is a bundle whose signature verifies but whose statement
// is not a signature of the image.
type statementError struct{ msg string }

func (e *statementError) Error() string { return e.msg }

func verifyWithKey(b *sgbundle.Bundle, key crypto.PublicKey, subject digest.Digest, want []byte) error {
	v, err := signature.LoadVerifier(key, crypto.SHA256)
	if err != nil {
		return fmt.Errorf("the key: %w", err)
	}
	// The policy's key, whatever key hint the bundle carries (as cosign
	// verify --key), valid at any time: a key has no validity period in a
	// containers policy.
	trusted := root.NewTrustedPublicKeyMaterial(func(string) (root.TimeConstrainedVerifier, error) {
		return root.NewExpiringKey(v, time.Time{}, time.Time{}), nil
	})
	verifier, err := verify.NewVerifier(trusted, verify.WithNoObserverTimestamps())
	if err != nil {
		return err
	}
	// The signature first, over the whole statement; what it says next.
	res, err := verifier.Verify(b, verify.NewPolicy(verify.WithoutArtifactUnsafe(), verify.WithKey()))
	if err != nil {
		return err
	}
	st := res.Statement
	if st == nil {
		return &statementError{"the bundle's envelope holds no in-toto statement"}
	}
	if st.GetPredicateType() != signPredicateType {
		return &statementError{fmt.Sprintf("an attestation of predicate %s, not a cosign signature (%s)", st.GetPredicateType(), signPredicateType)}
	}
	var named []string
	for _, s := range st.GetSubject() {
		for alg, hexd := range s.GetDigest() {
			if alg == string(subject.Algorithm()) && strings.EqualFold(hexd, hex.EncodeToString(want)) {
				return nil
			}
			named = append(named, alg+":"+hexd)
		}
	}
	return &statementError{fmt.Sprintf("it signs %s, not this image's manifest %s", strings.Join(named, ", "), subject)}
}
