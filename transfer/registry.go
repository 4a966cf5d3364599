package transfer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/image/v5/docker"
	"go.podman.io/image/v5/manifest"
	"go.podman.io/image/v5/pkg/blobinfocache/memory"
	"go.podman.io/image/v5/pkg/docker/config"
	"go.podman.io/image/v5/pkg/sysregistriesv2"
	"go.podman.io/image/v5/types"

	"github.com/gapmirror/gapmirror/failure"
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

	// Sparse are the images (destination@digest) earlier runs copied
	// sparse, with their platforms; set before a copy, read-only during it.
	Sparse map[string][]string

	mu    sync.Mutex
	srcs  map[string]types.ImageSource
	dests map[string]types.ImageDestination
	// resolved keeps the manifests ResolveDigest and the signature lookup
	// read, by repository and digest, so that neither they nor the copy's
	// planning pass read one twice. (A manifest read from one repository
	// says nothing of another: an image naming a digest its repository does
	// not hold must fail, not be served another repository's read.)
	resolved map[manifestKey][]byte
	// Seen says whether earlier runs of the workspace handled manifest d
	// (its platform manifests are on record, or the store holds it), so a
	// tag resolving to it needs no manifest read; nil on a first run.
	Seen func(d digest.Digest) bool

	// clients answer existence checks, read and push with one client per
	// registry host and credentials for the whole run (see sharedClient).
	clients map[clientKey]*registryapi.Client // nil: use containers/image
	byRepo  map[string]*registryapi.Client    // sharedClient's answer by repository

	// Blob bookkeeping of the direct push path (see HasBlob), by
	// repository path at the mirror host.
	known    map[digest.Digest]string // a repository holding the blob (earlier runs, this run)
	have     map[string]bool          // repo@digest this run put or found there
	sessions map[string]string        // repo@digest → upload opened by a mount the registry could not do
	// trusted are the blobs (repo@digest) HasBlob took to be there on the
	// workspace's records alone, without asking; resend is where the run
	// reads blobs, to send one of them after all when a manifest PUT says
	// the registry lost it (see ResendFrom, PutManifest). Without resend,
	// HasBlob asks.
	trusted map[string]bool
	resend  Source
	log     *slog.Logger

	// The tags of repositories this run pushes several images into and no
	// earlier run of the workspace pushed to: one listing answers all their
	// existence checks where a HEAD each would (see HasManifest).
	expect     map[string]int         // repository path → images of the run going there
	tags       map[string]*listedTags // by repository path
	knownRepos map[string]bool        // repositories earlier runs put blobs in
	// catalog lists, on a first push, the repositories already under the
	// root: one request tells which repositories are new, whose images
	// then need no existence check at all (see lacksTag).
	catalog struct {
		once  sync.Once
		repos map[string]bool
		ok    bool
	}
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

type listedTags struct {
	once sync.Once
	tags map[string]bool
	err  error
}

// NewUpstream returns a Source reading each image from its upstream
// reference (imageset.Image.Source).
func NewUpstream(o RegistryOptions) *Registry {
	return &Registry{sys: o.SystemContext(), cache: memory.New(), Retries: 5, RetryDelay: 500 * time.Millisecond,
		srcs: map[string]types.ImageSource{}, dests: map[string]types.ImageDestination{}, resolved: map[manifestKey][]byte{}, clients: map[clientKey]*registryapi.Client{}, byRepo: map[string]*registryapi.Client{},
		known: map[digest.Digest]string{}, have: map[string]bool{}, sessions: map[string]string{}, trusted: map[string]bool{},
		expect: map[string]int{}, tags: map[string]*listedTags{}, knownRepos: map[string]bool{}}
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

// SystemContext is the containers/image context this side's registries
// are reached with (auth, certs.d, registries.conf, registries.d).
func (r *Registry) SystemContext() *types.SystemContext { return r.sys }

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
		return nil, failure.Explain(err, key)
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
	r.mu.Lock()
	c, ok := r.byRepo[key]
	r.mu.Unlock()
	if ok {
		return c
	}
	c = r.newSharedClient(named, sys)
	r.mu.Lock()
	r.byRepo[key] = c
	r.mu.Unlock()
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
	r.mu.Lock()
	defer r.mu.Unlock()
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

// Expect tells the mirror which images a copy is about to push (Copy
// calls it), so that existence checks in repositories new to this
// workspace can share one tag listing.
func (r *Registry) Expect(set *imageset.Set) {
	if r.root == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, img := range set.Images {
		if named, err := reference.ParseNormalizedNamed(r.Name(img)); err == nil {
			r.expect[reference.Path(named)]++
		}
	}
}

// lacksTag reports whether the mirror's repository of named certainly
// lacks its tag, from one listing of the repository's tags for the run.
// It lists only repositories that several images of the run go to and
// that no earlier run of the workspace put blobs in (a rerun finds its
// tags there, and a HEAD each is then cheaper than a listing).
func (r *Registry) lacksTag(ctx context.Context, named reference.Named) bool {
	tagged, ok := named.(reference.Tagged)
	if !ok {
		return false
	}
	repo := reference.Path(named)
	if r.newRepo(ctx, named) {
		return true
	}
	r.mu.Lock()
	if r.expect[repo] < 2 {
		r.mu.Unlock()
		return false
	}
	lt := r.tags[repo]
	if lt == nil {
		if r.knownRepos[repo] {
			r.mu.Unlock()
			return false
		}
		lt = &listedTags{}
		r.tags[repo] = lt
	}
	r.mu.Unlock()
	c := r.sharedClient(named)
	if c == nil {
		return false
	}
	lt.once.Do(func() {
		var tags []string
		tags, lt.err = c.Tags(ctx, repo)
		lt.tags = map[string]bool{}
		for _, t := range tags {
			lt.tags[t] = true
		}
	})
	return lt.err == nil && !lt.tags[tagged.Tag()]
}

// newRepo reports whether named's repository certainly does not exist yet,
// from one reading of the registry's catalog under the root, made only on a
// first push (no earlier run of the workspace put anything under the root;
// on a rerun the records and tag lists answer). A registry that does not
// offer its catalog (quay and others restrict it) leaves the tag lists and
// HEADs to answer. A repository the catalog misses is pushed to as new: at
// worst an image is copied again, never skipped wrongly.
func (r *Registry) newRepo(ctx context.Context, named reference.Named) bool {
	// One catalog request pays off from two repositories on.
	r.mu.Lock()
	first, repos := len(r.knownRepos) == 0, len(r.expect)
	r.mu.Unlock()
	if !first || repos < 2 {
		return false
	}
	r.catalog.once.Do(func() {
		c := r.sharedClient(named)
		if c == nil {
			return
		}
		prefix := ""
		if _, path, ok := strings.Cut(r.root, "/"); ok {
			prefix = strings.TrimSuffix(path, "/") + "/"
		}
		// Ten pages: a registry of more than 10,000 repositories is
		// cheaper to ask per repository.
		repos, err := c.Catalog(ctx, prefix, 10)
		if err != nil {
			slog.Debug("registry catalog not read: existence checks per repository", "root", r.root, "err", err)
			return
		}
		listed := make(map[string]bool, len(repos))
		for _, repo := range repos {
			listed[repo] = true
		}
		r.mu.Lock()
		r.catalog.repos, r.catalog.ok = listed, true
		r.mu.Unlock()
	})
	return r.unlisted(reference.Path(named))
}

// unlisted reports whether the catalog read at the start of a first push
// did not list repo: the repository did not exist then.
func (r *Registry) unlisted(repo string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.catalog.ok && !r.catalog.repos[repo]
}

// HasManifest implements Destination with one HEAD of the destination tag
// (none where the repository's listing says the tag is not there).
func (r *Registry) HasManifest(ctx context.Context, img imageset.Image, d digest.Digest) (bool, error) {
	named, err := reference.ParseNormalizedNamed(r.Name(img))
	if err != nil {
		return false, err
	}
	if r.root != "" && r.lacksTag(ctx, named) {
		return false, nil
	}
	got, err := r.headDigest(ctx, named)
	if err != nil {
		if failure.IsNotFound(err) {
			return false, nil
		}
		return false, r.explain(err, img)
	}
	if got != d {
		return false, nil
	}
	// A sparse image, or one an earlier run copied sparse: the tag alone
	// does not say whether the platforms wanted now are there.
	if len(img.Platforms) > 0 || len(r.Sparse[img.Destination+"@"+d.String()]) > 0 {
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
	if !IsIndex(MediaTypeOf(data)) {
		return true, nil
	}
	kids, err := Children(data)
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
			if failure.IsNotFound(err) {
				return false, nil
			}
			return false, failure.Explain(err, byDigest.String())
		}
	}
	return true, nil
}

// headBlobLimit: the direct push path asks whether the mirror has a blob
// it knows nothing of (not in the workspace's records, not put by this
// run) only when the blob is this large; a smaller one costs about as
// much to send as to ask about.
const headBlobLimit = 1 << 20

// HasBlob implements Destination. Through the run's client for the
// mirror: a blob this run put or found in the repository is there (no
// request), and so is one the workspace's records place in the repository
// when the run can send it again (ResendFrom): the manifest PUT, which the
// registry refuses while a blob it references is missing, is the check;
// one another repository of the run or of the records holds is mounted
// from there (one POST, trusted only on 201; the upload the registry opens
// instead serves PutBlob); a large unknown blob gets a HEAD; a small one is
// reported absent and sent. Elsewhere containers/image HEADs and mounts.
func (r *Registry) HasBlob(ctx context.Context, img imageset.Image, desc ocispec.Descriptor) (bool, error) {
	if c, repo := r.pushClient(img); c != nil {
		key := repo + "@" + desc.Digest.String()
		r.mu.Lock()
		have, from := r.have[key], r.known[desc.Digest]
		r.mu.Unlock()
		switch {
		case have:
			return true, nil
		case from != "" && from != repo:
			mounted, loc, err := c.Mount(ctx, repo, from, desc.Digest)
			if err != nil {
				return false, failure.Explain(err, r.Name(img))
			}
			if mounted {
				r.put(repo, desc.Digest)
				return true, nil
			}
			if loc != "" {
				r.mu.Lock()
				r.sessions[key] = loc
				r.mu.Unlock()
			}
			return false, nil
		case from == repo:
			r.mu.Lock()
			resend := r.resend != nil
			if resend {
				r.trusted[key] = true
			}
			r.mu.Unlock()
			if resend {
				return true, nil
			}
			return r.HeadBlob(ctx, img, desc)
		case desc.Size >= headBlobLimit && !r.unlisted(repo):
			// A large blob may be there already (another tool pushed
			// it); a repository that did not exist holds none.
			return r.HeadBlob(ctx, img, desc)
		}
		return false, nil
	}
	dst, err := r.dest(ctx, img)
	if err != nil {
		return false, err
	}
	recordCompression(r.cache, desc.Digest, desc.MediaType)
	ok, _, err := dst.TryReusingBlob(ctx, types.BlobInfo{Digest: desc.Digest, Size: desc.Size, MediaType: desc.MediaType}, r.cache, false)
	if err != nil {
		return false, r.explain(err, img)
	}
	return ok, nil
}

// HeadBlob asks the mirror whether img's repository holds the blob; the
// copy asks when the source does not have a blob HasBlob did not ask about.
func (r *Registry) HeadBlob(ctx context.Context, img imageset.Image, desc ocispec.Descriptor) (bool, error) {
	c, repo := r.pushClient(img)
	if c == nil {
		return r.HasBlob(ctx, img, desc)
	}
	has, err := c.HasBlob(ctx, repo, desc.Digest)
	if err != nil {
		return false, failure.Explain(err, r.Name(img))
	}
	if has {
		r.put(repo, desc.Digest)
	}
	return has, nil
}

// put notes that repo holds blob d.
func (r *Registry) put(repo string, d digest.Digest) {
	r.mu.Lock()
	r.have[repo+"@"+d.String()] = true
	delete(r.trusted, repo+"@"+d.String())
	if _, ok := r.known[d]; !ok {
		r.known[d] = repo
	}
	r.mu.Unlock()
}

// PutBlob implements Destination: one monolithic upload (the mirror checks
// the digest before it keeps the blob).
func (r *Registry) PutBlob(ctx context.Context, img imageset.Image, desc ocispec.Descriptor, rd io.Reader) error {
	if c, repo := r.pushClient(img); c != nil {
		key := repo + "@" + desc.Digest.String()
		r.mu.Lock()
		loc := r.sessions[key]
		delete(r.sessions, key)
		r.mu.Unlock()
		if err := c.PutBlob(ctx, repo, desc.Digest, desc.Size, rd, loc); err != nil {
			return failure.Explain(err, r.Name(img))
		}
		r.put(repo, desc.Digest)
		return nil
	}
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
		return r.explain(err, img)
	}
	if info.Digest == "" && got.Digest != desc.Digest {
		return fmt.Errorf("%s: blob %s was written with digest %s: the content read did not match the manifest; run again to retry", r.Name(img), desc.Digest, got.Digest)
	}
	return nil
}

// PutManifest implements Destination: instances by digest, the image's own
// manifest by its destination tag.
func (r *Registry) PutManifest(ctx context.Context, img imageset.Image, desc ocispec.Descriptor, data []byte, top bool) error {
	if c, repo := r.pushClient(img); c != nil {
		ref := desc.Digest.String()
		if top {
			named, err := reference.ParseNormalizedNamed(r.Name(img))
			if err != nil {
				return err
			}
			if tagged, ok := named.(reference.Tagged); ok {
				ref = tagged.Tag()
			}
		}
		err := c.PutManifest(ctx, repo, ref, desc.MediaType, data)
		if refusedManifest(err) {
			// Blobs taken to be there on the records alone may be gone
			// (the registry was restored, or cleaned): distribution
			// answers MANIFEST_BLOB_UNKNOWN, others in words of their
			// own, so any refusal has them checked. The missing ones are
			// sent, then the manifest again.
			var sent bool
			if sent, err = r.resendTrusted(ctx, c, repo, img, data, err); sent {
				err = c.PutManifest(ctx, repo, ref, desc.MediaType, data)
			}
		}
		if err != nil {
			return failure.Explain(err, r.Name(img))
		}
		return nil
	}
	dst, err := r.dest(ctx, img)
	if err != nil {
		return err
	}
	var instance *digest.Digest
	if !top {
		instance = &desc.Digest
	}
	if err := dst.PutManifest(ctx, data, instance); err != nil {
		return r.explain(err, img)
	}
	return nil
}

// ResendFrom lets HasBlob trust the workspace's records of which blobs a
// repository holds: src is where the run reads img's blobs, to send one
// after all that the registry turns out to have lost. log hears of that.
func (r *Registry) ResendFrom(src Source, log *slog.Logger) {
	r.mu.Lock()
	r.resend, r.log = src, log
	r.mu.Unlock()
}

// refusedManifest reports a registry's refusal of a manifest PUT for its
// content (4xx other than authentication, permission and rate limits).
func refusedManifest(err error) bool {
	var e *registryapi.Error
	if !errors.As(err, &e) || e.Status < 400 || e.Status >= 500 {
		return false
	}
	return e.Status != http.StatusUnauthorized && e.Status != http.StatusForbidden && e.Status != http.StatusTooManyRequests
}

// resendTrusted sends into repo the blobs of the image manifest data that
// HasBlob trusted the records for and that the registry does not have
// (one HEAD each), after the registry refused the manifest (refused).
// sent is false, with refused as the error, when no such blob was missing:
// the refusal is about something else.
func (r *Registry) resendTrusted(ctx context.Context, c *registryapi.Client, repo string, img imageset.Image, data []byte, refused error) (sent bool, err error) {
	if IsIndex(MediaTypeOf(data)) {
		return false, refused
	}
	blobs, err := blobsOf(data)
	if err != nil {
		return false, refused
	}
	r.mu.Lock()
	src, log := r.resend, r.log
	var suspects []ocispec.Descriptor
	for _, b := range blobs {
		if r.trusted[repo+"@"+b.Digest.String()] {
			suspects = append(suspects, b)
		}
	}
	r.mu.Unlock()
	if src == nil || len(suspects) == 0 {
		return false, refused
	}
	for _, b := range suspects {
		// Errors wrap what went wrong here, so that it decides whether the
		// copy tries again; the refusal is told in words.
		has, err := c.HasBlob(ctx, repo, b.Digest)
		if err != nil {
			return false, fmt.Errorf("the registry refused the manifest (%v); asking about blob %s, which the workspace records place there: %w", refused, b.Digest, err)
		}
		if has {
			r.put(repo, b.Digest)
			continue
		}
		if log != nil {
			log.Warn("the mirror lost a blob the workspace records place there: sending it again", "image", r.Name(img), "blob", b.Digest, "size", b.Size)
		}
		if err := r.sendFrom(ctx, c, src, repo, img, b); err != nil {
			return false, fmt.Errorf("the registry refused the manifest (%v) and lacks blob %s, which the workspace records place there; sending it again: %w", refused, b.Digest, err)
		}
		sent = true
	}
	if !sent {
		return false, refused
	}
	return true, nil
}

// sendFrom uploads blob b of img from src into repo, verified against its
// digest as it is read.
func (r *Registry) sendFrom(ctx context.Context, c *registryapi.Client, src Source, repo string, img imageset.Image, b ocispec.Descriptor) error {
	rc, err := src.Blob(ctx, img, b)
	if err != nil {
		return err
	}
	defer rc.Close()
	vr := &verifyingReader{r: rc, desc: b, v: b.Digest.Verifier(), progress: nopProgress{}}
	if err := c.PutBlob(ctx, repo, b.Digest, b.Size, vr, ""); err != nil {
		if vr.err != nil {
			return vr.err
		}
		return err
	}
	if vr.n != b.Size || !vr.v.Verified() {
		return &failure.DigestError{Digest: b.Digest, Msg: "the destination accepted a blob that was not read whole"}
	}
	r.put(repo, b.Digest)
	return nil
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

// manifestKey is a manifest of one upstream repository.
type manifestKey struct {
	repo string
	d    digest.Digest
}

// repoOf is the repository of image reference name (its normalized name
// without tag or digest), name itself when it does not parse.
func repoOf(name string) string {
	named, err := reference.ParseNormalizedNamed(name)
	if err != nil {
		return name
	}
	return named.Name()
}

// KeptManifest is manifest d of img's repository as the resolution kept
// it (see resolved); take also forgets it, for a reader that keeps it from
// then on.
func (r *Registry) KeptManifest(img imageset.Image, d digest.Digest, take bool) ([]byte, bool) {
	k := manifestKey{repoOf(r.Name(img)), d}
	r.mu.Lock()
	defer r.mu.Unlock()
	data, ok := r.resolved[k]
	if take {
		delete(r.resolved, k)
	}
	return data, ok
}

// KeepResolved keeps data for later reads of manifest d of the repository
// of name in this run (see resolved) when it is d.
func (r *Registry) KeepResolved(name string, d digest.Digest, data []byte) {
	if d.Validate() != nil || d.Algorithm().FromBytes(data) != d {
		return
	}
	r.mu.Lock()
	r.resolved[manifestKey{repoOf(name), d}] = data
	r.mu.Unlock()
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
		r.mu.Lock()
		if _, ok := r.known[d]; !ok {
			r.known[d] = reference.Path(named)
		}
		r.knownRepos[reference.Path(named)] = true
		r.mu.Unlock()
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
