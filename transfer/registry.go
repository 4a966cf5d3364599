package transfer

import (
	"fmt"
	"strings"
	"time"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
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

// Registry reaches images in container registries: upstream as a Source
// (each image by its Source), a mirror root as a Destination (and Source)
// of images named by their Destination. Its methods follow three roles,
// each in a file of its own: reading a source (pull.go), writing a
// destination (push.go), and, under both, how a repository is reached
// (connections) and what the run has already seen (runMemory).
type Registry struct {
	// root is the mirror root ("host[:port][/prefix]") for a destination; for
	// an upstream source it is empty and images are found by their Source.
	root string

	// Retries and RetryDelay govern retries of reference resolution.
	Retries    int
	RetryDelay time.Duration

	// Sparse are the images (destination@digest) earlier runs copied
	// sparse, with their platforms; set before a copy, read-only during it.
	Sparse map[string][]string
	// Seen says whether earlier runs of the workspace handled manifest d
	// (its platform manifests are on record, or the store holds it), so a
	// tag resolving to it needs no manifest read; nil on a first run.
	Seen func(d digest.Digest) bool

	connections
	runMemory
	referrers referrerLocks
}

// NewUpstream returns a Source reading each image from its upstream
// reference (imageset.Image.Source).
func NewUpstream(o RegistryOptions) *Registry {
	return &Registry{Retries: 5, RetryDelay: 500 * time.Millisecond,
		connections: connections{sys: o.SystemContext(), clients: map[clientKey]*registryapi.Client{}, byRepo: map[string]sharedAnswer{}},
		runMemory: runMemory{resolved: map[manifestKey][]byte{}, known: map[digest.Digest]string{}, have: map[string]bool{}, sessions: map[string]string{}, trusted: map[string]bool{},
			expect: map[string]int{}, tags: map[string]*listedTags{}, knownRepos: map[string]bool{}}}
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
