package transfer

import (
	"context"
	"fmt"
	"io"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/image/v5/manifest"
	"go.podman.io/image/v5/types"

	"github.com/gapmirror/gapmirror/failure"
	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/registryapi"
)

// Manifest implements Source: the manifest the tag resolution read, else
// one GET by digest (verified by the client) from img's pull sources.
func (r *Registry) Manifest(ctx context.Context, img imageset.Image, d digest.Digest) ([]byte, string, error) {
	if data, ok := r.KeptManifest(img, d, false); ok {
		return data, MediaTypeOf(data), nil
	}
	return r.readManifest(ctx, img, d)
}

// Blob implements Source: from the pull source that served img's manifest
// first, then the others.
func (r *Registry) Blob(ctx context.Context, img imageset.Image, desc ocispec.Descriptor) (io.ReadCloser, error) {
	var rc io.ReadCloser
	err := r.fromSources(img, func(s pullSource) (err error) {
		rc, err = s.client.Blob(ctx, reference.Path(s.ref), desc.Digest, desc.Size)
		return err
	})
	return rc, err
}

// headDigest returns the digest of the manifest named (by tag or digest)
// names, with one HEAD, without registries.conf mirrors (as
// docker.GetDigest), through the run's shared client for the host.
func (r *Registry) headDigest(ctx context.Context, named reference.Named) (digest.Digest, error) {
	return r.HeadDigestAt(ctx, named, types.OptionalBoolUndefined)
}

// HeadDigestAt is headDigest for a registries.conf pull source (a
// [[registry.mirror]] or the rewritten location): skipVerify is its
// entry's insecure where no --*-tls-verify flag decides (see sharedClientAt).
func (r *Registry) HeadDigestAt(ctx context.Context, named reference.Named, skipVerify types.OptionalBool) (digest.Digest, error) {
	c, err := r.sharedClientAt(named, skipVerify)
	if err != nil {
		return "", err
	}
	ref := "latest"
	switch n := named.(type) {
	case reference.Canonical:
		ref = n.Digest().String()
	case reference.Tagged:
		ref = n.Tag()
	}
	d, _, err := c.Head(ctx, reference.Path(named), ref)
	return d, err
}

// ResolveDigest returns the manifest digest ref (by tag or digest) names
// upstream, from its pull sources in turn (registries.conf mirrors that
// serve tags first), retrying what may pass.
func (r *Registry) ResolveDigest(ctx context.Context, ref reference.Named) (digest.Digest, error) {
	if c, ok := ref.(reference.Canonical); ok {
		return c.Digest(), nil
	}
	ref = reference.TagNameOnly(ref)
	srcs, err := r.sourcesOf(ref)
	if err != nil {
		return "", failure.Explain(err, ref.String())
	}
	var d digest.Digest
	err = r.trySources(ref.String(), srcs, func(s pullSource) error {
		return Retry(ctx, r.Retries, r.RetryDelay, func() (err error) {
			d, err = r.readTag(ctx, ref, s)
			return err
		})
	})
	return d, err
}

// readTag reads the manifest the tag of s.ref (ref's pull source s) names
// with one GET, and keeps it for the copy (see resolved) as ref's.
//
// Where earlier runs of the workspace knew manifests (see Registry.Seen),
// the tag is asked with a HEAD first, and a digest known already is the
// whole answer: a weekly rerun then reads no manifest for its tags, and on
// Docker Hub a HEAD does not count against the pull limit. A tag that
// moved costs its HEAD and one GET by digest.
func (r *Registry) readTag(ctx context.Context, ref reference.Named, s pullSource) (digest.Digest, error) {
	tagged, ok := s.ref.(reference.NamedTagged)
	if !ok {
		return "", fmt.Errorf("internal: %s is not a tag", s.ref)
	}
	repo, get := reference.Path(s.ref), tagged.Tag()
	if r.Seen != nil {
		hd, _, err := s.client.Head(ctx, repo, get)
		switch {
		case err == nil && r.Seen(hd):
			return hd, nil
		case err == nil:
			get = hd.String() // moved: read what it names now
		case registryapi.IsNotFound(err):
			return "", err
		}
	}
	data, _, err := s.client.Manifest(ctx, repo, get)
	if err != nil {
		return "", err
	}
	d, err := manifest.Digest(data)
	if err != nil {
		return "", fmt.Errorf("the manifest %s names: %w", s.ref, err)
	}
	r.KeepResolved(ref.Name(), d, data)
	return d, nil
}

// readManifest reads manifest d of img from its pull sources: by digest,
// or, for img's own manifest where pullRef reads by tag, by the tag, and
// then only when the tag names d there.
func (r *Registry) readManifest(ctx context.Context, img imageset.Image, d digest.Digest) (data []byte, mt string, err error) {
	err = r.fromSources(img, func(s pullSource) error {
		ref := d.String()
		if tagged, ok := s.ref.(reference.NamedTagged); ok && d.String() == img.Digest {
			ref = tagged.Tag()
		}
		got, gotMT, err := s.client.Manifest(ctx, reference.Path(s.ref), ref)
		if err != nil {
			return err
		}
		if ref != d.String() && (d.Validate() != nil || d.Algorithm().FromBytes(got) != d) {
			return &failure.DigestError{Digest: d, Msg: fmt.Sprintf("tag %s names another manifest there", s.ref)}
		}
		data, mt = got, gotMT
		return nil
	})
	return data, mt, err
}
