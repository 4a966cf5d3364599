package release

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/ProtonMail/go-crypto/openpgp"
	"go.podman.io/image/v5/docker/reference"
	"go.podman.io/image/v5/signature"
)

// Trusted release keys: the environment variable naming a key file and the
// key Red Hat systems install.
const (
	EnvSignatureKey         = "OCP_SIGNATURE_VERIFICATION_PK"
	DefaultSignatureKeyPath = "/etc/pki/rpm-gpg/RPM-GPG-KEY-redhat-release"
)

// atomicSignatureType is the critical.type of a simple-signing payload.
const atomicSignatureType = "atomic container signature"

// ErrReleaseNotVerified says a release's signatures do not prove it genuine.
var ErrReleaseNotVerified = errors.New("release signature not verified")

// Keyring is a set of trusted OpenPGP public keys that release signatures
// are checked against.
type Keyring struct {
	mech         signature.SigningMechanism
	fingerprints []string
	keyIDs       map[uint64]bool
}

// TrustedKeyPaths picks the trusted key files: the given paths (the
// --release-signature-key flag) when any, else $OCP_SIGNATURE_VERIFICATION_PK,
// else DefaultSignatureKeyPath when it exists.
func TrustedKeyPaths(flagPaths []string) ([]string, error) {
	if len(flagPaths) > 0 {
		return flagPaths, nil
	}
	if env := strings.TrimSpace(os.Getenv(EnvSignatureKey)); env != "" {
		return []string{env}, nil
	}
	if _, err := os.Stat(DefaultSignatureKeyPath); err == nil {
		return []string{DefaultSignatureKeyPath}, nil
	}
	return nil, fmt.Errorf("no trusted release signing key: pass --release-signature-key FILE|DIR, set %s to a key file, or install Red Hat's release key at %s",
		EnvSignatureKey, DefaultSignatureKeyPath)
}

// LoadKeyring reads trusted public keys from files and directories (every
// regular, non-hidden file of a directory); each file holds armored or binary
// OpenPGP public keys.
func LoadKeyring(paths ...string) (*Keyring, error) {
	var list openpgp.EntityList
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("reading release signing keys: %w", err)
		}
		files := []string{p}
		if info.IsDir() {
			files, err = keyFiles(p)
			if err != nil {
				return nil, err
			}
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				return nil, fmt.Errorf("reading release signing key: %w", err)
			}
			keys, err := parseKeys(data)
			if err != nil {
				return nil, fmt.Errorf("release signing key file %s: %w", f, err)
			}
			list = append(list, keys...)
		}
	}
	return newKeyring(list)
}

// keyFiles lists the regular, non-hidden files of a key directory.
func keyFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading release signing key directory: %w", err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || !e.Type().IsRegular() && e.Type()&fs.ModeSymlink == 0 {
			continue
		}
		out = append(out, filepath.Join(dir, e.Name()))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("release signing key directory %s has no key files", dir)
	}
	sort.Strings(out)
	return out, nil
}

// NewKeyring builds a keyring from armored or binary OpenPGP public keys.
func NewKeyring(keys ...[]byte) (*Keyring, error) {
	var list openpgp.EntityList
	for i, k := range keys {
		es, err := parseKeys(k)
		if err != nil {
			return nil, fmt.Errorf("release signing key %d: %w", i+1, err)
		}
		list = append(list, es...)
	}
	return newKeyring(list)
}

// parseKeys reads every key of a file: one or more armored blocks, or
// binary packets.
func parseKeys(data []byte) (openpgp.EntityList, error) {
	const begin = "-----BEGIN PGP "
	var list openpgp.EntityList
	if bytes.Contains(data, []byte(begin)) {
		blocks := bytes.Split(data, []byte(begin))
		for _, b := range blocks[1:] {
			es, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(append([]byte(begin), b...)))
			if err != nil {
				return nil, fmt.Errorf("not an OpenPGP public key: %w", err)
			}
			list = append(list, es...)
		}
	} else {
		es, err := openpgp.ReadKeyRing(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("not an OpenPGP public key (armored or binary): %w", err)
		}
		list = es
	}
	if len(list) == 0 {
		return nil, errors.New("no OpenPGP public key found")
	}
	return list, nil
}

// newKeyring hands the public parts of the keys to containers/image's
// OpenPGP mechanism.
func newKeyring(list openpgp.EntityList) (*Keyring, error) {
	if len(list) == 0 {
		return nil, errors.New("no trusted release signing key given")
	}
	var buf bytes.Buffer
	ids := map[uint64]bool{}
	for _, e := range list {
		if err := e.Serialize(&buf); err != nil {
			return nil, fmt.Errorf("release signing key %X: %w", e.PrimaryKey.Fingerprint, err)
		}
		ids[e.PrimaryKey.KeyId] = true
		for _, sk := range e.Subkeys {
			ids[sk.PublicKey.KeyId] = true
		}
	}
	mech, fps, err := signature.NewEphemeralGPGSigningMechanism(buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("loading release signing keys: %w", err)
	}
	return &Keyring{mech: mech, fingerprints: fps, keyIDs: ids}, nil
}

// Fingerprints returns the trusted keys' fingerprints (uppercase hex).
func (k *Keyring) Fingerprints() []string {
	return slices.Clone(k.fingerprints)
}

// Close releases the keyring's resources.
func (k *Keyring) Close() error {
	return k.mech.Close()
}

// VerdictStatus is the outcome of checking a release's signatures.
type VerdictStatus string

// Verdict statuses.
const (
	// StatusVerified: a trusted key signed the release digest for the
	// release repository.
	StatusVerified VerdictStatus = "verified"
	// StatusRefused: no signature proves the release genuine.
	StatusRefused VerdictStatus = "refused"
	// StatusSkipped: verification was skipped on request.
	StatusSkipped VerdictStatus = "skipped"
)

// Verdict is the outcome of checking one release's signatures.
type Verdict struct {
	// Release is the release checked.
	Release Release
	// Status is the outcome.
	Status VerdictStatus
	// Fingerprint is the key that verified the release and Index the
	// signature (signature-<Index>) it verified, when Status is verified.
	Fingerprint string
	Index       int
	// SignedReference is the docker-reference the verified signature names
	// (informational: the release is copied by digest, never by this tag).
	SignedReference string
	// Signatures are every signature read, in store order.
	Signatures []Signature
	// Reason says why the release was refused, or warns that it was not
	// verified when Status is skipped.
	Reason string

	fetchErr error
}

// Signature is one release signature and what checking it found.
type Signature struct {
	// Index is N of signature-N.
	Index int
	// Data is the signature as stored (an OpenPGP signed message).
	Data []byte
	// Verified is true when this signature proves the release genuine.
	Verified bool
	// Fingerprint is the key that made the signature, when verified.
	Fingerprint string
	// Problem says why the signature does not verify the release.
	Problem string
}

// Valid returns the signatures that verified the release (what a cluster's
// verification ConfigMap should carry).
func (v Verdict) Valid() []Signature {
	var out []Signature
	for _, s := range v.Signatures {
		if s.Verified {
			out = append(out, s)
		}
	}
	return out
}

// Err returns nil when the release is verified or verification was skipped,
// else an error wrapping ErrReleaseNotVerified that names the release and
// the reason.
func (v Verdict) Err() error {
	if v.Status == StatusVerified || v.Status == StatusSkipped {
		return nil
	}
	if v.fetchErr != nil {
		return fmt.Errorf("%s: %w: %w", v.Reason, ErrReleaseNotVerified, v.fetchErr)
	}
	return fmt.Errorf("%s: %w", v.Reason, ErrReleaseNotVerified)
}

// releaseLabel names a release in messages: "release 4.18.1 (arch amd64,
// sha256:…)".
func releaseLabel(r Release) string {
	switch {
	case r.Version != "" && r.Arch != "":
		return fmt.Sprintf("release %s (arch %s, %s)", r.Version, r.Arch, r.Digest)
	case r.Version != "":
		return fmt.Sprintf("release %s (%s)", r.Version, r.Digest)
	default:
		return fmt.Sprintf("release %s", r.Payload)
	}
}

// Check decides whether sigs prove r genuine: one of them must be made by a
// trusted key, sign r.Digest, and name as its identity r's repository or one
// of alsoAccept (e.g. quay.io/openshift-release-dev/ocp-release when the
// update graph names payloads in an internal mirror).
func (k *Keyring) Check(r Release, sigs [][]byte, alsoAccept ...string) Verdict {
	v := Verdict{Release: r, Status: StatusRefused}
	if !validDigest(r.Digest) {
		v.Reason = fmt.Sprintf("%s refused: digest %q is not sha256:<64 hex digits>", releaseLabel(r), r.Digest)
		return v
	}
	var accept []string
	for _, repo := range append([]string{r.Repository()}, alsoAccept...) {
		named, err := reference.ParseNormalizedNamed(repo)
		if err != nil {
			v.Reason = fmt.Sprintf("%s refused: repository %q is not a valid image name: %v", releaseLabel(r), repo, err)
			return v
		}
		accept = append(accept, named.Name())
	}
	for i, data := range sigs {
		s, ref := k.checkOne(data, r.Digest, accept)
		s.Index = i + 1
		v.Signatures = append(v.Signatures, s)
		if s.Verified && v.Index == 0 {
			v.Index = s.Index
			v.Fingerprint = s.Fingerprint
			v.SignedReference = ref
		}
	}
	if v.Index > 0 {
		v.Status = StatusVerified
		return v
	}
	if len(sigs) == 0 {
		v.Reason = fmt.Sprintf("%s refused: no signature found", releaseLabel(r))
		return v
	}
	var problems []string
	for _, s := range v.Signatures {
		problems = append(problems, fmt.Sprintf("signature-%d %s", s.Index, s.Problem))
	}
	v.Reason = fmt.Sprintf("%s refused: %s", releaseLabel(r), strings.Join(problems, "; "))
	return v
}

// signedPayload is the JSON a simple-signing signature signs.
type signedPayload struct {
	Critical json.RawMessage `json:"critical"`
	Optional json.RawMessage `json:"optional"`
}

// signedCritical is the critical section; unknown fields are refused, as the
// format requires.
type signedCritical struct {
	Type  string `json:"type"`
	Image struct {
		DockerManifestDigest string `json:"docker-manifest-digest"`
	} `json:"image"`
	Identity struct {
		DockerReference string `json:"docker-reference"`
	} `json:"identity"`
}

// parseSignedPayload reads the critical section of a simple-signing payload.
func parseSignedPayload(contents []byte) (signedCritical, error) {
	var p signedPayload
	var c signedCritical
	if err := json.Unmarshal(contents, &p); err != nil {
		return c, fmt.Errorf("payload is not JSON: %w", err)
	}
	if len(p.Critical) == 0 {
		return c, errors.New("payload has no critical section")
	}
	dec := json.NewDecoder(bytes.NewReader(p.Critical))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("critical section: %w", err)
	}
	if c.Type != atomicSignatureType {
		return c, fmt.Errorf("critical.type is %q, not %q", c.Type, atomicSignatureType)
	}
	if !validDigest(c.Image.DockerManifestDigest) {
		return c, fmt.Errorf("critical.image.docker-manifest-digest %q is not a sha256 digest", c.Image.DockerManifestDigest)
	}
	if c.Identity.DockerReference == "" {
		return c, errors.New("critical.identity.docker-reference is empty")
	}
	return c, nil
}

// checkOne checks one signature against the release digest and repository;
// it also returns the identity a verified signature names.
func (k *Keyring) checkOne(data []byte, digest string, accept []string) (Signature, string) {
	s := Signature{Data: data}
	if err := checkMessageSize(data); err != nil {
		s.Problem = "is malformed: " + err.Error()
		return s, ""
	}
	_, shortID, err := k.mech.UntrustedSignatureContents(data)
	if err != nil {
		s.Problem = fmt.Sprintf("is malformed: not an OpenPGP signed message (%v)", err)
		return s, ""
	}
	contents, fp, err := k.mech.Verify(data)
	if err != nil {
		if !k.knowsKeyID(shortID) {
			s.Problem = fmt.Sprintf("is made with an unknown key %s (trusted keys: %s); add the signer's public key with --release-signature-key if you trust it",
				shortID, strings.Join(k.fingerprints, ", "))
		} else {
			s.Problem = fmt.Sprintf("does not verify with trusted key %s: %v", shortID, err)
		}
		return s, ""
	}
	if !slices.Contains(k.fingerprints, fp) {
		s.Problem = fmt.Sprintf("is made with key %s, which is not trusted", fp)
		return s, ""
	}
	c, err := parseSignedPayload(contents)
	if err != nil {
		s.Problem = fmt.Sprintf("is malformed: %v", err)
		return s, ""
	}
	if c.Image.DockerManifestDigest != digest {
		s.Problem = fmt.Sprintf("signs another digest %s (the release is %s)", c.Image.DockerManifestDigest, digest)
		return s, ""
	}
	signed, err := reference.ParseNormalizedNamed(c.Identity.DockerReference)
	if err != nil {
		s.Problem = fmt.Sprintf("is malformed: identity %q is not an image reference", c.Identity.DockerReference)
		return s, ""
	}
	if !slices.Contains(accept, signed.Name()) {
		s.Problem = fmt.Sprintf("has the wrong identity: it signs %s, not an image of the release repository %s", c.Identity.DockerReference, strings.Join(accept, " or "))
		return s, ""
	}
	s.Verified, s.Fingerprint = true, fp
	return s, c.Identity.DockerReference
}

// maxSignedPayloadBytes bounds what the OpenPGP message of a signature may
// hold once decompressed (a simple-signing payload is a few hundred bytes).
const maxSignedPayloadBytes = 64 << 10

// checkMessageSize refuses an OpenPGP message whose body decompresses to
// more than maxSignedPayloadBytes, reading no further than that: the
// signing mechanism reads the body whole, so a compressed message of a
// few KiB could take GiBs of memory. A message it cannot read is left to
// the mechanism to diagnose.
func checkMessageSize(data []byte) error {
	md, err := openpgp.ReadMessage(bytes.NewReader(data), openpgp.EntityList{}, nil, nil)
	if err != nil {
		return nil
	}
	n, _ := io.Copy(io.Discard, io.LimitReader(md.UnverifiedBody, maxSignedPayloadBytes+1))
	if n > maxSignedPayloadBytes {
		return fmt.Errorf("its OpenPGP message decompresses to more than %d KiB (a release signature signs a payload of under 1 KiB)", maxSignedPayloadBytes>>10)
	}
	return nil
}

// knowsKeyID reports whether a 16-hex-digit key ID belongs to a trusted key
// or one of its subkeys.
func (k *Keyring) knowsKeyID(shortID string) bool {
	for id := range k.keyIDs {
		if strings.EqualFold(fmt.Sprintf("%016X", id), shortID) {
			return true
		}
	}
	return false
}

// Verifier fetches release signatures and checks them.
type Verifier struct {
	// Keyring holds the trusted keys; required unless Skip.
	Keyring *Keyring
	// Source gives the signatures (a SignatureStore, a SignatureDir, …).
	Source SignatureSource
	// AcceptIdentities are repositories a signature may name besides the
	// payload's own (see Keyring.Check).
	AcceptIdentities []string
	// Skip turns verification off: signatures are still fetched when
	// possible, and every verdict carries a loud warning.
	Skip bool
	// Concurrency bounds parallel fetches in VerifyAll; 0 means 4.
	Concurrency int
}

// Verify fetches and checks the signatures of one release.
func (v *Verifier) Verify(ctx context.Context, r Release) Verdict {
	if v.Source == nil {
		return Verdict{Release: r, Status: StatusRefused, Reason: fmt.Sprintf("%s refused: no signature source configured", releaseLabel(r))}
	}
	sigs, err := v.Source.Signatures(ctx, r.Digest)
	if v.Skip {
		out := Verdict{Release: r, Status: StatusSkipped}
		for i, s := range sigs {
			out.Signatures = append(out.Signatures, Signature{Index: i + 1, Data: s, Problem: "not verified (verification skipped)"})
		}
		out.Reason = fmt.Sprintf("WARNING: %s is NOT verified: release signature verification was skipped on request, so nothing proves this payload is the one its publisher released", releaseLabel(r))
		if err != nil {
			out.Reason += fmt.Sprintf(" (its signatures could not be fetched either: %v)", err)
		}
		return out
	}
	if v.Keyring == nil {
		return Verdict{Release: r, Status: StatusRefused,
			Reason: fmt.Sprintf("%s refused: no trusted release signing key is configured", releaseLabel(r))}
	}
	if err != nil {
		// A signature read before the failure that proves the release is
		// enough (the cluster-version operator stops at the first one that
		// verifies too): a store failing on signature-2 must not refuse a
		// release signature-1 proves.
		if len(sigs) > 0 {
			if out := v.Keyring.Check(r, sigs, v.AcceptIdentities...); out.Status == StatusVerified {
				return out
			}
		}
		return Verdict{Release: r, Status: StatusRefused, fetchErr: err,
			Reason: fmt.Sprintf("%s refused: its signatures could not be fetched from %s", releaseLabel(r), v.Source.Location(r.Digest))}
	}
	out := v.Keyring.Check(r, sigs, v.AcceptIdentities...)
	if len(sigs) == 0 {
		out.Reason = fmt.Sprintf("%s refused: no signature found at %s/signature-1", releaseLabel(r), v.Source.Location(r.Digest))
	}
	return out
}

// VerifyAll verifies releases in parallel and returns their verdicts in the
// same order.
func (v *Verifier) VerifyAll(ctx context.Context, releases []Release) []Verdict {
	out := make([]Verdict, len(releases))
	n := v.Concurrency
	if n <= 0 {
		n = 4
	}
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	for i, r := range releases {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i] = v.Verify(ctx, r)
		}()
	}
	wg.Wait()
	return out
}
