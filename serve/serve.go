// Package serve runs the CNCF distribution registry
// (github.com/distribution/distribution/v3) as gapmirror's registry for the
// air gap: filesystem storage under a root directory (or any storage a
// distribution configuration file names), TLS with a certificate authority
// generated once under ROOT/tls, basic auth from an htpasswd file, deletes
// enabled, offline garbage collection, and a push credential only the
// serving process holds.
package serve

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"time"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry/handlers"
	registrymiddleware "github.com/distribution/distribution/v3/registry/middleware/registry"
	"github.com/distribution/distribution/v3/registry/storage"
	"github.com/distribution/distribution/v3/registry/storage/driver"
	"go.yaml.in/yaml/v3"

	// Storage drivers a --registry-config may name (and clouddrivers.go).
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"
)

// DefaultAddress is where the registry listens unless told otherwise: this
// machine only. Serving other hosts takes an explicit address.
const DefaultAddress = "127.0.0.1:5000"

// Options configures a Server.
type Options struct {
	// Root holds the storage (ROOT/docker/registry/v2, distribution's
	// filesystem layout), the generated TLS files (ROOT/tls) and the lock
	// that keeps garbage collection off a running registry.
	Root string
	// Address is the listen address; empty: DefaultAddress. Port 0 picks a free one.
	Address string
	// Hostname is the name clients use for the registry (with the port it
	// makes Name); empty: the listen host, or this machine's host name when
	// listening on all addresses.
	Hostname string
	// TLSCert and TLSKey are a certificate (with its chain) and key to
	// serve; empty: the generated ones under ROOT/tls.
	TLSCert, TLSKey string
	// TLSSANs are more names and addresses for the generated certificate.
	TLSSANs []string
	// PlainHTTP serves without TLS.
	PlainHTTP bool
	// Htpasswd is an htpasswd file (bcrypt entries); empty: ROOT/htpasswd
	// when it is there, else anonymous users may read and only this
	// process's push (PushCredentials) may write.
	Htpasswd string
	// RegistryConfig is a distribution configuration file; its storage,
	// validation, middleware, redis, notifications... are used as written.
	// Its http and auth sections are not: the listener, TLS and auth come
	// from these Options.
	RegistryConfig string
	// Debug lets the registry log every request (logrus, info level).
	Debug bool
}

// Server is a running registry.
type Server struct {
	opts         Options
	app          *handlers.App
	server       *http.Server
	name         string
	cert         *tls.Certificate // nil over plain HTTP
	caFile       string           // the generated CA; empty otherwise
	pushPassword string
	served       chan struct{} // closed when the server stops serving
	serveErr     error
	unlock       func()
	// source names the configuration for messages; secretMade: it has no
	// http.secret, so this process made one up.
	source     string
	secretMade bool
	// lease is this replica's lease in shared object storage (lease.go); nil otherwise.
	lease *leaseHolder
}

// New starts the registry; it answers once New returns. Stop it with
// Shutdown. Every input (root, address, certificate, htpasswd file,
// configuration) is checked before anything is created under the root.
func New(ctx context.Context, opts Options) (*Server, error) {
	s := &Server{served: make(chan struct{})}
	if err := s.check(&opts); err != nil {
		return nil, err
	}
	s.opts = opts
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	s.pushPassword = hex.EncodeToString(secret)
	cfg, err := s.configuration()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", opts.Address)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w (another registry there? choose another --address)", opts.Address, err)
	}
	if err := os.MkdirAll(opts.Root, 0o755); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("--root %s: %w", opts.Root, err)
	}
	if s.unlock, err = lockRoot(opts.Root); err != nil {
		_ = ln.Close()
		return nil, err
	}
	if err := s.preflight(ctx, cfg); err != nil {
		_ = ln.Close()
		s.unlock()
		return nil, err
	}
	if err := s.start(ctx, ln, cfg); err != nil {
		_ = ln.Close()
		_ = s.lease.release()
		s.unlock()
		return nil, err
	}
	return s, nil
}

// preflight checks, before serving, what distribution would start without
// and fail on later: the blob-descriptor cache's Redis, then the storage.
func (s *Server) preflight(ctx context.Context, cfg *configuration.Configuration) error {
	if err := checkCache(ctx, cfg, s.source); err != nil {
		return err
	}
	return s.checkStorage(ctx, cfg)
}

// checkStorage checks, before serving, that storage other than the
// filesystem under the root answers: distribution would start on a bucket
// that does not exist, with credentials the store refuses or an endpoint
// nobody answers at, and fail every push. On shared object storage the
// check is this replica's lease (lease.go): written, read back, and
// compared with the other replicas' (same http.secret, no gc running).
// A read-only registry (storage.maintenance.readonly) only lists.
func (s *Server) checkStorage(ctx context.Context, cfg *configuration.Configuration) error {
	name := cfg.Storage.Type()
	if !usesLeases(name) {
		return nil
	}
	what := describeStorage(cfg, s.source)
	d, err := openStorage(ctx, cfg, what)
	if err != nil {
		return err
	}
	if readOnly(cfg) {
		pctx, cancel := context.WithTimeout(ctx, storageProbeTimeout)
		defer cancel()
		if _, err := d.List(pctx, "/"); err != nil && !errors.As(err, new(driver.PathNotFoundError)) {
			return storageError(what, "listing", err)
		}
		return nil
	}
	fingerprint := secretFingerprint(cfg.HTTP.Secret)
	s.lease, err = takeLease(ctx, d, what, lease{Kind: "serve", Address: s.opts.Address, Secret: fingerprint}, func(o lease) string {
		expiry := "if it is gone (killed without stopping), its lease expires at " + o.Expires.UTC().Format(time.RFC3339)
		switch {
		case o.Kind == "gc":
			return fmt.Sprintf("garbage collection is running on this storage (%s): start the registry once it is done (%s)", o, expiry)
		case o.Kind != "serve":
			return fmt.Sprintf("%s holds this storage: delete that object if no gapmirror uses the storage", o.Kind)
		case o.Secret != fingerprint:
			why := "give every replica the same http.secret in its configuration file"
			if s.secretMade {
				why = s.source + " has no http.secret, so this replica made up its own: " + why
			}
			return fmt.Sprintf("the replica %s runs with another http.secret: an upload started on one replica would fail on the other; %s (%s)", o, why, expiry)
		}
		return ""
	})
	return err
}

// check validates opts (making paths absolute) and loads --tls-cert,
// creating nothing.
func (s *Server) check(opts *Options) error {
	if opts.Root == "" {
		return errors.New("serve: no root directory: give --root DIR")
	}
	root, err := filepath.Abs(opts.Root)
	if err != nil {
		return err
	}
	opts.Root = root
	if fi, err := os.Stat(root); err == nil && !fi.IsDir() {
		return fmt.Errorf("--root %s is a file, not a directory: give the directory of the registry's storage (made if missing)", root)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("--root %s: %w", root, err)
	}
	if opts.Address == "" {
		opts.Address = DefaultAddress
	}
	if _, _, err := net.SplitHostPort(opts.Address); err != nil {
		return fmt.Errorf("--address %q: use HOST:PORT, e.g. %s or 0.0.0.0:5000: %w", opts.Address, DefaultAddress, err)
	}
	if (opts.TLSCert == "") != (opts.TLSKey == "") {
		return errors.New("--tls-cert and --tls-key go together: give both, or neither to use the CA gapmirror makes under ROOT/tls")
	}
	if opts.PlainHTTP && opts.TLSCert != "" {
		return errors.New("--plain-http serves without TLS: leave out --tls-cert and --tls-key, or --plain-http")
	}
	if len(opts.TLSSANs) > 0 {
		switch {
		case opts.PlainHTTP:
			return errors.New("--tls-san names hosts in the certificate gapmirror generates, and --plain-http serves without TLS: leave out --tls-san, or --plain-http")
		case opts.TLSCert != "":
			return fmt.Errorf("--tls-san names hosts in the certificate gapmirror generates, not in --tls-cert %s: leave out --tls-san and have the names put in your certificate, or leave out --tls-cert and --tls-key", opts.TLSCert)
		}
	}
	if opts.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(opts.TLSCert, opts.TLSKey)
		if err != nil {
			return fmt.Errorf("--tls-cert %s, --tls-key %s: %w", opts.TLSCert, opts.TLSKey, err)
		}
		s.cert = &cert
	}
	if opts.Htpasswd == "" {
		if fi, err := os.Stat(RootHtpasswd(root)); err == nil && fi.Mode().IsRegular() {
			opts.Htpasswd = RootHtpasswd(root)
		}
	}
	if opts.Htpasswd != "" {
		// distribution would make the file up, with a random user it logs.
		if _, err := os.Stat(opts.Htpasswd); err != nil {
			return fmt.Errorf("--htpasswd %s: %w (add users with: gapmirror serve htpasswd --file %s USER)", opts.Htpasswd, err, opts.Htpasswd)
		}
		if opts.Htpasswd, err = filepath.Abs(opts.Htpasswd); err != nil {
			return err
		}
		if err := checkHtpasswd(opts.Htpasswd); err != nil {
			return fmt.Errorf("--htpasswd: %w", err)
		}
	}
	return nil
}

// start serves on ln: the registry's name, TLS (generating the
// certificate under ROOT/tls unless one was given) and the application.
func (s *Server) start(ctx context.Context, ln net.Listener, cfg *configuration.Configuration) error {
	opts := s.opts
	host, _, err := net.SplitHostPort(opts.Address)
	if err != nil {
		return err
	}
	s.server = &http.Server{ReadHeaderTimeout: 30 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	if opts.Debug {
		s.server.ErrorLog = log.New(os.Stderr, "serve: ", log.LstdFlags)
	}
	registryLogs(opts.Debug)
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	name := opts.Hostname
	if name == "" {
		name = host
		if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
			if name, err = os.Hostname(); err != nil {
				return fmt.Errorf("no --hostname given and this machine's host name is unknown: %w", err)
			}
		}
	}
	s.name = net.JoinHostPort(name, port)

	if !opts.PlainHTTP {
		if s.cert == nil {
			names, ips := hostNames(host, append([]string{name}, opts.TLSSANs...))
			dir := filepath.Join(opts.Root, "tls")
			cert, err := generatedCertificate(dir, names, ips)
			if err != nil {
				return fmt.Errorf("TLS under %s: %w", dir, err)
			}
			s.cert = &cert
			s.caFile = filepath.Join(dir, CAFile)
		}
		s.server.TLSConfig = &tls.Config{Certificates: []tls.Certificate{*s.cert}, MinVersion: tls.VersionTLS12}
	}

	app, err := newApp(ctx, cfg)
	if err != nil {
		return err
	}
	s.app = app
	s.server.Handler = app
	go func() {
		defer close(s.served)
		if s.cert != nil {
			s.serveErr = s.server.ServeTLS(ln, "", "")
		} else {
			s.serveErr = s.server.Serve(ln)
		}
	}()
	return nil
}

// readOnly: storage.maintenance.readonly.enabled is set.
func readOnly(cfg *configuration.Configuration) bool {
	switch m := cfg.Storage["maintenance"]["readonly"].(type) {
	case map[any]any:
		return m["enabled"] == true
	case map[string]any:
		return m["enabled"] == true
	}
	return false
}

// configuration is the registry's configuration: opts.RegistryConfig's,
// or filesystem storage under the root; with this package's auth, deletes
// on, and image indexes accepted without all their platforms (gapmirror
// mirrors chosen platforms of an index). Both go through
// configuration.Parse, so that every default it sets applies (the catalog's
// and tag list's page limits: left at zero, /v2/_catalog lists nothing),
// and so do environment overrides, named with envPrefix.
func (s *Server) configuration() (*configuration.Configuration, error) {
	cfg, source, err := parseConfiguration(s.opts.Root, s.opts.RegistryConfig)
	if err != nil {
		return nil, err
	}
	s.source = source
	if len(cfg.Auth) > 0 {
		what := "remove the auth section"
		if s.opts.RegistryConfig == "" {
			what = "unset the " + envPrefix + "_AUTH* environment variables"
		}
		return nil, fmt.Errorf("%s: auth (%s): gapmirror serve does the auth itself: %s and use --htpasswd", source, cfg.Auth.Type(), what)
	}
	if _, ok := cfg.Storage["delete"]; !ok {
		cfg.Storage["delete"] = configuration.Parameters{"enabled": true}
	}
	if cfg.Validation.Manifests.Indexes.Platforms == "" {
		cfg.Validation.Manifests.Indexes.Platforms = "none"
	}
	if cfg.HTTP.Secret == "" {
		// Replicas behind a load balancer need the same http.secret in their file.
		secret := make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			return nil, err
		}
		cfg.HTTP.Secret = hex.EncodeToString(secret)
		s.secretMade = true
	}
	params := configuration.Parameters{"pushpassword": s.pushPassword}
	if s.opts.Htpasswd != "" {
		params["htpasswd"] = s.opts.Htpasswd
	}
	cfg.Auth = configuration.Auth{accessControllerName: params}
	return cfg, nil
}

// parseConfiguration reads the distribution configuration file file, or
// makes the default one (filesystem storage under root), and says which
// in source, for messages.
func parseConfiguration(root, file string) (cfg *configuration.Configuration, source string, err error) {
	var data []byte
	if file != "" {
		source = "--registry-config " + file
		if data, err = os.ReadFile(file); err != nil {
			return nil, source, fmt.Errorf("--registry-config: %w", err)
		}
	} else {
		source = "the default registry configuration"
		if data, err = defaultConfiguration(root); err != nil {
			return nil, source, err
		}
	}
	cfg = new(configuration.Configuration)
	if err = configParser().Parse(data, cfg); err != nil {
		return nil, source, fmt.Errorf("%s: %w", source, err)
	}
	if cfg.Storage.Type() == "gcs" && !gcsBuiltIn {
		return nil, source, fmt.Errorf("%s: storage.gcs: this gapmirror is built without the GCS storage driver, which would cost every gapmirror command about 15 MiB of memory; build one with it: make build EXTRA_TAGS=gapmirror_gcs (docs/serve.md)", source)
	}
	return cfg, source, nil
}

// envPrefix starts the environment variables that override the registry's
// configuration (GAPMIRRORSERVE_STORAGE_S3_SECRETKEY, ...): distribution
// reads REGISTRY_*, but REGISTRY_AUTH_FILE is the containers tools' auth
// file, which gapmirror's users set, and read as the registry's auth.file
// it stopped serve from starting. One word: the parser takes what follows
// the first underscore as the configuration path.
const envPrefix = "GAPMIRRORSERVE"

// configParser parses a configuration file as configuration.Parse does
// (the defaults it sets, version 0.1), with envPrefix for the overrides.
func configParser() *configuration.Parser {
	return configuration.NewParser(envPrefix, []configuration.VersionedParseInfo{{
		Version: configuration.MajorMinorVersion(0, 1),
		ParseAs: reflect.TypeFor[configuration.Configuration](),
		ConversionFunc: func(c any) (any, error) {
			cfg := c.(*configuration.Configuration)
			if cfg.Log.Level == "" {
				cfg.Log.Level = cfg.Loglevel
				if cfg.Log.Level == "" {
					cfg.Log.Level = "info"
				}
			}
			cfg.Loglevel = ""
			if cfg.Catalog.MaxEntries <= 0 {
				cfg.Catalog.MaxEntries = 1000
			}
			if cfg.Tags.MaxTags < 0 {
				return nil, errors.New("tags.maxtags must not be negative")
			}
			if cfg.Tags.MaxTags == 0 {
				cfg.Tags.MaxTags = 1000
			}
			if cfg.Storage.Type() == "" {
				return nil, errors.New("no storage configuration provided")
			}
			return cfg, nil
		},
	}})
}

// defaultConfiguration is the configuration file of a registry without
// --registry-config: filesystem storage under root, blob descriptors cached
// in memory, clients fetching blobs from the registry itself.
func defaultConfiguration(root string) ([]byte, error) {
	return yaml.Marshal(map[string]any{
		"version": "0.1",
		"storage": map[string]any{
			"filesystem": map[string]any{"rootdirectory": root},
			"delete":     map[string]any{"enabled": true},
			"cache":      map[string]any{"blobdescriptor": "inmemory"},
			"redirect":   map[string]any{"disable": true},
		},
		"validation": map[string]any{"manifests": map[string]any{"indexes": map[string]any{"platforms": "none"}}},
	})
}

// noDigestResumption turns off, once per process, the hash state
// distribution saves after every upload request so that a later PATCH can
// resume hashing: pushes (gapmirror's, skopeo's, podman's monolithic ones)
// send a blob in one request, and for them that state is a file written
// and fsynced twice per blob for nothing. A client that uploads in parts
// gets its blob hashed once more when it commits instead.
var noDigestResumption sync.Once

// newApp builds the registry application, turning its construction panics
// (a storage driver that cannot start) into errors.
func newApp(ctx context.Context, cfg *configuration.Configuration) (app *handlers.App, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("starting the registry: %v", p)
		}
	}()
	noDigestResumption.Do(func() { _ = registrymiddleware.RegisterOptions(storage.DisableDigestResumption) })
	return handlers.NewApp(ctx, cfg), nil
}

// Name is HOST:PORT, how clients (and the --from push) reach the registry.
func (s *Server) Name() string { return s.name }

// URL is https://HOST:PORT, or http:// over plain HTTP.
func (s *Server) URL() string {
	if s.cert == nil {
		return "http://" + s.name
	}
	return "https://" + s.name
}

// Htpasswd is the htpasswd file whose users the registry wants (--htpasswd,
// or ROOT/htpasswd when it is there); empty: anonymous users may read.
func (s *Server) Htpasswd() string { return s.opts.Htpasswd }

// CAFile is the generated CA clients must trust; empty with --tls-cert or plain HTTP.
func (s *Server) CAFile() string { return s.caFile }

// Done is closed when the server stops serving: after Shutdown, or on its
// own (a listener failure), which Err then says.
func (s *Server) Done() <-chan struct{} { return s.served }

// Err is why the server stopped serving; nil while it serves or after Shutdown.
func (s *Server) Err() error {
	select {
	case <-s.served:
		if errors.Is(s.serveErr, http.ErrServerClosed) {
			return nil
		}
		return s.serveErr
	default:
		return nil
	}
}

// PushCredentials writes into dir what a client of this process needs to
// push: a containers auth.json with this run's push password for Name and
// a certs.d directory trusting the certificate served. The password is good
// until the server stops; keep dir private and remove it after the push.
func (s *Server) PushCredentials(dir string) (authFile, certDir string, err error) {
	authFile = filepath.Join(dir, "auth.json")
	data, err := json.Marshal(map[string]any{"auths": map[string]any{
		s.name: map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte(pushUser + ":" + s.pushPassword))},
	}})
	if err != nil {
		return "", "", err
	}
	if err := os.WriteFile(authFile, data, 0o600); err != nil {
		return "", "", err
	}
	if s.cert == nil {
		return authFile, "", nil
	}
	certDir = filepath.Join(dir, "certs.d")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return "", "", err
	}
	// The certificates served (leaf and chain) as trust anchors: the push
	// trusts exactly this server, whoever signed its certificate.
	var bundle []byte
	for _, der := range s.cert.Certificate {
		bundle = append(bundle, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	if err := os.WriteFile(filepath.Join(certDir, "ca.crt"), bundle, 0o600); err != nil {
		return "", "", err
	}
	return authFile, certDir, nil
}

// Shutdown stops accepting connections, lets requests in flight finish
// until ctx ends (then cuts them off; an upload cut off is left as an
// unfinished upload, which never becomes a blob), and stops the registry.
func (s *Server) Shutdown(ctx context.Context) error {
	var errs []error
	if err := s.server.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("waiting for requests in flight: %w", err))
		_ = s.server.Close()
	}
	<-s.served
	if err := s.Err(); err != nil {
		errs = append(errs, err)
	}
	if err := s.app.Shutdown(); err != nil {
		errs = append(errs, err)
	}
	if err := s.lease.release(); err != nil {
		errs = append(errs, err)
	}
	s.unlock()
	return errors.Join(errs...)
}
