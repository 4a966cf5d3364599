package transfer

import (
	"context"
	"fmt"
	"io"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/image/v5/docker"
	"go.podman.io/image/v5/manifest"
	"go.podman.io/image/v5/types"

	"github.com/gapmirror/gapmirror/failure"
	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/registryapi"
)

// Manifest implements Source. Through the run's client for the registry:
// the manifest the tag resolution read, else one GET by digest (verified
// by the client); elsewhere through containers/image.
func (r *Registry) Manifest(ctx context.Context, img imageset.Image, d digest.Digest) ([]byte, string, error) {
	if data, ok := r.KeptManifest(img, d, false); ok {
		return data, MediaTypeOf(data), nil
	}
	if c, repo := r.pullClient(img); c != nil {
		data, mt, err := c.Manifest(ctx, repo, d.String())
		if err != nil {
			return nil, "", failure.Explain(err, r.Name(img))
		}
		return data, mt, nil
	}
	src, err := r.source(ctx, img)
	if err != nil {
		return nil, "", err
	}
	// Opening a docker source already fetched the manifest its reference
	// names; when that is d, take it from there instead of a second GET.
	if c, ok := src.Reference().DockerReference().(reference.Canonical); ok && c.Digest() == d {
		if data, mt, err := src.GetManifest(ctx, nil); err == nil && d.Algorithm().Available() && d.Algorithm().FromBytes(data) == d {
			return data, mt, nil
		}
	}
	data, mt, err := src.GetManifest(ctx, &d)
	if err != nil {
		return nil, "", r.explain(err, img)
	}
	return data, mt, nil
}

// Blob implements Source.
func (r *Registry) Blob(ctx context.Context, img imageset.Image, desc ocispec.Descriptor) (io.ReadCloser, error) {
	if c, repo := r.pullClient(img); c != nil {
		rc, err := c.Blob(ctx, repo, desc.Digest, desc.Size)
		if err != nil {
			return nil, failure.Explain(err, r.Name(img))
		}
		return rc, nil
	}
	src, err := r.source(ctx, img)
	if err != nil {
		return nil, err
	}
	rc, _, err := src.GetBlob(ctx, types.BlobInfo{Digest: desc.Digest, Size: desc.Size, MediaType: desc.MediaType}, r.cache)
	if err != nil {
		return nil, r.explain(err, img)
	}
	return rc, nil
}

// headDigest returns the digest of the manifest named (by tag or digest)
// names, with one HEAD, without registries.conf mirrors (as
// docker.GetDigest). The run's shared client for the host asks when it
// may; containers/image opens a client, and pings /v2/, for every lookup,
// which doubled the cost of no-change reruns.
func (r *Registry) headDigest(ctx context.Context, named reference.Named) (digest.Digest, error) {
	return r.HeadDigestAt(ctx, named, types.OptionalBoolUndefined)
}

// HeadDigestAt is headDigest for a registries.conf pull source (a
// [[registry.mirror]] or the rewritten location): skipVerify is its
// entry's insecure where no --*-tls-verify flag decides (see sharedClientAt).
func (r *Registry) HeadDigestAt(ctx context.Context, named reference.Named, skipVerify types.OptionalBool) (digest.Digest, error) {
	if c := r.sharedClientAt(named, skipVerify); c != nil {
		ref := "latest"
		switch n := named.(type) {
		case reference.Canonical:
			ref = n.Digest().String()
		case reference.Tagged:
			ref = n.Tag()
		}
		d, _, err := c.Head(ctx, reference.Path(named), ref)
		if err == nil || failure.IsNotFound(err) {
			return d, err
		}
		// Anything else (an outage, credentials refused) is asked again
		// the way the copy connects, which also keeps its error messages.
	}
	ref, err := docker.NewReference(named)
	if err != nil {
		return "", err
	}
	return docker.GetDigest(ctx, r.sysAt(skipVerify), ref)
}

// ResolveDigest returns the manifest digest ref (by tag or digest) names
// upstream, honouring registries.conf mirrors.
func (r *Registry) ResolveDigest(ctx context.Context, ref reference.Named) (digest.Digest, error) {
	if c, ok := ref.(reference.Canonical); ok {
		return c.Digest(), nil
	}
	if data, d, ok, err := r.readTagShared(ctx, ref); ok {
		if err != nil {
			return "", failure.Explain(err, ref.String())
		}
		if data == nil {
			return d, nil // known from earlier runs: HEAD said which
		}
		if d, err := manifest.Digest(data); err == nil {
			r.KeepResolved(ref.Name(), d, data)
			return d, nil
		}
	}
	iref, err := docker.NewReference(ref)
	if err != nil {
		return "", fmt.Errorf("image reference %q: %w", ref, err)
	}
	var d digest.Digest
	err = Retry(ctx, r.Retries, r.RetryDelay, func() error {
		src, err := iref.NewImageSource(ctx, r.sys)
		if err != nil {
			return err
		}
		defer src.Close()
		data, _, err := src.GetManifest(ctx, nil)
		if err != nil {
			return err
		}
		if d, err = manifest.Digest(data); err == nil {
			r.KeepResolved(ref.Name(), d, data)
		}
		return err
	})
	if err != nil {
		return "", failure.Explain(err, ref.String())
	}
	return d, nil
}

// readTagShared reads the manifest the tag ref names with one GET through
// the run's shared client, when registries.conf sends pulls of ref to one
// place only (no mirrors to try in turn, not blocked, not marked
// insecure). ok says it has the answer: the manifest, or the registry's
// not-found (which the client asked with credentials where the registry
// may hide private repositories, and which says how to log in where the
// run has none). Otherwise the caller asks containers/image, which also
// retries and words the other errors.
//
// Where earlier runs of the workspace knew manifests (see Registry.seen),
// the tag is asked with a HEAD first, and a digest known already is the
// whole answer (data nil): a weekly rerun then reads no manifest for its
// tags, and on Docker Hub a HEAD does not count against the pull limit.
// A tag that moved costs its HEAD and one GET by digest.
func (r *Registry) readTagShared(ctx context.Context, ref reference.Named) (data []byte, d digest.Digest, ok bool, err error) {
	if _, tagged := ref.(reference.NamedTagged); !tagged {
		return nil, "", false, nil
	}
	target, ok := r.onlySource(ref)
	if !ok {
		return nil, "", false, nil
	}
	tagged, isTagged := target.(reference.NamedTagged)
	c := r.sharedClient(target)
	if !isTagged || c == nil {
		return nil, "", false, nil
	}
	get := tagged.Tag()
	if r.Seen != nil {
		hd, _, err := c.Head(ctx, reference.Path(target), tagged.Tag())
		switch {
		case err == nil && r.Seen(hd):
			return nil, hd, true, nil
		case err == nil:
			get = hd.String() // moved: read what it names now
		case registryapi.IsNotFound(err):
			return nil, "", true, err
		}
	}
	m, _, err := c.Manifest(ctx, reference.Path(target), get)
	switch {
	case err == nil:
		return m, "", true, nil
	case registryapi.IsNotFound(err):
		return nil, "", true, err
	}
	return nil, "", false, nil
}
