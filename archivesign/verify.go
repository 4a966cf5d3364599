package archivesign

import (
	"bytes"
	"crypto"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/options"

	"github.com/gapmirror/gapmirror/archive"
)

// maxBundleSize bounds the signature file read into memory (a key-signed
// bundle is under 1 KiB).
const maxBundleSize = 1 << 20

// Verifier checks archive signatures against one public key, as
// `cosign verify-blob --key KEY --bundle B --insecure-ignore-tlog` does:
// a message signature over the index bytes by that key, no transparency
// log entry or timestamp required.
type Verifier struct {
	path string
	pub  crypto.PublicKey
	v    *verify.Verifier
}

// LoadVerifier reads the public key at path (cosign.pub).
func LoadVerifier(path string) (*Verifier, error) {
	pub, err := readPublicKey(path)
	if err != nil {
		return nil, err
	}
	sv, err := signature.LoadDefaultVerifier(pub, options.WithED25519ph())
	if err != nil {
		return nil, fmt.Errorf("--verify-key %s: %w", path, err)
	}
	key := root.NewExpiringKey(sv, time.Time{}, time.Time{})
	trusted := root.NewTrustedPublicKeyMaterial(func(string) (root.TimeConstrainedVerifier, error) { return key, nil })
	v, err := verify.NewVerifier(trusted, verify.WithNoObserverTimestamps())
	if err != nil {
		return nil, fmt.Errorf("--verify-key %s: %w", path, err)
	}
	return &Verifier{path: path, pub: pub, v: v}, nil
}

// Fingerprint names the verifier's public key (see Fingerprint).
func (v *Verifier) Fingerprint() string { return fingerprint(v.pub) }

// Path is the public key file.
func (v *Verifier) Path() string { return v.path }

// Error refuses an archive whose signature does not check out: it names
// the archive, what was expected and what was found, and what to do.
type Error struct {
	Dir, First, ID string
	// Expected and Found say what the check wanted and met.
	Expected, Found string
	// Fix says what to do.
	Fix string
}

func (e *Error) Error() string {
	return fmt.Sprintf("archive %s (%s in %s) is refused: expected %s, found %s. Nothing was read from it or pushed: %s",
		e.ID, e.First, e.Dir, e.Expected, e.Found, e.Fix)
}

// VerifyArchive checks that the signature file beside the archive whose
// first chunk in dir is first (bundleName) is a signature of idx's bytes,
// the index as read from that chunk, by the verifier's key. Nothing but
// the index and the signature file is read: the index names every chunk's
// size and sha256 and every blob's digest, each checked when read.
func (v *Verifier) VerifyArchive(dir, first string, idx *archive.Index) error {
	name := bundleName(first)
	expected := fmt.Sprintf("%s signed by the key of --verify-key %s (%s)", name, v.path, v.Fingerprint())
	refuse := func(found, fix string) error {
		return &Error{Dir: dir, First: first, ID: idx.ID, Expected: expected, Found: found, Fix: fix}
	}
	data, err := readBundle(filepath.Join(dir, name))
	if errors.Is(err, os.ErrNotExist) {
		return refuse("no signature ("+name+" is not there)",
			"if mirror-to-disk signed it (--sign-key), copy "+name+" from the connected side into "+dir+" with the chunks; else sign the next archive and carry that one")
	}
	if err != nil {
		return refuse(fmt.Sprintf("a signature file that cannot be read (%v)", err), "copy "+name+" from the connected side again")
	}
	var b bundle.Bundle
	if err := b.UnmarshalJSON(data); err != nil {
		return refuse(fmt.Sprintf("%s, which is not a Sigstore bundle (%v)", name, err), "copy "+name+" from the connected side again")
	}
	raw := idx.Bytes()
	_, verr := v.v.Verify(&b, verify.NewPolicy(verify.WithArtifact(bytes.NewReader(raw)), verify.WithKey()))
	if verr == nil {
		return nil
	}
	// The hint and digest in the bundle are not trusted (the signature
	// did not check out); they only say which of the two failures it is.
	if hint := b.GetVerificationMaterial().GetPublicKey().GetHint(); hint != "" {
		if sum, err := base64.StdEncoding.DecodeString(hint); err == nil && "sha256:"+hex.EncodeToString(sum) != v.Fingerprint() {
			return refuse(fmt.Sprintf("a signature by another key (sha256:%s)", hex.EncodeToString(sum)),
				"verify with the public key of the key that signed it, if you trust that key; else the archive is not the one your connected side signed: do not push it")
		}
	}
	got := sha256.Sum256(raw)
	if signed := b.GetMessageSignature().GetMessageDigest().GetDigest(); len(signed) > 0 && !bytes.Equal(signed, got[:]) {
		return refuse(fmt.Sprintf("an index changed after signing (%s in %s has sha256:%s, the signature covers sha256:%s)",
			archive.IndexName, first, hex.EncodeToString(got[:]), hex.EncodeToString(signed)),
			"the archive was altered after it was written; do not push it: carry the archive from the connected side again")
	}
	return refuse(fmt.Sprintf("a signature that does not verify (%v)", verr),
		"the archive or its signature was altered, or another key signed it; do not push it: carry the archive and "+name+" from the connected side again")
}

// Signed says whether a signature file lies beside the archive whose first
// chunk in dir is first (not whether it checks out: that needs the key).
func Signed(dir, first string) bool {
	st, err := os.Stat(filepath.Join(dir, bundleName(first)))
	return err == nil && st.Mode().IsRegular()
}

// readBundle reads a signature file of plausible size.
func readBundle(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() || st.Size() > maxBundleSize {
		return nil, fmt.Errorf("%s is not a regular file under %d bytes", p, maxBundleSize)
	}
	b := make([]byte, st.Size())
	_, err = f.ReadAt(b, 0)
	return b, err
}
