// Package cosigntest builds, for tests, what cosign v3 and its neighbours
// attach to an image as OCI 1.1 referrers: a Sigstore bundle (v0.3) signing
// the image digest as `cosign sign` does by default, an in-toto attestation
// in a bundle as `cosign attest` does, an SPDX SBOM and a Notation-typed
// signature; and pushes them to a registry with the referrers API or, for
// one without it (distribution), with the referrers tag schema index.
//
// Bundles are built and signed by sigstore-go with real ECDSA P-256 keys
// (cosign's default). Keys are derived from a name, so a test's keys are the
// same on every run; an ECDSA signature is not (the signer draws a fresh
// nonce), so a bundle's bytes and digest differ between runs.
package cosigntest

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/pem"
	"fmt"

	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	"github.com/sigstore/sigstore-go/pkg/sign"
)

// Key is an ECDSA P-256 signing key, as `cosign generate-key-pair` makes,
// usable by sigstore-go's signer (sign.Keypair).
type Key struct {
	priv *ecdsa.PrivateKey
	hint []byte
}

var _ sign.Keypair = (*Key)(nil)

// NewKey derives a P-256 key from name: the same name gives the same key.
func NewKey(name string) *Key {
	for i := uint32(0); ; i++ {
		seed := sha256.New()
		seed.Write([]byte("gapmirror cosigntest key\x00" + name + "\x00"))
		_ = binary.Write(seed, binary.BigEndian, i)
		// A scalar out of the curve's range (odds 2^-32) is skipped.
		priv, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), seed.Sum(nil))
		if err != nil {
			continue
		}
		der, err := x509.MarshalPKIXPublicKey(&priv.PublicKey)
		if err != nil {
			panic(err) // a P-256 public key always marshals
		}
		// sigstore-go's default hint: the base64 SHA-256 of the PKIX key.
		sum := sha256.Sum256(der)
		return &Key{priv: priv, hint: []byte(base64.StdEncoding.EncodeToString(sum[:]))}
	}
}

// Public is the key's public half.
func (k *Key) Public() *ecdsa.PublicKey { return &k.priv.PublicKey }

// PublicKeyPEM is the public key as cosign.pub holds it and a containers
// policy's keyPath / keyData expect.
func (k *Key) PublicKeyPEM() []byte {
	der, err := x509.MarshalPKIXPublicKey(&k.priv.PublicKey)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// GetHashAlgorithm implements sign.Keypair.
func (k *Key) GetHashAlgorithm() protocommon.HashAlgorithm {
	return protocommon.HashAlgorithm_SHA2_256
}

// GetSigningAlgorithm implements sign.Keypair.
func (k *Key) GetSigningAlgorithm() protocommon.PublicKeyDetails {
	return protocommon.PublicKeyDetails_PKIX_ECDSA_P256_SHA_256
}

// GetHint implements sign.Keypair.
func (k *Key) GetHint() []byte { return k.hint }

// GetKeyAlgorithm implements sign.Keypair.
func (k *Key) GetKeyAlgorithm() string { return "ECDSA" }

// GetPublicKey implements sign.Keypair.
func (k *Key) GetPublicKey() crypto.PublicKey { return k.priv.Public() }

// GetPublicKeyPem implements sign.Keypair.
func (k *Key) GetPublicKeyPem() (string, error) { return string(k.PublicKeyPEM()), nil }

// SignData implements sign.Keypair: an ASN.1 ECDSA signature over the
// SHA-256 of data, and that digest.
func (k *Key) SignData(_ context.Context, data []byte) ([]byte, []byte, error) {
	sum := sha256.Sum256(data)
	sig, err := k.priv.Sign(rand.Reader, sum[:], crypto.SHA256)
	if err != nil {
		return nil, nil, fmt.Errorf("signing: %w", err)
	}
	return sig, sum[:], nil
}
