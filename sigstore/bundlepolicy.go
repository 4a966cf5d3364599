package sigstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"go.podman.io/image/v5/signature"
	"go.podman.io/image/v5/types"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/transfer"
)

// bundleRule is what a containers policy asks of an image, as cosign v3
// bundles can answer it: every requirement a set of keys, one of which
// must have signed a bundle of the image. A rule bundles cannot satisfy
// says why in unable.
type bundleRule struct {
	requirements [][]publicKey
	unable       string
}

// policyRequirement is the part of a policy requirement bundles answer,
// read back from the policy's own JSON form (containers/image keeps its
// requirement types unexported).
type policyRequirement struct {
	Type                string          `json:"type"`
	KeyPath             string          `json:"keyPath"`
	KeyPaths            []string        `json:"keyPaths"`
	KeyData             []byte          `json:"keyData"`
	KeyDatas            [][]byte        `json:"keyDatas"`
	Fulcio              json.RawMessage `json:"fulcio"`
	PKI                 json.RawMessage `json:"pki"`
	RekorPublicKeyPath  string          `json:"rekorPublicKeyPath"`
	RekorPublicKeyPaths []string        `json:"rekorPublicKeyPaths"`
	RekorPublicKeyData  []byte          `json:"rekorPublicKeyData"`
	RekorPublicKeyDatas [][]byte        `json:"rekorPublicKeyDatas"`
}

// requirementsFor are the requirements policy applies to ref, chosen as
// containers/image chooses them (PolicyContext.requirementsForImageRef):
// the transport's scope for the image, then its namespaces, then the
// transport's default, then the policy's.
func requirementsFor(policy *signature.Policy, ref types.ImageReference) signature.PolicyRequirements {
	if scopes, ok := policy.Transports[ref.Transport().Name()]; ok {
		if reqs, ok := scopes[ref.PolicyConfigurationIdentity()]; ok {
			return reqs
		}
		for _, ns := range ref.PolicyConfigurationNamespaces() {
			if reqs, ok := scopes[ns]; ok {
				return reqs
			}
		}
		if reqs, ok := scopes[""]; ok {
			return reqs
		}
	}
	return policy.Default
}

// newBundleRule is the bundle rule of reqs; relative key paths are read
// from dir (the policy file's directory).
func newBundleRule(reqs signature.PolicyRequirements, dir string) bundleRule {
	var rule bundleRule
	for _, req := range reqs {
		data, err := json.Marshal(req)
		if err != nil {
			return bundleRule{unable: fmt.Sprintf("the policy's requirement: %v", err)}
		}
		var pr policyRequirement
		if err := json.Unmarshal(data, &pr); err != nil {
			return bundleRule{unable: fmt.Sprintf("the policy's requirement: %v", err)}
		}
		switch {
		case pr.Type == "insecureAcceptAnything":
			continue
		case pr.Type != "sigstoreSigned":
			return bundleRule{unable: fmt.Sprintf("the policy requires %q, which a cosign bundle cannot satisfy", pr.Type)}
		case isSet(pr.Fulcio) || isSet(pr.PKI):
			return bundleRule{unable: "the policy's sigstoreSigned requirement trusts certificates (fulcio, pki), which need a transparency log or timestamp authority to verify: offline, gapmirror verifies bundles with keys (keyPath, keyPaths, keyData, keyDatas) only"}
		case pr.RekorPublicKeyPath != "" || len(pr.RekorPublicKeyPaths) > 0 || len(pr.RekorPublicKeyData) > 0 || len(pr.RekorPublicKeyDatas) > 0:
			return bundleRule{unable: "the policy's sigstoreSigned requirement asks for Rekor inclusion (rekorPublicKey…), which gapmirror does not verify in bundles: they are verified offline, with the key alone"}
		}
		keys, err := requirementKeys(pr, dir)
		if err != nil {
			return bundleRule{unable: err.Error()}
		}
		rule.requirements = append(rule.requirements, keys)
	}
	if len(rule.requirements) == 0 && rule.unable == "" {
		rule.unable = "the policy requires no signature of it"
	}
	return rule
}

func isSet(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s != "" && s != "null" && s != "{}"
}

// requirementKeys are the public keys a sigstoreSigned requirement names.
func requirementKeys(pr policyRequirement, dir string) ([]publicKey, error) {
	var keys []publicKey
	add := func(pemData []byte, from string) error {
		k, err := cryptoutils.UnmarshalPEMToPublicKey(pemData)
		if err != nil {
			return fmt.Errorf("the policy's sigstoreSigned %s: not a PEM public key: %w", from, err)
		}
		keys = append(keys, publicKey{Key: k, From: from})
		return nil
	}
	paths := pr.KeyPaths
	if pr.KeyPath != "" {
		paths = append([]string{pr.KeyPath}, paths...)
	}
	for _, p := range paths {
		full := p
		if !filepath.IsAbs(full) && dir != "" {
			full = filepath.Join(dir, p)
		}
		data, err := os.ReadFile(full)
		if err != nil {
			return nil, fmt.Errorf("the policy's sigstoreSigned keyPath: %w", err)
		}
		if err := add(data, "keyPath "+p); err != nil {
			return nil, err
		}
	}
	datas := pr.KeyDatas
	if len(pr.KeyData) > 0 {
		datas = append([][]byte{pr.KeyData}, datas...)
	}
	for i, d := range datas {
		from := "keyData"
		if len(datas) > 1 {
			from = fmt.Sprintf("keyDatas[%d]", i)
		}
		if err := add(d, from); err != nil {
			return nil, err
		}
	}
	if len(keys) == 0 {
		return nil, errors.New("the policy's sigstoreSigned requirement names no key")
	}
	return keys, nil
}

// bundlesAllowed is nil when the cosign v3 bundles attached to manifest d
// of img (its OCI 1.1 referrers, through the referrers API or the tag
// schema) satisfy every requirement of rule, else why not: the bundles
// refused, each named by its referrer digest, or that there are none.
func bundlesAllowed(ctx context.Context, up *transfer.Registry, img imageset.Image, d digest.Digest, rule bundleRule) error {
	if rule.unable != "" {
		return errors.New(rule.unable)
	}
	got, err := up.Referrers(ctx, img, d, bundleMediaType) // retried there
	if err != nil {
		return fmt.Errorf("listing its cosign bundles (OCI referrers of %s): %w", d, err)
	}
	refs := make([]ocispec.Descriptor, len(got))
	for i, r := range got {
		refs[i] = ocispec.Descriptor{MediaType: string(r.MediaType), Digest: digest.Digest(r.Digest.String()), Size: r.Size, ArtifactType: r.ArtifactType}
	}
	if len(refs) == 0 {
		return fmt.Errorf("no cosign bundle is attached to %s either (OCI referrers of artifactType %s)", d, bundleMediaType)
	}
	bundles := make([][]byte, len(refs))
	var why []string
	for i, r := range refs {
		b, err := readBundle(ctx, up, img, d, r)
		if err != nil {
			why = append(why, fmt.Sprintf("cosign bundle referrer %s: %v", r.Digest, err))
			continue
		}
		bundles[i] = b
	}
	for _, keys := range rule.requirements {
		var refused []string
		ok := false
		for i, b := range bundles {
			if b == nil {
				continue
			}
			err := verifyBundle(b, d, keys)
			if err == nil {
				ok = true
				break
			}
			refused = append(refused, fmt.Sprintf("cosign bundle referrer %s: %v", refs[i].Digest, err))
		}
		if !ok {
			return errors.New(strings.Join(append(why, refused...), "; "))
		}
	}
	return nil
}

// readBundle reads the bundle a referrer manifest of subject d carries: the
// manifest by digest, its one layer checked against its digest.
func readBundle(ctx context.Context, up *transfer.Registry, img imageset.Image, d digest.Digest, r ocispec.Descriptor) ([]byte, error) {
	var data []byte
	err := transfer.Retry(ctx, up.Retries, up.RetryDelay, func() (err error) {
		data, _, err = up.Manifest(ctx, img, r.Digest)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading its manifest: %w", err)
	}
	if digest.FromBytes(data) != r.Digest {
		return nil, fmt.Errorf("its manifest does not match its digest")
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("its manifest: %w", err)
	}
	if m.Subject == nil || m.Subject.Digest != d {
		return nil, fmt.Errorf("its manifest's subject is not %s", d)
	}
	if len(m.Layers) != 1 || m.Layers[0].MediaType != bundleMediaType {
		return nil, fmt.Errorf("not a cosign bundle: want one layer of %s", bundleMediaType)
	}
	layer := m.Layers[0]
	if layer.Size > maxBundle {
		return nil, fmt.Errorf("its bundle is %d bytes, more than a bundle's %d", layer.Size, maxBundle)
	}
	var b []byte
	err = transfer.Retry(ctx, up.Retries, up.RetryDelay, func() error {
		rc, err := up.Blob(ctx, img, layer)
		if err != nil {
			return err
		}
		defer rc.Close()
		b, err = io.ReadAll(io.LimitReader(rc, maxBundle+1))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading its bundle %s: %w", layer.Digest, err)
	}
	if int64(len(b)) != layer.Size || digest.FromBytes(b) != layer.Digest {
		return nil, fmt.Errorf("its bundle does not match its digest %s", layer.Digest)
	}
	return b, nil
}
