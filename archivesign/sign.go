package archivesign

import (
	"bytes"
	"context"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	"github.com/sigstore/sigstore-go/pkg/sign"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/options"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/gapmirror/gapmirror/archive"
)

// bundleName is the name of the signature file of the archive whose first
// chunk is first: mirror_000001.tar → mirror_000001.sigstore.json.
func bundleName(first string) string {
	return strings.TrimSuffix(first, ".tar") + ".sigstore.json"
}

// Signer signs archive indexes with one private key. It is a sigstore-go
// sign.Keypair: the signing algorithm is the one cosign picks for the key
// (ECDSA P-256 with SHA-256 for the keys generate-key-pair makes).
type Signer struct {
	sv   signature.SignerVerifier
	pub  crypto.PublicKey
	alg  signature.AlgorithmDetails
	hint []byte
}

// LoadSigner reads the private key at path; password is asked only for an
// encrypted key.
func LoadSigner(path string, password func() ([]byte, error)) (*Signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--sign-key: %w", err)
	}
	var pass []byte
	if Encrypted(b) {
		if pass, err = password(); err != nil {
			return nil, fmt.Errorf("--sign-key %s is encrypted: %w", path, err)
		}
	}
	key, err := parsePrivateKey(path, b, pass)
	if err != nil {
		return nil, fmt.Errorf("--sign-key: %w", err)
	}
	// Ed25519 as cosign signs with it (pre-hashed), so cosign verifies it.
	sv, err := signature.LoadDefaultSignerVerifier(key, options.WithED25519ph())
	if err != nil {
		return nil, fmt.Errorf("--sign-key %s: %w", path, err)
	}
	alg, err := signature.GetDefaultAlgorithmDetails(key.Public(), options.WithED25519ph())
	if err != nil {
		return nil, fmt.Errorf("--sign-key %s: %w", path, err)
	}
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return nil, fmt.Errorf("--sign-key %s: %w", path, err)
	}
	sum := sha256.Sum256(der)
	return &Signer{sv: sv, pub: key.Public(), alg: alg, hint: []byte(base64.StdEncoding.EncodeToString(sum[:]))}, nil
}

// fingerprint names the signer's public key (see Fingerprint).
func (s *Signer) fingerprint() string { return fingerprint(s.pub) }

// Sign returns the Sigstore bundle (JSON, media type v0.3) of a message
// signature over data, with the public key's hint as its verification
// material and no transparency log entry or timestamp: what
// `cosign sign-blob --new-bundle-format --key KEY --tlog-upload=false` writes.
func (s *Signer) Sign(ctx context.Context, data []byte) ([]byte, error) {
	b, err := sign.Bundle(&sign.PlainData{Data: data}, s, sign.BundleOptions{Context: ctx})
	if err != nil {
		return nil, fmt.Errorf("signing: %w", err)
	}
	out, err := protojson.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("encoding the signature bundle: %w", err)
	}
	return out, nil
}

// SignArchive signs the index of an archive in dir, its bytes as written in
// its first chunk, and writes the bundle beside the chunks (bundleName),
// replacing one an earlier archive of that name left. It returns the
// bundle's path.
func (s *Signer) SignArchive(ctx context.Context, dir string, idx *archive.Index) (string, error) {
	b, err := s.Sign(ctx, idx.Bytes())
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, bundleName(idx.Chunks[0].Name))
	if err := archive.WriteFileAtomic(p, b); err != nil {
		return "", fmt.Errorf("writing the signature of archive %s: %w", idx.ID, err)
	}
	return p, nil
}

// Unsign removes the signature file an earlier archive named first left in
// dir, so that an unsigned archive written in its place does not pass for
// signed.
func Unsign(dir, first string) error {
	if err := os.Remove(filepath.Join(dir, bundleName(first))); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("removing the signature of an earlier archive: %w", err)
	}
	return nil
}

// The sign.Keypair methods.

// GetHashAlgorithm is the hash of the signed digest.
func (s *Signer) GetHashAlgorithm() protocommon.HashAlgorithm { return s.alg.GetProtoHashType() }

// GetSigningAlgorithm is the key's signing algorithm.
func (s *Signer) GetSigningAlgorithm() protocommon.PublicKeyDetails {
	return s.alg.GetSignatureAlgorithm()
}

// GetHint is the public key's hint in the bundle: base64 of the sha256 of
// its PKIX encoding, as cosign writes it.
func (s *Signer) GetHint() []byte { return s.hint }

// GetKeyAlgorithm is the key's algorithm family.
func (s *Signer) GetKeyAlgorithm() string {
	switch s.alg.GetKeyType() {
	case signature.ECDSA:
		return "ECDSA"
	case signature.RSA:
		return "RSA"
	case signature.ED25519:
		return "ED25519"
	}
	return ""
}

// GetPublicKey is the public key.
func (s *Signer) GetPublicKey() crypto.PublicKey { return s.pub }

// GetPublicKeyPem is the public key in PEM.
func (s *Signer) GetPublicKeyPem() (string, error) {
	b, err := cryptoutils.MarshalPublicKeyToPEM(s.pub)
	return string(b), err
}

// SignData signs data and returns the signature and the digest signed.
func (s *Signer) SignData(ctx context.Context, data []byte) ([]byte, []byte, error) {
	opts := []signature.SignOption{options.WithContext(ctx)}
	var digest []byte
	if h := s.alg.GetHashType(); h != 0 {
		hh := h.New()
		hh.Write(data)
		digest = hh.Sum(nil)
		opts = append(opts, options.WithDigest(digest))
	}
	sig, err := s.sv.SignMessage(bytes.NewReader(data), opts...)
	if err != nil {
		return nil, nil, err
	}
	return sig, digest, nil
}
