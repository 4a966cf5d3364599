package transfer

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	"go.podman.io/image/v5/docker"
	"go.podman.io/image/v5/pkg/docker/config"
	"go.podman.io/image/v5/pkg/sysregistriesv2"
	"go.podman.io/image/v5/types"

	"github.com/gapmirror/gapmirror/failure"
	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/registryapi"
)

// connections is how a Registry reaches a repository: the run's shared
// registryapi client per host and credentials where registries.conf sends
// an image's requests to one place, else containers/image, which keeps a
// source and a destination per image (the second path, for registries.conf
// mirrors tried in turn, namespaces marked insecure unlike their host,
// blocked repositories and Docker Hub).
type connections struct {
	sys   *types.SystemContext
	cache types.BlobInfoCache

	mu    sync.Mutex
	srcs  map[string]types.ImageSource
	dests map[string]types.ImageDestination
	// clients answer existence checks, read and push with one client per
	// registry host and credentials for the whole run (see sharedClient).
	clients map[clientKey]*registryapi.Client // nil: use containers/image
	byRepo  map[string]*registryapi.Client    // sharedClient's answer by repository
}

// clientKey names a shared client: a registry host and the credentials the
// auth file gives for the repositories it serves (the host's own, or a
// repository's or namespace's entry).
type clientKey struct {
	host  string
	creds types.DockerAuthConfig
	// skipVerify is the TLS decision the client was made with: a
	// registries.conf mirror may be insecure where its host is not.
	skipVerify types.OptionalBool
}

func (r *Registry) source(ctx context.Context, img imageset.Image) (types.ImageSource, error) {
	key := r.Name(img)
	r.connections.mu.Lock()
	src := r.srcs[key]
	r.connections.mu.Unlock()
	if src != nil {
		return src, nil
	}
	named, err := r.pullRef(img)
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
		return nil, failure.Explain(err, key)
	}
	r.connections.mu.Lock()
	if have := r.srcs[key]; have != nil {
		r.connections.mu.Unlock()
		src.Close()
		return have, nil
	}
	r.srcs[key] = src
	r.connections.mu.Unlock()
	return src, nil
}

func (r *Registry) dest(ctx context.Context, img imageset.Image) (types.ImageDestination, error) {
	key := r.Name(img)
	r.connections.mu.Lock()
	defer r.connections.mu.Unlock()
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
		return nil, failure.Explain(err, key)
	}
	r.dests[key] = d
	return d, nil
}

// ImageDone closes the connections opened for img.
func (r *Registry) ImageDone(img imageset.Image) {
	key := r.Name(img)
	r.connections.mu.Lock()
	src, dst := r.srcs[key], r.dests[key]
	delete(r.srcs, key)
	delete(r.dests, key)
	r.connections.mu.Unlock()
	if src != nil {
		src.Close()
	}
	if dst != nil {
		dst.Close()
	}
}

// Close closes every open connection.
func (r *Registry) Close() error {
	r.connections.mu.Lock()
	defer r.connections.mu.Unlock()
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

// sysAt is the system context for reaching a registries.conf pull source
// whose entry says skipVerify (undefined: not a pull source, or a
// --*-tls-verify flag decides).
func (r *Registry) sysAt(skipVerify types.OptionalBool) *types.SystemContext {
	if skipVerify == types.OptionalBoolUndefined || r.sys.DockerInsecureSkipTLSVerify != types.OptionalBoolUndefined {
		return r.sys
	}
	sys := *r.sys
	sys.DockerInsecureSkipTLSVerify = skipVerify
	return &sys
}

// sharedClient returns the run's client for named's registry and the
// credentials the auth file gives for named (the host's, or those of an
// entry for its repository or namespace: one client each), or nil where it
// would not connect as containers/image does: Docker Hub (another API
// host), a namespace registries.conf marks insecure while the rest of its
// host is not (or the reverse), a repository registries.conf blocks
// (containers/image refuses it, in its words).
func (r *Registry) sharedClient(named reference.Named) *registryapi.Client {
	return r.sharedClientAt(named, types.OptionalBoolUndefined)
}

// sharedClientAt is sharedClient for a registries.conf pull source of an
// image (one of its [[registry.mirror]] entries, or its entry's location):
// containers/image reaches those as their entry says (skipVerify: the
// entry's insecure) where no --*-tls-verify flag decides, not as an entry
// of their own host would.
func (r *Registry) sharedClientAt(named reference.Named, skipVerify types.OptionalBool) *registryapi.Client {
	// The answer depends on the repository only (registries.conf and the
	// auth file are read once per run): asked for every request of a
	// copy, it is kept.
	sys := r.sysAt(skipVerify)
	key := named.Name()
	if sys != r.sys {
		key = fmt.Sprintf("%s\x00%d", key, skipVerify)
	}
	r.connections.mu.Lock()
	c, ok := r.byRepo[key]
	r.connections.mu.Unlock()
	if ok {
		return c
	}
	c = r.newSharedClient(named, sys)
	r.connections.mu.Lock()
	r.byRepo[key] = c
	r.connections.mu.Unlock()
	return c
}

func (r *Registry) newSharedClient(named reference.Named, sys *types.SystemContext) *registryapi.Client {
	host := reference.Domain(named)
	if host == "docker.io" {
		return nil
	}
	if registryapi.Blocked(sys, named.Name()) != nil {
		return nil
	}
	if sys.DockerInsecureSkipTLSVerify == types.OptionalBoolUndefined {
		// registries.conf marks a registry insecure by prefix, which may be
		// a namespace; the client is one for the host and reads the
		// host's entry (registryapi.Transport). Where the two differ,
		// containers/image connects.
		repo, err := sysregistriesv2.FindRegistry(r.sys, named.Name())
		if err != nil {
			return nil
		}
		if whole, err := r.hostInsecure(host); err != nil || (repo != nil && repo.Insecure) != whole {
			return nil
		}
	}
	forRef, err := config.GetCredentialsForRef(r.sys, named)
	if err != nil {
		return nil
	}
	key := clientKey{host, forRef, sys.DockerInsecureSkipTLSVerify}
	r.connections.mu.Lock()
	defer r.connections.mu.Unlock()
	c, ok := r.clients[key]
	if !ok {
		sys := *sys
		sys.DockerAuthConfig = &forRef
		if c, err = registryapi.NewClient(host, &sys); err != nil {
			c = nil
		}
		r.clients[key] = c
	}
	return c
}

// pushClient is the run's client for img's repository at the mirror, and
// that repository's path, or nil where containers/image connects (see
// sharedClient).
func (r *Registry) pushClient(img imageset.Image) (*registryapi.Client, string) {
	if r.root == "" {
		return nil, ""
	}
	named, err := reference.ParseNormalizedNamed(r.Name(img))
	if err != nil {
		return nil, ""
	}
	c := r.sharedClient(named)
	if c == nil {
		return nil, ""
	}
	return c, reference.Path(named)
}

// pullClient is the run's client for reading img, and its repository path
// there, when registries.conf sends pulls of img to one place only (no
// mirrors to try in turn, not blocked; see onlySource); else nil and
// containers/image reads it.
func (r *Registry) pullClient(img imageset.Image) (*registryapi.Client, string) {
	named, err := r.pullRef(img)
	if err != nil {
		return nil, ""
	}
	if r.root != "" {
		named, err = reference.WithDigest(reference.TrimNamed(named), digest.Digest(img.Digest))
		if err != nil {
			return nil, ""
		}
	}
	target, ok := r.onlySource(named)
	if !ok {
		return nil, ""
	}
	c := r.sharedClient(target)
	if c == nil {
		return nil, ""
	}
	return c, reference.Path(target)
}

// onlySource is where registries.conf sends pulls of ref when that is one
// place (ref itself, or its one rewritten location), not blocked, and
// marked insecure (or not) as its whole host is.
func (r *Registry) onlySource(ref reference.Named) (reference.Named, bool) {
	reg, err := sysregistriesv2.FindRegistry(r.sys, ref.String())
	if err != nil {
		return nil, false
	}
	if reg == nil {
		return ref, true
	}
	if reg.Blocked {
		return nil, false
	}
	sources, err := reg.PullSourcesFromReference(ref)
	if err != nil || len(sources) != 1 {
		return nil, false
	}
	if r.sys.DockerInsecureSkipTLSVerify == types.OptionalBoolUndefined {
		// containers/image verifies TLS as the source's entry says; the
		// client as the entry of the source's whole host says.
		if whole, err := r.hostInsecure(reference.Domain(sources[0].Reference)); err != nil || sources[0].Endpoint.Insecure != whole {
			return nil, false
		}
	}
	return sources[0].Reference, true
}

// hostInsecure is what registries.conf says of host as a whole (the entry
// registryapi.Transport reads for the run's shared client of host).
func (r *Registry) hostInsecure(host string) (bool, error) {
	whole, err := sysregistriesv2.FindRegistry(r.sys, host+"/x")
	return whole != nil && whole.Insecure, err
}

// pullRef is the reference img is read by: its name here (upstream, its
// Source, by digest), or, where registries.conf has mirrors for tags only
// (pull-from-mirror = "tag-only", what an ImageTagMirrorSet writes), the
// tag it was resolved from. By digest those mirrors are not tried; opened
// by the tag, containers/image reads the digest (verified) from the
// mirror that has the tag, as the resolution did.
func (r *Registry) pullRef(img imageset.Image) (reference.Named, error) {
	named, err := reference.ParseNormalizedNamed(r.Name(img))
	if err != nil || r.root != "" || img.Origin == "" {
		return named, err
	}
	origin, err := reference.ParseNormalizedNamed(img.Origin)
	if err != nil {
		return named, nil
	}
	tagged, ok := origin.(reference.NamedTagged)
	if _, digested := origin.(reference.Digested); !ok || digested || origin.Name() != named.Name() {
		return named, nil
	}
	reg, err := sysregistriesv2.FindRegistry(r.sys, named.Name())
	if err != nil || reg == nil || len(reg.Mirrors) == 0 {
		return named, nil
	}
	byDigest, err := reg.PullSourcesFromReference(named)
	if err != nil {
		return named, nil
	}
	byTag, err := reg.PullSourcesFromReference(tagged)
	if err != nil || len(byTag) <= len(byDigest) {
		return named, nil
	}
	return tagged, nil
}

// triedInTurn reports whether registries.conf gives img, read from this
// upstream, [[registry.mirror]] entries to try before its source: which of
// them serves an image depends on the image (pull-from-mirror, what each
// holds), so the failure of one image there is no verdict on the others
// of its registry.
func (r *Registry) triedInTurn(img imageset.Image) bool {
	if r.root != "" {
		return false
	}
	named, err := reference.ParseNormalizedNamed(r.Name(img))
	if err != nil {
		return false
	}
	reg, err := sysregistriesv2.FindRegistry(r.sys, named.Name())
	return err == nil && reg != nil && len(reg.Mirrors) > 0
}

// explain is failure.Explain for an operation on img; when the operation failed
// because the registry's ping failed (a 5xx, a reset), it also forgets
// img's source and destination: containers/image remembers a failed ping
// for the life of the client, so a retry with the same one fails again
// however soon the registry is back.
func (r *Registry) explain(err error, img imageset.Image) error {
	if strings.Contains(err.Error(), "pinging container registry") {
		key := r.Name(img)
		r.connections.mu.Lock()
		// Not closed: other blobs of the image may be using them; a client
		// whose ping failed holds no connection worth closing.
		delete(r.srcs, key)
		delete(r.dests, key)
		r.connections.mu.Unlock()
	}
	return failure.Explain(err, r.Name(img))
}

// planClient is the run's shared client for img's registry when reading by
// digest through it reaches the same place containers/image would: one pull
// source in registries.conf, not blocked (see onlySource).
func (r *Registry) planClient(img imageset.Image) (reference.Named, *registryapi.Client) {
	named, err := r.pullRef(img)
	if err != nil {
		return nil, nil
	}
	if r.root == "" {
		var ok bool
		if named, ok = r.onlySource(named); !ok {
			return nil, nil
		}
	}
	c := r.sharedClient(named)
	if c == nil {
		return nil, nil
	}
	return named, c
}
