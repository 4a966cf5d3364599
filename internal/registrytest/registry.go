// Package registrytest runs the reference OCI registry (distribution/distribution)
// in-process on 127.0.0.1 for tests, demos and benchmarks, with optional basic
// or token auth (with its own token server), TLS, on-disk storage and fault
// injection.
//
// The registry's configuration is always built in code: REGISTRY_* environment
// variables (which the registry normally reads as overrides) have no effect.
package registrytest

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry/handlers"
	"golang.org/x/crypto/bcrypt"

	// Registered by name in the registry's factories: the htpasswd and token
	// access controllers and the two storage drivers this package offers.
	_ "github.com/distribution/distribution/v3/registry/auth/htpasswd"
	_ "github.com/distribution/distribution/v3/registry/auth/token"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/middleware/redirect"
)

// Options configures a Registry. The zero value is an in-memory, plain-HTTP
// registry without auth on a random 127.0.0.1 port.
type Options struct {
	// Addr is the listen address; empty means "127.0.0.1:0" (a free loopback port).
	Addr string
	// Dir, when set, stores content on disk under this directory (filesystem
	// driver); empty means in memory. The directory is left in place on Close.
	Dir string
	// Username and Password, when set, require HTTP basic auth (htpasswd, bcrypt).
	Username string
	// Password is the password of Username.
	Password string
	// ReadOnly are more basic-auth accounts (with Username, not Token) that
	// may pull but not push or delete: their writes are answered 403
	// DENIED, as by a registry (or a proxy in front of one) that limits an
	// account to reads. Token auth has TokenUser.Actions for the same.
	ReadOnly []Account
	// Token, when set, replaces basic auth with the bearer token flow: a
	// token server on its own port checks Username/Password (every action)
	// and Token.Users; see TokenRealm and IssuedTokens.
	Token *TokenAuth
	// TLS serves HTTPS with a self-signed certificate for 127.0.0.1, ::1 and
	// localhost, generated on start; see CAPEM, CertsDir and Client.
	TLS bool
	// SparseIndexes accepts image indexes whose platform manifests are not all
	// in the repository (validation.manifests.indexes.platforms: none).
	SparseIndexes bool
	// DisableDelete turns manifest and blob deletes off (storage.delete.enabled:
	// false), as many production registries run: DELETE answers 405 UNSUPPORTED.
	DisableDelete bool
	// HideFromAnonymous serves requests without credentials as registries
	// that allow anonymous pulls of public repositories and hide private
	// ones do (Artifactory or Nexus with anonymous access, Quay's and
	// Harbor's private repositories): /v2/ answers 200 with no challenge,
	// every request about a repository 404 NAME_UNKNOWN and the catalog
	// is empty. Requests with credentials meet the registry's own auth
	// (basic or token), which Username or Token must turn on. See
	// Registry.HiddenAnswers.
	HideFromAnonymous bool
	// Wrap, when set, wraps the registry's handler (fault injection, request
	// recording). It can be replaced later with SetWrap.
	Wrap func(http.Handler) http.Handler
	// BlobCDN serves blob GETs as registries behind a CDN do (quay.io,
	// registry.redhat.io, Docker Hub): 307 to a plain file server on its
	// own 127.0.0.1 port, named localhost, over the storage (Dir is
	// required), which, like a
	// presigned S3 URL, refuses any request carrying an Authorization
	// header (400), so a client that sends the registry's credentials
	// along fails. See CDNRequests.
	BlobCDN bool
	// ConnState, when set, is the server's http.Server.ConnState hook: it
	// sees every connection clients open, including those that never carry
	// a request (a TLS handshake tried against plain HTTP). WAN.ConnState
	// counts them.
	ConnState func(net.Conn, http.ConnState)
	// Debug lets the registry's own log lines and the HTTP server's errors
	// through to the standard logrus logger and stderr; they are dropped otherwise.
	Debug bool
}

// Account is a user name and its password.
type Account struct {
	Username, Password string
}

// Registry is a running in-process registry.
type Registry struct {
	opts     Options
	app      *handlers.App
	server   *http.Server
	listener net.Listener
	host     string
	scheme   string
	workDir  string // htpasswd, certificates, auth.json; removed on Close
	certsDir string
	caPEM    []byte
	authFile string
	client   *http.Client
	tokens   *tokenServer                 // nil without Options.Token
	handler  atomic.Pointer[http.Handler] // app wrapped by the current Wrap
	hidden   atomic.Int64                 // anonymous requests HideFromAnonymous answered
	served   chan error

	cdn         *http.Server // Options.BlobCDN's file server, else nil
	cdnURL      string
	cdnRequests atomic.Int64

	closeOnce sync.Once
	closeErr  error
}

// maxListEntries bounds /v2/_catalog and tags/list pages; big enough for any fixture.
const maxListEntries = 10000

// New starts a registry with opts and returns once it accepts connections.
// ctx scopes the registry's background work; call Close to stop it.
func New(ctx context.Context, opts Options) (*Registry, error) {
	if (opts.Username == "") != (opts.Password == "") {
		return nil, errors.New("registrytest: Options.Username and Options.Password must be set together")
	}
	if opts.HideFromAnonymous && opts.Username == "" && opts.Token == nil {
		return nil, errors.New("registrytest: Options.HideFromAnonymous needs auth (Username or Token)")
	}
	if opts.BlobCDN && opts.Dir == "" {
		return nil, errors.New("registrytest: Options.BlobCDN needs Options.Dir (the file server serves the storage directory)")
	}
	if len(opts.ReadOnly) > 0 && (opts.Username == "" || opts.Token != nil) {
		return nil, errors.New("registrytest: Options.ReadOnly needs basic auth (Options.Username, no Options.Token); with Token use TokenUser.Actions")
	}
	workDir, err := os.MkdirTemp("", "registrytest-")
	if err != nil {
		return nil, fmt.Errorf("registrytest: creating a work directory: %w", err)
	}
	r := &Registry{opts: opts, workDir: workDir, scheme: "http", served: make(chan error, 1)}
	if err := r.start(ctx); err != nil {
		_ = os.RemoveAll(workDir)
		return nil, err
	}
	return r, nil
}

func (r *Registry) start(ctx context.Context) error {
	opts := r.opts
	var cert *certificate
	if opts.TLS {
		var err error
		if cert, err = newSelfSignedCertificate(); err != nil {
			return err
		}
	}
	if opts.Token != nil {
		// The realm URL goes into the configuration, so the token server starts first.
		ts, err := startTokenServer(opts, r.workDir, cert)
		if err != nil {
			return err
		}
		r.tokens = ts
	}
	if opts.BlobCDN {
		// The redirect base goes into the configuration, so the CDN starts first.
		if err := r.startCDN(); err != nil {
			return r.closeTokens(err)
		}
	}
	cfg, err := r.configuration()
	if err != nil {
		return r.closeTokens(err)
	}
	setRegistryLogsVisible(opts.Debug)
	app, err := newApp(ctx, cfg)
	if err != nil {
		releaseRegistryLogs(opts.Debug)
		return r.closeTokens(err)
	}
	r.app = app
	r.SetWrap(opts.Wrap)

	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.Proxy = nil
	r.server = &http.Server{
		Handler:           http.HandlerFunc(r.serveHTTP),
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
		ConnState:         opts.ConnState,
	}
	if opts.Debug {
		r.server.ErrorLog = log.New(os.Stderr, "registrytest: ", log.LstdFlags)
	}
	if opts.TLS {
		r.scheme = "https"
		r.caPEM = cert.certPEM
		r.certsDir = filepath.Join(r.workDir, "certs.d")
		if err := os.MkdirAll(r.certsDir, 0o700); err != nil {
			return r.abort(fmt.Errorf("registrytest: creating the certificates directory: %w", err))
		}
		if err := os.WriteFile(filepath.Join(r.certsDir, "ca.crt"), cert.certPEM, 0o600); err != nil {
			return r.abort(fmt.Errorf("registrytest: writing ca.crt: %w", err))
		}
		r.server.TLSConfig = cert.serverConfig()
		transport.TLSClientConfig = cert.clientConfig()
	}
	r.client = &http.Client{Transport: transport}

	addr := opts.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return r.abort(fmt.Errorf("registrytest: listening on %s (change Options.Addr): %w", addr, err))
	}
	r.listener = ln
	r.host = ln.Addr().String()

	if opts.Username != "" {
		if err := r.writeAuthFile(); err != nil {
			_ = ln.Close()
			return r.abort(err)
		}
	}

	go func() {
		var err error
		if opts.TLS {
			err = r.server.ServeTLS(ln, "", "")
		} else {
			err = r.server.Serve(ln)
		}
		r.served <- err
	}()
	return nil
}

// abort undoes what start did before the server ran.
func (r *Registry) abort(err error) error {
	_ = r.app.Shutdown()
	releaseRegistryLogs(r.opts.Debug)
	return r.closeTokens(err)
}

// closeTokens stops the token server and the CDN, if any, and returns err.
func (r *Registry) closeTokens(err error) error {
	if r.tokens != nil {
		_ = r.tokens.close()
	}
	if r.cdn != nil {
		_ = r.cdn.Close()
	}
	return err
}

// startCDN serves Options.Dir over plain HTTP on a port of its own: the
// storage a blob GET is redirected to.
func (r *Registry) startCDN() error {
	dir, err := filepath.Abs(r.opts.Dir)
	if err != nil {
		return fmt.Errorf("registrytest: Options.Dir %q: %w", r.opts.Dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("registrytest: creating storage directory Options.Dir %q: %w", r.opts.Dir, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("registrytest: listening for the CDN: %w", err)
	}
	files := http.FileServer(http.Dir(dir))
	r.cdn = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			r.cdnRequests.Add(1)
			if req.Header.Get("Authorization") != "" {
				http.Error(w, "InvalidArgument: Only one auth mechanism allowed", http.StatusBadRequest)
				return
			}
			files.ServeHTTP(w, req)
		}),
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	// Another host name than the registry's, as a CDN has: clients then
	// drop the registry's credentials on the redirect (net/http compares
	// host names, not ports).
	r.cdnURL = "http://localhost:" + strings.TrimPrefix(ln.Addr().String(), "127.0.0.1:")
	go func() { _ = r.cdn.Serve(ln) }()
	return nil
}

// CDNRequests is how many requests Options.BlobCDN's file server got.
func (r *Registry) CDNRequests() int64 { return r.cdnRequests.Load() }

// cdnHost is the host:port of Options.BlobCDN's file server; "" without it.
func (r *Registry) cdnHost() string { return strings.TrimPrefix(r.cdnURL, "http://") }

// configuration builds the registry configuration in code, without reading the
// environment.
func (r *Registry) configuration() (*configuration.Configuration, error) {
	opts := r.opts
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, fmt.Errorf("registrytest: generating the HTTP secret: %w", err)
	}

	cfg := &configuration.Configuration{}
	cfg.Version = configuration.MajorMinorVersion(0, 1)
	cfg.Log.Level = "error"
	cfg.Log.AccessLog.Disabled = true
	cfg.HTTP.Secret = hex.EncodeToString(secret)
	cfg.Catalog.MaxEntries = maxListEntries
	cfg.Tags.MaxTags = maxListEntries

	storage := configuration.Storage{
		"delete":      configuration.Parameters{"enabled": !opts.DisableDelete},
		"redirect":    configuration.Parameters{"disable": !opts.BlobCDN},
		"cache":       configuration.Parameters{"blobdescriptor": "inmemory"},
		"maintenance": configuration.Parameters{"uploadpurging": map[any]any{"enabled": false}},
	}
	if opts.Dir != "" {
		dir, err := filepath.Abs(opts.Dir)
		if err != nil {
			return nil, fmt.Errorf("registrytest: Options.Dir %q: %w", opts.Dir, err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("registrytest: creating storage directory Options.Dir %q: %w", opts.Dir, err)
		}
		storage["filesystem"] = configuration.Parameters{"rootdirectory": dir}
	} else {
		storage["inmemory"] = configuration.Parameters{}
	}
	cfg.Storage = storage
	if opts.BlobCDN {
		cfg.Middleware = map[string][]configuration.Middleware{
			"storage": {{Name: "redirect", Options: configuration.Parameters{"baseurl": r.cdnURL}}},
		}
	}

	if opts.SparseIndexes {
		cfg.Validation.Manifests.Indexes.Platforms = "none"
	}

	if opts.Token != nil {
		cfg.Auth = configuration.Auth{"token": configuration.Parameters{
			"realm":          r.tokens.realm,
			"service":        tokenService,
			"issuer":         tokenIssuer,
			"rootcertbundle": r.tokens.bundle,
		}}
	} else if opts.Username != "" {
		hash, err := bcrypt.GenerateFromPassword([]byte(opts.Password), bcrypt.MinCost)
		if err != nil {
			return nil, fmt.Errorf("registrytest: hashing Options.Password: %w", err)
		}
		lines := opts.Username + ":" + string(hash) + "\n"
		for _, a := range opts.ReadOnly {
			h, err := bcrypt.GenerateFromPassword([]byte(a.Password), bcrypt.MinCost)
			if err != nil {
				return nil, fmt.Errorf("registrytest: hashing the password of Options.ReadOnly %s: %w", a.Username, err)
			}
			lines += a.Username + ":" + string(h) + "\n"
		}
		path := filepath.Join(r.workDir, "htpasswd")
		if err := os.WriteFile(path, []byte(lines), 0o600); err != nil {
			return nil, fmt.Errorf("registrytest: writing htpasswd: %w", err)
		}
		cfg.Auth = configuration.Auth{"htpasswd": configuration.Parameters{
			"realm": "registrytest",
			"path":  path,
		}}
	}
	return cfg, nil
}

// newApp builds the registry application, turning its construction panics into errors.
func newApp(ctx context.Context, cfg *configuration.Configuration) (app *handlers.App, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("registrytest: starting the registry: %v", p)
		}
	}()
	return handlers.NewApp(ctx, cfg), nil
}

// writeAuthFile writes a containers-auth.json for the registry's credentials.
func (r *Registry) writeAuthFile() error {
	type entry struct {
		Auth string `json:"auth"`
	}
	auth := base64.StdEncoding.EncodeToString([]byte(r.opts.Username + ":" + r.opts.Password))
	data, err := json.MarshalIndent(map[string]map[string]entry{
		"auths": {r.host: {Auth: auth}},
	}, "", "  ")
	if err != nil {
		return fmt.Errorf("registrytest: encoding auth.json: %w", err)
	}
	path := filepath.Join(r.workDir, "auth.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("registrytest: writing auth.json: %w", err)
	}
	r.authFile = path
	return nil
}

func (r *Registry) serveHTTP(w http.ResponseWriter, req *http.Request) {
	(*r.handler.Load()).ServeHTTP(w, req)
}

// SetWrap replaces the handler wrapper (nil removes it); requests already in
// flight finish with the previous one.
func (r *Registry) SetWrap(wrap func(http.Handler) http.Handler) {
	var base http.Handler = r.app
	if len(r.opts.ReadOnly) > 0 {
		base = readOnly(base, r.opts.ReadOnly)
	}
	h := base
	if r.tokens != nil {
		h = r.tokens.front(h)
	}
	if r.opts.HideFromAnonymous {
		h = r.hide(h)
	}
	if wrap != nil {
		// Outside the front: a wrapper's delays count against a token's
		// life, and its faults stand before the registry's own checks.
		h = wrap(h)
	}
	r.handler.Store(&h)
}

// readOnly answers 403 DENIED to the writes (anything but GET and HEAD) of
// the accounts in ro; their reads, and everyone else's requests, go on to
// next, which checks the password.
func readOnly(next http.Handler, ro []Account) http.Handler {
	names := map[string]bool{}
	for _, a := range ro {
		names[a.Username] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		user, _, ok := req.BasicAuth()
		if ok && names[user] && req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `{"errors":[{"code":"DENIED","message":"requested access to the resource is denied"}]}`+"\n")
			return
		}
		next.ServeHTTP(w, req)
	})
}

// Host is the registry's "127.0.0.1:PORT", as used in image references.
func (r *Registry) Host() string { return r.host }

// URL is the registry's base URL, "http://127.0.0.1:PORT" or "https://…".
func (r *Registry) URL() string { return r.scheme + "://" + r.host }

// Ref is the image reference HOST/repo:tag, or HOST/repo@digest when ref is a digest.
func (r *Registry) Ref(repo, ref string) string {
	if isDigest(ref) {
		return r.host + "/" + repo + "@" + ref
	}
	return r.host + "/" + repo + ":" + ref
}

// TLS reports whether the registry serves HTTPS.
func (r *Registry) TLS() bool { return r.opts.TLS }

// CAPEM is the PEM certificate clients must trust for HTTPS; nil without TLS.
func (r *Registry) CAPEM() []byte { return r.caPEM }

// CertsDir is a directory holding ca.crt, in the layout containers/image
// expects for SystemContext.DockerCertPath; empty without TLS.
func (r *Registry) CertsDir() string { return r.certsDir }

// AuthFile is the path of a containers auth.json with the registry's
// credentials; empty without auth.
func (r *Registry) AuthFile() string { return r.authFile }

// TokenRealm is the token server's URL ("http(s)://127.0.0.1:PORT/token");
// empty without Options.Token.
func (r *Registry) TokenRealm() string {
	if r.tokens == nil {
		return ""
	}
	return r.tokens.realm
}

// IssuedTokens are the tokens the token server handed out so far (to look
// for them in logs); nil without Options.Token.
func (r *Registry) IssuedTokens() []string {
	if r.tokens == nil {
		return nil
	}
	return r.tokens.issuedTokens()
}

// ExpiredTokens counts requests refused for an expired token
// (TokenAuth.StrictExpiry).
func (r *Registry) ExpiredTokens() int64 {
	if r.tokens == nil {
		return 0
	}
	return r.tokens.expired.Load()
}

// HiddenAnswers counts the requests without credentials that
// Options.HideFromAnonymous answered as if no repository existed (a 404,
// an empty catalog).
func (r *Registry) HiddenAnswers() int64 { return r.hidden.Load() }

// Client is an HTTP client that trusts the registry's certificate and never
// uses a proxy. It sends no credentials by itself.
func (r *Registry) Client() *http.Client { return r.client }

// Close stops the server, drops open connections and removes the registry's
// temporary files (not Options.Dir). It is safe to call more than once.
func (r *Registry) Close() error {
	r.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var errs []error
		// Our own client's idle HTTP/2 connections would hold Shutdown up.
		r.client.CloseIdleConnections()
		if err := r.server.Shutdown(ctx); err != nil {
			// Requests still running (a slow client): cut them off.
			if cerr := r.server.Close(); cerr != nil {
				errs = append(errs, fmt.Errorf("registrytest: closing the server: %w", cerr))
			}
		}
		if err := <-r.served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, fmt.Errorf("registrytest: serving: %w", err))
		}
		if err := r.app.Shutdown(); err != nil {
			errs = append(errs, fmt.Errorf("registrytest: shutting the registry down: %w", err))
		}
		if r.tokens != nil {
			if err := r.tokens.close(); err != nil {
				errs = append(errs, err)
			}
		}
		if r.cdn != nil {
			if err := r.cdn.Shutdown(ctx); err != nil {
				_ = r.cdn.Close()
			}
		}
		r.client.CloseIdleConnections()
		releaseRegistryLogs(r.opts.Debug)
		if err := os.RemoveAll(r.workDir); err != nil {
			errs = append(errs, fmt.Errorf("registrytest: removing %s: %w", r.workDir, err))
		}
		r.closeErr = errors.Join(errs...)
	})
	return r.closeErr
}
