package transfer

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	"go.podman.io/image/v5/pkg/docker/config"
	"go.podman.io/image/v5/pkg/sysregistriesv2"
	"go.podman.io/image/v5/types"

	"github.com/gapmirror/gapmirror/failure"
	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/registryapi"
)

// connections is how a Registry reaches a repository: through the run's
// one registryapi client per registry host, credentials and TLS decision,
// whatever registries.conf says of the repository. registries.conf decides
// where requests go (its mirrors, tried in turn, and rewritten locations:
// pullSources) and how (its insecure entries, by the longest prefix, as
// containers/image decides), never which engine copies: every source and
// destination gets the same retries, token renewal and request counts.
type connections struct {
	sys *types.SystemContext

	mu sync.Mutex
	// clients are the run's registry clients (see sharedClient).
	clients map[clientKey]*registryapi.Client
	byRepo  map[string]sharedAnswer // sharedClientAt's answer by repository and TLS decision
	// sources are pullSources' answers by image: asked for every read of
	// a copy, they depend on registries.conf alone, read once per run.
	sources map[string][]pullSource
}

// clientKey names a shared client: a registry's API host, the credentials
// the auth file gives for the repositories it serves (the host's own, or a
// repository's or namespace's entry) and the TLS decision for them.
type clientKey struct {
	host       string
	creds      types.DockerAuthConfig
	skipVerify types.OptionalBool
}

type sharedAnswer struct {
	c   *registryapi.Client
	err error
}

// dockerHubAPI is the host Docker Hub's registry API answers on: images
// are named docker.io/…, their requests go to registry-1.docker.io, as
// containers/image sends them. A variable for the tests, which serve
// docker.io from a registry on 127.0.0.1.
var dockerHubAPI = "registry-1.docker.io"

// sysAt is the registries' context with the TLS decision skipVerify, where
// no --*-tls-verify flag made one for the whole side.
func (r *Registry) sysAt(skipVerify types.OptionalBool) *types.SystemContext {
	if skipVerify == types.OptionalBoolUndefined || r.sys.DockerInsecureSkipTLSVerify != types.OptionalBoolUndefined {
		return r.sys
	}
	sys := *r.sys
	sys.DockerInsecureSkipTLSVerify = skipVerify
	return &sys
}

// sharedClient returns the run's client for named's registry, with the
// credentials the auth file gives for named (the host's, or those of an
// entry for its repository or namespace: one client each) and TLS verified
// as registries.conf's entry for named says (a namespace may be insecure
// where the rest of its host is not). A repository registries.conf blocks
// is refused, in the words containers/image uses.
func (r *Registry) sharedClient(named reference.Named) (*registryapi.Client, error) {
	return r.sharedClientAt(named, types.OptionalBoolUndefined)
}

// sharedClientAt is sharedClient for a registries.conf pull source of an
// image (one of its [[registry.mirror]] entries, or its entry's location):
// those are reached as their entry says (skipVerify: the entry's insecure)
// where no --*-tls-verify flag decides, not as an entry of their own host
// would.
func (r *Registry) sharedClientAt(named reference.Named, skipVerify types.OptionalBool) (*registryapi.Client, error) {
	// The answer depends on the repository only (registries.conf and the
	// auth file are read once per run): asked for every request of a
	// copy, it is kept.
	key := fmt.Sprintf("%s\x00%d", named.Name(), skipVerify)
	r.connections.mu.Lock()
	a, ok := r.byRepo[key]
	r.connections.mu.Unlock()
	if ok {
		return a.c, a.err
	}
	c, err := r.newSharedClient(named, skipVerify)
	r.connections.mu.Lock()
	r.byRepo[key] = sharedAnswer{c, err}
	r.connections.mu.Unlock()
	return c, err
}

func (r *Registry) newSharedClient(named reference.Named, skipVerify types.OptionalBool) (*registryapi.Client, error) {
	if err := registryapi.Blocked(r.sys, named.Name()); err != nil {
		return nil, err
	}
	if skipVerify == types.OptionalBoolUndefined && r.sys.DockerInsecureSkipTLSVerify == types.OptionalBoolUndefined {
		// registries.conf marks registries insecure by prefix, which may
		// be a namespace: the client is made with the decision of named's
		// own entry, not its host's.
		reg, err := sysregistriesv2.FindRegistry(r.sys, named.Name())
		if err != nil {
			return nil, fmt.Errorf("registries configuration: %w", err)
		}
		skipVerify = types.NewOptionalBool(reg != nil && reg.Insecure)
	}
	sys := r.sysAt(skipVerify)
	forRef, err := config.GetCredentialsForRef(r.sys, named)
	if err != nil {
		return nil, fmt.Errorf("credentials for %s: %w (check --authfile)", named.Name(), err)
	}
	host := reference.Domain(named)
	if host == "docker.io" {
		host = dockerHubAPI
	}
	key := clientKey{host, forRef, sys.DockerInsecureSkipTLSVerify}
	r.connections.mu.Lock()
	defer r.connections.mu.Unlock()
	if c, ok := r.clients[key]; ok {
		return c, nil
	}
	withCreds := *sys
	withCreds.DockerAuthConfig = &forRef
	c, err := registryapi.NewClient(host, &withCreds)
	if err != nil {
		return nil, err
	}
	r.clients[key] = c
	return c, nil
}

// RepositoryClient is the run's client for img's repository at the
// mirror, and that repository's path: what an audit of the mirror asks
// through, one client per host as the copy's.
func (r *Registry) RepositoryClient(img imageset.Image) (*registryapi.Client, string, error) {
	return r.pushClient(img)
}

// pushClient is the run's client for img's repository at the mirror, and
// that repository's path.
func (r *Registry) pushClient(img imageset.Image) (*registryapi.Client, string, error) {
	if r.root == "" {
		return nil, "", errors.New("internal: pushing to an upstream")
	}
	named, err := reference.ParseNormalizedNamed(r.Name(img))
	if err != nil {
		return nil, "", fmt.Errorf("destination %q: %w", r.Name(img), err)
	}
	c, err := r.sharedClient(named)
	if err != nil {
		return nil, "", failure.Explain(err, r.Name(img))
	}
	return c, reference.Path(named), nil
}

// pullSource is one place reads of an image go to: its reference there
// and the run's client for it, or why there is none (a location
// registries.conf blocks: tried in its turn, it fails without a request).
type pullSource struct {
	ref    reference.Named
	client *registryapi.Client
	err    error
}

// pullSources are the places reads of img go to, in the order they are
// tried: for an upstream image, what registries.conf says of its reference
// (pullRef): its [[registry.mirror]] entries as pull-from-mirror allows,
// then its location (rewritten by the entry's location, if any); for a
// mirror, the image's repository there, by digest.
func (r *Registry) pullSources(img imageset.Image) ([]pullSource, error) {
	key := r.Name(img) + "\x00" + img.Origin
	r.connections.mu.Lock()
	srcs, ok := r.sources[key]
	r.connections.mu.Unlock()
	if ok {
		return srcs, nil
	}
	srcs, err := r.findSources(img)
	if err != nil {
		return nil, err
	}
	r.connections.mu.Lock()
	if r.sources == nil {
		r.sources = map[string][]pullSource{}
	}
	r.sources[key] = srcs
	r.connections.mu.Unlock()
	return srcs, nil
}

// findSources is pullSources, worked out.
func (r *Registry) findSources(img imageset.Image) ([]pullSource, error) {
	named, err := r.pullRef(img)
	if err != nil {
		return nil, fmt.Errorf("image reference %q: %w", r.Name(img), err)
	}
	if r.root != "" {
		// Read the mirror by digest: the tag may have moved.
		if named, err = reference.WithDigest(reference.TrimNamed(named), digest.Digest(img.Digest)); err != nil {
			return nil, err
		}
		c, err := r.sharedClient(named)
		return []pullSource{{named, c, err}}, nil
	}
	srcs, err := r.sourcesOf(named)
	if err != nil {
		return nil, failure.Explain(err, r.Name(img))
	}
	return srcs, nil
}

// sourcesOf is pullSources for a reference upstream.
func (r *Registry) sourcesOf(ref reference.Named) ([]pullSource, error) {
	reg, err := sysregistriesv2.FindRegistry(r.sys, ref.String())
	if err != nil {
		return nil, fmt.Errorf("registries configuration: %w", err)
	}
	if reg == nil {
		c, err := r.sharedClient(ref)
		return []pullSource{{ref, c, err}}, nil
	}
	entries, err := reg.PullSourcesFromReference(ref)
	if err != nil {
		return nil, fmt.Errorf("registries configuration for %s: %w", ref, err)
	}
	out := make([]pullSource, 0, len(entries))
	for _, e := range entries {
		c, err := r.sharedClientAt(e.Reference, types.NewOptionalBool(e.Endpoint.Insecure))
		out = append(out, pullSource{e.Reference, c, err})
	}
	return out, nil
}

// try runs read against s, or fails with why s cannot be reached.
func (s pullSource) try(read func(pullSource) error) error {
	if s.err != nil {
		return s.err
	}
	return read(s)
}

// fromSources runs read against img's pull sources (see trySources).
func (r *Registry) fromSources(img imageset.Image, read func(src pullSource) error) error {
	srcs, err := r.pullSources(img)
	if err != nil {
		return err
	}
	return r.trySources(r.Name(img), srcs, read)
}

// trySources runs read against the pull sources srcs of the image name in
// turn, the one that served its repository last first (its blobs are where
// its manifest was), until one succeeds. Where all fail, the error is the
// last source's (the image's own location), naming what the mirrors before
// it answered, as containers/image words it.
func (r *Registry) trySources(name string, srcs []pullSource, read func(src pullSource) error) error {
	if len(srcs) == 1 {
		if err := srcs[0].try(read); err != nil {
			return failure.Explain(err, name)
		}
		return nil
	}
	errs := make([]error, len(srcs))
	for _, i := range tryOrder(r.servedBy(name, len(srcs)), len(srcs)) {
		if errs[i] = srcs[i].try(read); errs[i] == nil {
			r.served(name, i)
			return nil
		}
	}
	mirrors := make([]string, 0, len(srcs)-1)
	for i, s := range srcs[:len(srcs)-1] {
		mirrors = append(mirrors, fmt.Sprintf("%s: %v", s.ref, errs[i]))
	}
	return fmt.Errorf("%w (mirrors also failed: [%s])", failure.Explain(errs[len(srcs)-1], name), strings.Join(mirrors, "; "))
}

// tryOrder is the order n pull sources are tried in: first (the one that
// served the repository last), then the others in registries.conf's order.
func tryOrder(first, n int) []int {
	order := make([]int, 0, n)
	order = append(order, first)
	for i := range n {
		if i != first {
			order = append(order, i)
		}
	}
	return order
}

// pullRef is the reference img is read by: its name here (upstream, its
// Source, by digest), or, where registries.conf has mirrors for tags only
// (pull-from-mirror = "tag-only", what an ImageTagMirrorSet writes), the
// tag it was resolved from: by digest those mirrors are not tried; by the
// tag, the mirror that has it serves the digest (checked), as the
// resolution read it.
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

// Close implements Source and Destination: the run's clients hold no
// state that needs closing.
func (r *Registry) Close() error { return nil }
