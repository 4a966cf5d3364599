// Package archivesign signs the index of a gapmirror archive, which names
// every chunk's size and sha256 and every blob's digest, with a Sigstore
// bundle made offline with a key pair in cosign's format, and checks such a
// signature on the air-gapped side before the archive is read.
//
// The bundle is a file beside the chunks, named after the archive's first
// chunk (mirror_000001.tar: mirror_000001.sigstore.json; bundleName). It is
// the bundle `cosign sign-blob --new-bundle-format --key` writes for the
// index's bytes (gapmirror-index.json in the first chunk), without a
// transparency log entry, so `cosign verify-blob --bundle … --key …
// --insecure-ignore-tlog` checks it too.
package archivesign

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"os"

	"github.com/secure-systems-lab/go-securesystemslib/encrypted"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
)

// PEM block types of private keys, as cosign names them.
const (
	// sigstorePrivateKey is what cosign generate-key-pair writes (and this package).
	sigstorePrivateKey = "ENCRYPTED SIGSTORE PRIVATE KEY"
	// cosignPrivateKey is what older cosign releases wrote; same encryption.
	cosignPrivateKey = "ENCRYPTED COSIGN PRIVATE KEY"
	pkcs8PrivateKey  = "PRIVATE KEY"
	ecPrivateKey     = "EC PRIVATE KEY"
)

// GenerateKeyPair makes an ECDSA P-256 key pair as cosign generate-key-pair
// does: the private key PKCS#8, encrypted with password (scrypt and NaCl
// secretbox, go-securesystemslib's encrypted package), in an
// "ENCRYPTED SIGSTORE PRIVATE KEY" PEM block; the public key a PKIX
// "PUBLIC KEY" PEM block.
func GenerateKeyPair(password []byte) (privatePEM, publicPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating a key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the private key: %w", err)
	}
	sealed, err := encrypted.Encrypt(der, password)
	if err != nil {
		return nil, nil, fmt.Errorf("encrypting the private key: %w", err)
	}
	pub, err := cryptoutils.MarshalPublicKeyToPEM(key.Public())
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the public key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: sigstorePrivateKey, Bytes: sealed}), pub, nil
}

// Encrypted says whether the PEM private key needs a password.
func Encrypted(keyPEM []byte) bool {
	b, _ := pem.Decode(keyPEM)
	return b != nil && (b.Type == sigstorePrivateKey || b.Type == cosignPrivateKey)
}

// parsePrivateKey reads a private key file's content: cosign's encrypted
// keys (with password), or an unencrypted PKCS#8 or EC PEM key. path is
// for messages only.
func parsePrivateKey(path string, keyPEM, password []byte) (crypto.Signer, error) {
	b, _ := pem.Decode(keyPEM)
	if b == nil {
		return nil, fmt.Errorf("%s is not a PEM private key: give the cosign.key gapmirror generate-key-pair or cosign generate-key-pair wrote", path)
	}
	var der []byte
	switch b.Type {
	case sigstorePrivateKey, cosignPrivateKey:
		var err error
		if der, err = encrypted.Decrypt(b.Bytes, password); err != nil {
			return nil, fmt.Errorf("%s cannot be decrypted (%v): give the password it was made with in COSIGN_PASSWORD or at the prompt", path, err)
		}
	case pkcs8PrivateKey:
		der = b.Bytes
	case ecPrivateKey:
		k, err := x509.ParseECPrivateKey(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: the EC private key cannot be read: %w", path, err)
		}
		return k, nil
	case "PUBLIC KEY":
		return nil, fmt.Errorf("%s is a public key: signing needs the private key (cosign.key); the public key (cosign.pub) is for --verify-key on the air-gapped side", path)
	default:
		return nil, fmt.Errorf("%s holds a PEM %q block, not a private key gapmirror reads: give a cosign key (%s), or an unencrypted PKCS#8 (%s) or EC (%s) key",
			path, b.Type, sigstorePrivateKey, pkcs8PrivateKey, ecPrivateKey)
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("%s: the private key cannot be read: %w", path, err)
	}
	switch k := k.(type) {
	case *ecdsa.PrivateKey:
		return k, nil
	case *rsa.PrivateKey:
		return k, nil
	case ed25519.PrivateKey:
		return k, nil
	}
	return nil, fmt.Errorf("%s: a %T key cannot sign", path, k)
}

// readPublicKey reads a PEM public key file (cosign.pub).
func readPublicKey(path string) (crypto.PublicKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--verify-key: %w", err)
	}
	if Encrypted(b) {
		return nil, fmt.Errorf("--verify-key %s is a private key: give the public key (cosign.pub) made with it, which is all the air-gapped side needs", path)
	}
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(b)
	if err != nil {
		return nil, fmt.Errorf("--verify-key %s is not a PEM public key (%v): give the cosign.pub gapmirror generate-key-pair or cosign generate-key-pair wrote", path, err)
	}
	return pub, nil
}

// fingerprint names a public key in messages: the sha256 of its PKIX
// encoding, in hex (the bundle's key hint is the same sum in base64).
func fingerprint(pub crypto.PublicKey) string {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "unknown"
	}
	sum := sha256.Sum256(der)
	return "sha256:" + hex.EncodeToString(sum[:])
}
