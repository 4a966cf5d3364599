package sigstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	"go.podman.io/image/v5/docker"
	"go.podman.io/image/v5/image"
	"go.podman.io/image/v5/signature"
	"go.podman.io/image/v5/types"

	"github.com/gapmirror/gapmirror/failure"
	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/transfer"
)

// Verify evaluates the signature policy (--secure-policy) for
// every upstream image of set: an image passes when the policy accepts its
// manifest or, for a multi-arch image, every platform manifest (publishers
// that sign per architecture). A refused image leaves the set with its
// signatures and is reported as failed, so nothing unverified is mirrored.
// policyPath is --policy ("": the system's).
func (s Search) Verify(ctx context.Context, policyPath string, set *imageset.Set, res *imageset.Resolution) error {
	up, rd := s.Upstream, s.RegistriesD
	var policy *signature.Policy
	var err error
	if policyPath != "" {
		policy, err = signature.NewPolicyFromFile(policyPath)
	} else {
		policy, err = signature.DefaultPolicy(up.SystemContext())
	}
	if err != nil {
		return fmt.Errorf("--secure-policy: reading the signature policy: %w (give one with --policy FILE, a containers policy.json)", err)
	}
	pc, err := signature.NewPolicyContext(policy)
	if err != nil {
		return fmt.Errorf("--secure-policy: %w", err)
	}
	defer func() { _ = pc.Destroy() }()
	dir, err := os.MkdirTemp("", "gapmirror-registries.d-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if rd == nil {
		if rd, err = LoadRegistriesD(up.SystemContext()); err != nil {
			return err
		}
	}
	if err := policyRegistriesD(rd, dir); err != nil {
		return err
	}
	sys := *up.SystemContext()
	sys.RegistriesDirPath = dir

	var images []imageset.Image
	for _, img := range set.Images {
		if !img.Built && !img.Kind.Attached() { // a signature or referrer goes with its image
			images = append(images, img)
		}
	}
	refusals := make([]error, len(images))
	parallel := max(s.Parallel, 1)
	// A PolicyContext is not safe for concurrent use: one evaluation at a
	// time, the image sources opened (and bundles read) in parallel.
	var mu sync.Mutex
	keyDir := ""
	if policyPath != "" {
		keyDir = filepath.Dir(policyPath)
	}
	parallelDo(len(images), parallel, func(i int) {
		refusals[i] = allowed(ctx, policyCheck{pc, &mu, policy, keyDir}, &sys, up, images[i])
	})
	refused := map[string]bool{} // destination repo @ digest
	for i, img := range images {
		if refusals[i] == nil {
			continue
		}
		refused[img.DestinationRepo()+"@"+img.Digest] = true
		res.Failed = append(res.Failed, imageset.Unresolved{Origin: img.Origin, Kind: img.Kind, Why: strings.Join(img.Why, "; "), Err: refusals[i]})
	}
	if len(refused) == 0 {
		return nil
	}
	kept := set.Images[:0]
	for _, img := range set.Images {
		if refused[img.DestinationRepo()+"@"+img.Digest] || img.Kind.Attached() && refused[img.DestinationRepo()+"@"+img.SignatureOf] {
			continue
		}
		kept = append(kept, img)
	}
	set.Images = kept
	return nil
}

// policyCheck is the policy an image is checked against.
type policyCheck struct {
	pc *signature.PolicyContext
	// mu: a PolicyContext is not safe for concurrent use.
	mu     *sync.Mutex
	policy *signature.Policy
	// keyDir is where relative key paths are (the policy file's directory).
	keyDir string
}

// allowed is nil when the policy accepts img, else why it refuses it. A
// manifest is accepted when the policy accepts its signatures under the
// sha256-<hex>.sig tag scheme (containers/image's check) or, where that
// fails, the cosign v3 bundles attached to it as OCI 1.1 referrers
// (bundlesAllowed).
func allowed(ctx context.Context, p policyCheck, sys *types.SystemContext, up *transfer.Registry, img imageset.Image) error {
	named, err := reference.ParseNormalizedNamed(img.Source)
	if err != nil {
		return err
	}
	ref, err := docker.NewReference(named)
	if err != nil {
		return err
	}
	var src types.ImageSource
	err = transfer.Retry(ctx, up.Retries, up.RetryDelay, func() (err error) {
		src, err = ref.NewImageSource(ctx, sys)
		return err
	})
	if err != nil {
		return fmt.Errorf("not verified: reading the image: %w", failure.Explain(err, img.Source))
	}
	defer src.Close()
	var rule *bundleRule // worked out for a refused image only
	var data []byte
	var manifestErr error
	read := false
	manifest := func() ([]byte, error) { // read once, and only for a refused image
		if !read {
			data, _, manifestErr = src.GetManifest(ctx, nil)
			read = true
		}
		return data, manifestErr
	}
	check := func(instance *digest.Digest) error {
		p.mu.Lock()
		ok, err := p.pc.IsRunningImageAllowed(ctx, image.UnparsedInstance(src, instance))
		p.mu.Unlock()
		if !ok && err == nil {
			err = errors.New("refused")
		}
		if err == nil {
			return nil
		}
		if rule == nil {
			r := newBundleRule(requirementsFor(p.policy, ref), p.keyDir)
			rule = &r
		}
		if rule.unable != "" {
			return err
		}
		d := digest.Digest(img.Digest)
		if instance != nil {
			d = *instance
		} else if d == "" {
			if data, err := manifest(); err == nil {
				d = digest.FromBytes(data)
			}
		}
		if bundleErr := bundlesAllowed(ctx, up, img, d, *rule); bundleErr != nil {
			return fmt.Errorf("tag-scheme signatures (sha256-<hex>.sig): %w; %w", err, bundleErr)
		}
		return nil
	}
	topErr := check(nil)
	if topErr == nil {
		return nil
	}
	data, err = manifest()
	if err == nil && transfer.IsIndex(transfer.MediaTypeOf(data)) {
		if kids, err := transfer.Children(data); err == nil && len(kids) > 0 {
			var kidErr error
			for _, k := range kids {
				if err := check(&k.Digest); err != nil {
					kidErr = fmt.Errorf("platform manifest %s: %w", k.Digest, err)
					break
				}
			}
			if kidErr == nil {
				return nil
			}
			topErr = fmt.Errorf("%w, and not every platform manifest is signed either (%w)", topErr, kidErr)
		}
	}
	return fmt.Errorf("%w: %w; sign the image (cosign sign), fix the policy (--policy), or mirror without --secure-policy", failure.ErrPolicyRefused, topErr)
}
