// Package releasetest makes release fixtures for tests and demos: throwaway
// OpenPGP keys that sign releases the way Red Hat does ("atomic container
// signature" simple signing), update graphs with generated edges, and HTTP
// handlers that serve them like the update service and the signature store.
//
// Everything is deterministic: the same seed gives the same key, the same
// versions give the same graph.
package releasetest

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// keyTime is the creation time of generated keys and their signatures.
var keyTime = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// Key is a throwaway OpenPGP key (Ed25519) that signs release payloads.
type Key struct {
	entity *openpgp.Entity
	config *packet.Config
}

// NewKey derives a key from seed: the same seed always gives the same key.
func NewKey(seed string) (*Key, error) {
	cfg := &packet.Config{
		Rand:      &seededReader{seed: sha256.Sum256([]byte("releasetest key " + seed))},
		Time:      func() time.Time { return keyTime },
		Algorithm: packet.PubKeyAlgoEdDSA,
	}
	e, err := openpgp.NewEntity("gapmirror test key "+sanitize(seed), "", "release-"+sanitize(seed)+"@example.invalid", cfg)
	if err != nil {
		return nil, fmt.Errorf("generating test key %q: %w", seed, err)
	}
	return &Key{entity: e, config: cfg}, nil
}

// NewRSAKey is NewKey with an RSA 2048 key, the algorithm of Red Hat's own
// release keys: oc-mirror v2 verifies with golang.org/x/crypto/openpgp,
// which refuses Ed25519 keys (the bench runs it). The key is not
// deterministic (Go's RSA generation does not take its randomness only from
// the reader); signatures by it are.
func NewRSAKey(seed string) (*Key, error) {
	cfg := &packet.Config{
		Rand:      &seededReader{seed: sha256.Sum256([]byte("releasetest key " + seed))},
		Time:      func() time.Time { return keyTime },
		Algorithm: packet.PubKeyAlgoRSA,
		RSABits:   2048,
	}
	e, err := openpgp.NewEntity("gapmirror test key "+sanitize(seed), "", "release-"+sanitize(seed)+"@example.invalid", cfg)
	if err != nil {
		return nil, fmt.Errorf("generating test key %q: %w", seed, err)
	}
	return &Key{entity: e, config: cfg}, nil
}

// sanitize keeps a seed usable inside an OpenPGP user id.
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if strings.ContainsRune("()<>\x00@ ", r) {
			return '-'
		}
		return r
	}, s)
}

// PublicKey returns the armored public key, as a --release-signature-key file holds it.
func (k *Key) PublicKey() []byte {
	var buf bytes.Buffer
	w, err := armor.Encode(&buf, openpgp.PublicKeyType, nil)
	if err != nil {
		return nil
	}
	if err := k.entity.Serialize(w); err != nil {
		return nil
	}
	if err := w.Close(); err != nil {
		return nil
	}
	return buf.Bytes()
}

// BinaryPublicKey returns the public key as binary OpenPGP packets.
func (k *Key) BinaryPublicKey() []byte {
	var buf bytes.Buffer
	if err := k.entity.Serialize(&buf); err != nil {
		return nil
	}
	return buf.Bytes()
}

// Fingerprint returns the key's fingerprint in uppercase hex.
func (k *Key) Fingerprint() string {
	return strings.ToUpper(fmt.Sprintf("%x", k.entity.PrimaryKey.Fingerprint))
}

// KeyID returns the key's 16-hex-digit key ID.
func (k *Key) KeyID() string {
	return fmt.Sprintf("%016X", k.entity.PrimaryKey.KeyId)
}

// Sign returns an OpenPGP signed message (not detached) carrying payload.
func (k *Key) Sign(payload []byte) ([]byte, error) {
	var buf bytes.Buffer
	w, err := openpgp.Sign(&buf, k.entity, nil, k.config)
	if err != nil {
		return nil, fmt.Errorf("signing with test key: %w", err)
	}
	if _, err := w.Write(payload); err != nil {
		return nil, fmt.Errorf("signing with test key: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("signing with test key: %w", err)
	}
	return buf.Bytes(), nil
}

// SignRelease returns a release signature: the simple-signing payload for
// digest and dockerReference, signed with the key.
func (k *Key) SignRelease(digest, dockerReference string) ([]byte, error) {
	return k.Sign(simpleSigningPayload(digest, dockerReference))
}

// simpleSigningPayload returns the JSON an "atomic container signature"
// signs.
func simpleSigningPayload(digest, dockerReference string) []byte {
	doc := map[string]any{
		"critical": map[string]any{
			"type":     "atomic container signature",
			"image":    map[string]string{"docker-manifest-digest": digest},
			"identity": map[string]string{"docker-reference": dockerReference},
		},
		"optional": map[string]any{
			"creator":   "gapmirror releasetest",
			"timestamp": keyTime.Unix(),
		},
	}
	out, _ := json.Marshal(doc)
	return out
}

// seededReader is a deterministic byte stream: SHA-256 of seed and a counter.
type seededReader struct {
	seed    [32]byte
	counter uint64
	buf     []byte
}

var _ io.Reader = (*seededReader)(nil)

func (r *seededReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(r.buf) == 0 {
			var block [40]byte
			copy(block[:], r.seed[:])
			binary.BigEndian.PutUint64(block[32:], r.counter)
			r.counter++
			sum := sha256.Sum256(block[:])
			r.buf = sum[:]
		}
		c := copy(p[n:], r.buf)
		r.buf = r.buf[c:]
		n += c
	}
	return n, nil
}
