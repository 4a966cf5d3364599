package mirror

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/distribution/reference"
	"github.com/docker/distribution/registry/api/errcode"
	v2 "github.com/docker/distribution/registry/api/v2"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/image/v5/docker"
	"go.podman.io/image/v5/manifest"
	"go.podman.io/image/v5/pkg/blobinfocache/memory"
	"go.podman.io/image/v5/pkg/docker/config"
	"go.podman.io/image/v5/pkg/sysregistriesv2"
	"go.podman.io/image/v5/types"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/registryapi"
)

// RegistryOptions say how to reach one side's registries. They map onto
// containers/image's SystemContext, so auth.json, registries.conf mirrors and
// certs.d work as they do for podman and skopeo.
type RegistryOptions struct {
	// AuthFile is a containers auth.json (or docker config.json); empty:
	// $REGISTRY_AUTH_FILE, then the containers and docker defaults.
	AuthFile string
	// TLSVerify is --src-tls-verify / --dest-tls-verify as skopeo reads it:
	// undefined leaves registries.conf (`insecure`) and certs.d in charge;
	// true verifies every registry of this side, false none (and allows
	// plain HTTP).
	TLSVerify types.OptionalBool
	// CertDir holds ca.crt / client certificates for the registries of this side.
	CertDir string
	// RegistriesConf is a registries.conf (mirrors, blocked registries);
	// empty: the system's.
	RegistriesConf string
	// RegistriesConfDir is a registries.conf.d directory; empty: the system's.
	RegistriesConfDir string
	// RegistriesDir is a registries.d directory (where sigstore signatures
	// are looked up, "lookaside" and use-sigstore-attachments); empty:
	// ~/.config/containers/registries.d, then /etc/containers/registries.d.
	RegistriesDir string
	// UserAgent is sent with every request.
	UserAgent string
	// Credentials, when set, are used for every registry of this side
	// instead of the auth file (skopeo's --src-creds; empty: anonymous).
	Credentials *types.DockerAuthConfig
	// RegistryToken is a bearer token sent to every registry of this side.
	RegistryToken string
}

// SystemContext builds the containers/image context for these options.
func (o RegistryOptions) SystemContext() *types.SystemContext {
	sys := &types.SystemContext{
		AuthFilePath:                o.AuthFile,
		DockerCertPath:              o.CertDir,
		SystemRegistriesConfPath:    o.RegistriesConf,
		SystemRegistriesConfDirPath: o.RegistriesConfDir,
		RegistriesDirPath:           o.RegistriesDir,
		DockerRegistryUserAgent:     o.UserAgent,
		DockerAuthConfig:            o.Credentials,
		DockerBearerRegistryToken:   o.RegistryToken,
	}
	// Undefined stays undefined: containers/image then asks registries.conf.
	switch o.TLSVerify {
	case types.OptionalBoolTrue:
		sys.DockerInsecureSkipTLSVerify = types.OptionalBoolFalse
	case types.OptionalBoolFalse:
		sys.DockerInsecureSkipTLSVerify = types.OptionalBoolTrue
		sys.OCIInsecureSkipTLSVerify = true
	}
	return sys
}

// Insecure reports whether TLS verification is turned off for the whole side.
func (o RegistryOptions) Insecure() bool { return o.TLSVerify == types.OptionalBoolFalse }

// Registry reaches images in container registries.
type Registry struct {
	sys   *types.SystemContext
	cache types.BlobInfoCache
	// root is the mirror root ("host[:port][/prefix]") for a destination; for
	// an upstream source it is empty and images are found by their Source.
	root string

	// Retries and RetryDelay govern retries of reference resolution.
	Retries    int
	RetryDelay time.Duration

	// sparse are the images (destination@digest) earlier runs copied
	// sparse, with their platforms; set before a copy, read-only during it.
	sparse map[string][]string

	mu    sync.Mutex
	srcs  map[string]types.ImageSource
	dests map[string]types.ImageDestination
	// resolved keeps the manifests ResolveDigest read, by digest, so the
	// signature lookup need not read them again.
	resolved map[digest.Digest][]byte

	// clients answer existence checks with one client per registry host
	// for the whole run (see headDigest).
	clients map[string]*registryapi.Client // by host; nil: use containers/image
}

// NewUpstream returns a Source reading each image from its upstream
// reference (imageset.Image.Source).
func NewUpstream(o RegistryOptions) *Registry {
	return &Registry{sys: o.SystemContext(), cache: memory.New(), Retries: 5, RetryDelay: 500 * time.Millisecond,
		srcs: map[string]types.ImageSource{}, dests: map[string]types.ImageDestination{}, resolved: map[digest.Digest][]byte{}, clients: map[string]*registryapi.Client{}}
}

// NewMirror returns the mirror registry at root ("host[:port][/prefix]") as a
// Destination (and Source) of images named by their destination.
func NewMirror(root string, o RegistryOptions) (*Registry, error) {
	root = strings.TrimSuffix(strings.TrimPrefix(root, "docker://"), "/")
	if _, err := reference.ParseNormalizedNamed(root + "/x"); err != nil || !strings.ContainsAny(strings.SplitN(root, "/", 2)[0], ".:") && !strings.HasPrefix(root, "localhost") {
		return nil, fmt.Errorf("mirror registry %q is not of the form host[:port][/path] (use a host name with a dot or a port, or localhost)", root)
	}
	r := NewUpstream(o)
	r.root = root
	return r, nil
}

// Root is the mirror root, empty for an upstream.
func (r *Registry) Root() string { return r.root }

// Name is where img lives in this registry.
func (r *Registry) Name(img imageset.Image) string {
	if r.root == "" {
		return img.Source
	}
	return r.root + "/" + img.Destination
}

func (r *Registry) String() string {
	if r.root == "" {
		return "upstream registries"
	}
	return "docker://" + r.root
}

func (r *Registry) source(ctx context.Context, img imageset.Image) (types.ImageSource, error) {
	key := r.Name(img)
	r.mu.Lock()
	src := r.srcs[key]
	r.mu.Unlock()
	if src != nil {
		return src, nil
	}
	named, err := reference.ParseNormalizedNamed(key)
	if err != nil {
		return nil, fmt.Errorf("image reference %q: %w", key, err)
	}
	if r.root != "" {
		// Read the mirror by digest: the tag may have moved.
		named, err = reference.WithDigest(reference.TrimNamed(named), digest.Digest(img.Digest))
		if err != nil {
			return nil, err
		}
	}
	ref, err := docker.NewReference(named)
	if err != nil {
		return nil, fmt.Errorf("image reference %q: %w", key, err)
	}
	src, err = ref.NewImageSource(ctx, r.sys)
	if err != nil {
		return nil, explain(err, key)
	}
	r.mu.Lock()
	if have := r.srcs[key]; have != nil {
		r.mu.Unlock()
		src.Close()
		return have, nil
	}
	r.srcs[key] = src
	r.mu.Unlock()
	return src, nil
}

func (r *Registry) dest(ctx context.Context, img imageset.Image) (types.ImageDestination, error) {
	key := r.Name(img)
	r.mu.Lock()
	defer r.mu.Unlock()
	if d := r.dests[key]; d != nil {
		return d, nil
	}
	named, err := reference.ParseNormalizedNamed(key)
	if err != nil {
		return nil, fmt.Errorf("destination %q: %w", key, err)
	}
	ref, err := docker.NewReference(named)
	if err != nil {
		return nil, fmt.Errorf("destination %q: %w", key, err)
	}
	d, err := ref.NewImageDestination(ctx, r.sys)
	if err != nil {
		return nil, explain(err, key)
	}
	r.dests[key] = d
	return d, nil
}

// ImageDone closes the connections opened for img.
func (r *Registry) ImageDone(img imageset.Image) {
	key := r.Name(img)
	r.mu.Lock()
	src, dst := r.srcs[key], r.dests[key]
	delete(r.srcs, key)
	delete(r.dests, key)
	r.mu.Unlock()
	if src != nil {
		src.Close()
	}
	if dst != nil {
		dst.Close()
	}
}

// Close closes every open connection.
func (r *Registry) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, s := range r.srcs {
		s.Close()
		delete(r.srcs, k)
	}
	for k, d := range r.dests {
		d.Close()
		delete(r.dests, k)
	}
	return nil
}

// Manifest implements Source.
func (r *Registry) Manifest(ctx context.Context, img imageset.Image, d digest.Digest) ([]byte, string, error) {
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
		return nil, "", explain(err, r.Name(img))
	}
	return data, mt, nil
}

// Blob implements Source.
func (r *Registry) Blob(ctx context.Context, img imageset.Image, desc ocispec.Descriptor) (io.ReadCloser, error) {
	src, err := r.source(ctx, img)
	if err != nil {
		return nil, err
	}
	rc, _, err := src.GetBlob(ctx, types.BlobInfo{Digest: desc.Digest, Size: desc.Size, MediaType: desc.MediaType}, r.cache)
	if err != nil {
		return nil, explain(err, r.Name(img))
	}
	return rc, nil
}

// headDigest returns the digest of the manifest named (by tag or digest)
// names, with one HEAD, without registries.conf mirrors (as
// docker.GetDigest). The run's shared client for the host asks when it
// may; containers/image opens a client, and pings /v2/, for every lookup,
// which doubled the cost of no-change reruns.
func (r *Registry) headDigest(ctx context.Context, named reference.Named) (digest.Digest, error) {
	if c := r.sharedClient(named); c != nil {
		ref := "latest"
		switch n := named.(type) {
		case reference.Canonical:
			ref = n.Digest().String()
		case reference.Tagged:
			ref = n.Tag()
		}
		d, _, err := c.Head(ctx, reference.Path(named), ref)
		if err == nil || isNotFound(err) {
			return d, err
		}
		// Anything else (an outage, credentials refused) is asked again
		// the way the copy connects, which also keeps its error messages.
	}
	ref, err := docker.NewReference(named)
	if err != nil {
		return "", err
	}
	return docker.GetDigest(ctx, r.sys, ref)
}

// sharedClient returns the run's client for named's registry, or nil where
// it would not connect as containers/image does: Docker Hub (another API
// host), a registry registries.conf marks insecure, or credentials in the
// auth file scoped to the repository rather than the host.
func (r *Registry) sharedClient(named reference.Named) *registryapi.Client {
	host := reference.Domain(named)
	if host == "docker.io" {
		return nil
	}
	if r.sys.DockerInsecureSkipTLSVerify != types.OptionalBoolTrue {
		reg, err := sysregistriesv2.FindRegistry(r.sys, named.Name())
		if err != nil || reg != nil && reg.Insecure {
			return nil
		}
	}
	forRef, err := config.GetCredentialsForRef(r.sys, named)
	if err != nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.clients[host]
	if !ok {
		if c, err = registryapi.NewClient(host, r.sys); err != nil {
			c = nil
		}
		r.clients[host] = c
	}
	if c == nil || c.Credentials() != forRef {
		return nil
	}
	return c
}

// HasManifest implements Destination with one HEAD of the destination tag.
func (r *Registry) HasManifest(ctx context.Context, img imageset.Image, d digest.Digest) (bool, error) {
	named, err := reference.ParseNormalizedNamed(r.Name(img))
	if err != nil {
		return false, err
	}
	got, err := r.headDigest(ctx, named)
	if err != nil {
		if isNotFound(err) {
			return false, nil
		}
		return false, explain(err, r.Name(img))
	}
	if got != d {
		return false, nil
	}
	// A sparse image, or one an earlier run copied sparse: the tag alone
	// does not say whether the platforms wanted now are there.
	if len(img.Platforms) > 0 || len(r.sparse[img.Destination+"@"+d.String()]) > 0 {
		return r.hasInstances(ctx, img, d)
	}
	return true, nil
}

// hasInstances reports whether the mirror holds the instances of the index d
// that the sparse image img needs: an earlier run may have copied it for
// fewer platforms. Missing instances of other platforms are not asked for.
func (r *Registry) hasInstances(ctx context.Context, img imageset.Image, d digest.Digest) (bool, error) {
	data, _, err := r.Manifest(ctx, img, d)
	if err != nil {
		return false, err
	}
	if !isIndex(mediaTypeOf(data)) {
		return true, nil
	}
	kids, err := children(data)
	if err != nil {
		return false, fmt.Errorf("%s: parsing index %s: %w", r.Name(img), d, err)
	}
	if kids, err = instances(img, d, kids); err != nil {
		return false, nil // the copy reports it
	}
	named, err := reference.ParseNormalizedNamed(r.Name(img))
	if err != nil {
		return false, err
	}
	for _, k := range kids {
		byDigest, err := reference.WithDigest(reference.TrimNamed(named), k.Digest)
		if err != nil {
			return false, err
		}
		if _, err := r.headDigest(ctx, byDigest); err != nil {
			if isNotFound(err) {
				return false, nil
			}
			return false, explain(err, byDigest.String())
		}
	}
	return true, nil
}

// HasBlob implements Destination: a HEAD in the image's repository, then a
// cross-repository mount from wherever this run has put the blob before.
func (r *Registry) HasBlob(ctx context.Context, img imageset.Image, desc ocispec.Descriptor) (bool, error) {
	dst, err := r.dest(ctx, img)
	if err != nil {
		return false, err
	}
	recordCompression(r.cache, desc.Digest, desc.MediaType)
	ok, _, err := dst.TryReusingBlob(ctx, types.BlobInfo{Digest: desc.Digest, Size: desc.Size, MediaType: desc.MediaType}, r.cache, false)
	if err != nil {
		return false, explain(err, r.Name(img))
	}
	return ok, nil
}

// PutBlob implements Destination.
func (r *Registry) PutBlob(ctx context.Context, img imageset.Image, desc ocispec.Descriptor, rd io.Reader) error {
	dst, err := r.dest(ctx, img)
	if err != nil {
		return err
	}
	isConfig := strings.Contains(desc.MediaType, "config")
	info := types.BlobInfo{Digest: desc.Digest, Size: desc.Size, MediaType: desc.MediaType}
	if desc.Digest.Algorithm() == digest.Canonical {
		// Given a digest, the docker destination HEADs the blob again before
		// uploading, though the copy has just asked (HasBlob). Without one it
		// hashes the stream and uploads under that digest, which rd (a
		// verifying reader) guarantees is desc.Digest. Other algorithms are
		// uploaded under sha256 either way, so they keep theirs.
		info.Digest = ""
	}
	got, err := dst.PutBlob(ctx, rd, info, r.cache, isConfig)
	if err != nil {
		return explain(err, r.Name(img))
	}
	if info.Digest == "" && got.Digest != desc.Digest {
		return fmt.Errorf("%s: blob %s was written with digest %s: the content read did not match the manifest; run again to retry", r.Name(img), desc.Digest, got.Digest)
	}
	return nil
}

// PutManifest implements Destination: instances by digest, the image's own
// manifest by its destination tag.
func (r *Registry) PutManifest(ctx context.Context, img imageset.Image, desc ocispec.Descriptor, data []byte, top bool) error {
	dst, err := r.dest(ctx, img)
	if err != nil {
		return err
	}
	var instance *digest.Digest
	if !top {
		instance = &desc.Digest
	}
	if err := dst.PutManifest(ctx, data, instance); err != nil {
		return explain(err, r.Name(img))
	}
	return nil
}

// ResolveDigest returns the manifest digest ref (by tag or digest) names
// upstream, honouring registries.conf mirrors.
func (r *Registry) ResolveDigest(ctx context.Context, ref reference.Named) (digest.Digest, error) {
	if c, ok := ref.(reference.Canonical); ok {
		return c.Digest(), nil
	}
	if data, ok := r.readTagShared(ctx, ref); ok {
		if d, err := manifest.Digest(data); err == nil {
			r.mu.Lock()
			r.resolved[d] = data
			r.mu.Unlock()
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
			r.mu.Lock()
			r.resolved[d] = data
			r.mu.Unlock()
		}
		return err
	})
	if err != nil {
		return "", explain(err, ref.String())
	}
	return d, nil
}

// readTagShared reads the manifest the tag ref names with one GET through
// the run's shared client, when registries.conf sends pulls of ref to one
// place only (no mirrors to try in turn, not blocked, not marked
// insecure). ok is false when it did not read it: the caller asks
// containers/image, which also words the errors.
func (r *Registry) readTagShared(ctx context.Context, ref reference.Named) (data []byte, ok bool) {
	if _, tagged := ref.(reference.NamedTagged); !tagged {
		return nil, false
	}
	target := ref
	reg, err := sysregistriesv2.FindRegistry(r.sys, ref.String())
	if err != nil {
		return nil, false
	}
	if reg != nil {
		if reg.Blocked {
			return nil, false
		}
		sources, err := reg.PullSourcesFromReference(ref)
		if err != nil || len(sources) != 1 || sources[0].Endpoint.Insecure && r.sys.DockerInsecureSkipTLSVerify != types.OptionalBoolTrue {
			return nil, false
		}
		target = sources[0].Reference
	}
	tagged, isTagged := target.(reference.NamedTagged)
	c := r.sharedClient(target)
	if !isTagged || c == nil {
		return nil, false
	}
	data, _, err = c.Manifest(ctx, reference.Path(target), tagged.Tag())
	return data, err == nil
}

func isNotFound(err error) bool {
	// containers/image reports a bodiless 404 (HEAD) only as text.
	if strings.Contains(err.Error(), "StatusCode: 404,") {
		return true
	}
	var status docker.UnexpectedHTTPStatusError
	if errors.As(err, &status) && status.StatusCode == http.StatusNotFound {
		return true
	}
	if registryapi.IsNotFound(err) {
		return true
	}
	var ec errcode.Error
	if errors.As(err, &ec) {
		return ec.Code == v2.ErrorCodeManifestUnknown || ec.Code == v2.ErrorCodeNameUnknown
	}
	var ecs errcode.Errors
	if errors.As(err, &ecs) {
		for _, e := range ecs {
			if isNotFound(e) {
				return true
			}
		}
	}
	return false
}

// explain adds what the user can do about common registry answers. The
// registry's own answer is kept in the chain.
func explain(err error, ref string) error {
	msg := err.Error()
	var hint string
	var unauthorized docker.ErrUnauthorizedForCredentials
	switch {
	case errors.As(err, &unauthorized) || strings.Contains(msg, "unauthorized") || strings.Contains(msg, "authentication required"):
		hint = "check the credentials for this registry in --authfile / $REGISTRY_AUTH_FILE (podman login / docker login)"
	case strings.Contains(msg, "denied"):
		hint = "the account --authfile gives for this registry may not do this (a mirror needs pull and push, a source pull); check its permissions"
	case strings.Contains(msg, "x509:") || strings.Contains(msg, "certificate"):
		hint = "the registry's TLS certificate is not trusted: add its CA (--src-cert-dir/--dest-cert-dir, /etc/containers/certs.d) or pass --src-tls-verify=false / --dest-tls-verify=false for this side"
	case strings.Contains(msg, "server gave HTTP response to HTTPS client"):
		hint = "the registry speaks plain HTTP: pass --src-tls-verify=false / --dest-tls-verify=false for this side"
	case strings.Contains(msg, "connection refused") || strings.Contains(msg, "no such host") || strings.Contains(msg, "i/o timeout"):
		hint = "the registry is unreachable: check the host name, port and network (and HTTP(S)_PROXY)"
	case isNotFound(err) || strings.Contains(msg, "manifest unknown"):
		hint = "the image or tag does not exist there"
	}
	if hint == "" {
		return fmt.Errorf("%s: %w", ref, err)
	}
	return fmt.Errorf("%s: %w (%s)", ref, err, hint)
}

// KnownLocations tells the registry where blobs already are (destination
// repository per digest, as an earlier run recorded), so new images can
// mount them instead of needing their bytes.
func (r *Registry) KnownLocations(locs map[digest.Digest]string) {
	if r.root == "" {
		return
	}
	host := strings.SplitN(r.root, "/", 2)[0]
	for d, repo := range locs {
		named, err := reference.ParseNormalizedNamed(r.root + "/" + repo)
		if err != nil {
			continue
		}
		r.cache.RecordKnownLocation(docker.Transport, types.BICTransportScope{Opaque: host}, d, types.BICLocationReference{Opaque: named.Name()})
	}
}

// Check makes sure the mirror registry answers and accepts our credentials,
// so that an unreachable or misconfigured mirror fails the run up front
// with one clear error instead of one error per image.
func (r *Registry) Check(ctx context.Context, img imageset.Image) error {
	if _, err := r.HasManifest(ctx, img, digest.Digest(img.Digest)); err != nil {
		return fmt.Errorf("cannot use the mirror registry %s: %w", r.root, err)
	}
	return nil
}
