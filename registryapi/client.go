// Package registryapi is gapmirror's client of the OCI distribution API: one
// Client per registry host for a whole run, over one authenticated HTTP
// transport that pings /v2/ once and keeps a bearer token per scope (renewed
// before it expires and again on a 401). A registry whose ping lets
// anonymous requests in may still hide private repositories from them with
// 404: with credentials for it, such a 404 is asked again with them, and
// they are sent from then on.
//
// Tag listing (paged), the catalog, manifest HEAD and GET, and deletes are
// go-containerregistry's remote package, run over that transport. What this
// package keeps of its own, and why:
//   - the authentication transport: go-containerregistry's pings for every
//     repository it opens (one /v2/ per image on a mirror run) and refuses
//     token realms on loopback or private addresses, which is where the token
//     server of an air-gapped registry often is; this one takes the scope from
//     each request (pull, push, the mount source), so one transport serves every
//     repository;
//   - uploads at the spec's minimum: a cross-repository mount, trusted only on
//     201, whose upload session is used when the registry opens one instead;
//     else a monolithic POST then PUT, or the single POST where the registry
//     takes it. remote.Write sends HEAD, POST, PATCH and PUT per blob;
//   - blob reads that resume an interrupted transfer with an HTTP range;
//   - manifest PUTs that only PUT (remote.Put also maintains referrers
//     fallback tags, which the copy must not add to a mirror);
//   - a manifest HEAD that falls back to a GET when a registry leaves out
//     Docker-Content-Digest;
//   - a blob HEAD (HasBlob, push.go): go-containerregistry has one only
//     inside a remote.Layer (partial.Exists), a layer object built per call
//     around that one request; this is the same HEAD through the send and
//     answer the uploads beside it use, so its errors carry the same hints;
//   - the push check (CheckPush, checkpush.go): an upload started and its
//     session cancelled with a DELETE, over the run's transport.
//     remote.CheckPushPermission builds an authenticating transport of its
//     own from a keychain (a second /v2/ ping and token exchange) and
//     cancels the session in a goroutine nobody waits for.
//
// Credentials, certificates and TLS settings come from the same containers
// configuration as containers/image (auth file, certs.d, TLS verify), which
// still serves what this client does not (registries.conf mirrors, Docker Hub).
package registryapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/sirupsen/logrus"
	"go.podman.io/image/v5/pkg/docker/config"
	"go.podman.io/image/v5/types"
)

// Client talks to one registry host. It is safe for concurrent use.
type Client struct {
	host  string
	creds types.DockerAuthConfig
	ua    string
	base  http.RoundTripper // TLS, connection pool; no authentication
	// http sends requests through the authenticating transport.
	http *http.Client
	// remote is the same transport as go-containerregistry wants it
	// (a transport.Wrapper: used as is, no ping or re-authentication).
	remote http.RoundTripper

	insecure bool
	// bearer is a token given outright (--src-registry-token): sent as is,
	// no token server asked.
	bearer string

	pingMu    sync.Mutex
	pinged    bool
	scheme    string            // "https", or "http" when verification is off and the registry speaks plain HTTP
	challenge string            // the auth scheme /v2/ asked for: "", "basic" or "bearer"
	params    map[string]string // its parameters (realm, service)

	tokMu  sync.Mutex
	tokens map[string]*token // by scope

	// single says whether the registry stores a blob sent in one POST
	// (0 unknown, 1 yes, -1 no, 2 being tried).
	single atomic.Int32

	// noReferrersAPI: the registry answered its referrers endpoint with a
	// 404 of an unrouted path; referrersAPI: it answered one with a list.
	noReferrersAPI, referrersAPI atomic.Bool
	referrersProbe               sync.Mutex

	// Requests counts the requests sent to the registry host (tokens not included).
	Requests atomic.Int64
	// HiddenRetries counts the requests sent without credentials that
	// were answered 404 and asked again with them.
	HiddenRetries atomic.Int64
}

type token struct {
	mu      sync.Mutex
	value   string
	expires time.Time
}

// NewClient returns a client for host ("host[:port]") configured as
// containers/image would be with sys: auth file, certificate directory,
// TLS verification, user agent. This is the one place a registry's
// transport is built.
func NewClient(host string, sys *types.SystemContext) (*Client, error) {
	tr, insecure, err := Transport(host, sys)
	if err != nil {
		return nil, err
	}
	creds, err := config.GetCredentials(sys, host)
	if err != nil {
		return nil, &advice{Err: fmt.Errorf("credentials for %s: %w", host, err), Text: " (check --authfile)"}
	}
	c := &Client{host: host, creds: creds, ua: "gapmirror", base: tracing{tr}, insecure: insecure, scheme: "https", tokens: map[string]*token{}}
	if sys != nil && sys.DockerRegistryUserAgent != "" {
		c.ua = sys.DockerRegistryUserAgent
	}
	if sys != nil {
		c.bearer = sys.DockerBearerRegistryToken
	}
	c.http = &http.Client{Transport: authTransport{c}}
	reg, err := name.NewRegistry(host, name.WeakValidation)
	if err != nil {
		return nil, fmt.Errorf("registry %q: %w", host, err)
	}
	// A transport.Wrapper of an anonymous basic transport passes requests
	// through to ours unchanged.
	if c.remote, err = transport.FromToken(reg, authn.Anonymous, authTransport{c}, &transport.Challenge{}, &transport.Token{}); err != nil {
		return nil, err
	}
	return c, nil
}

// credentials are the ones the auth file gives for the host.
func (c *Client) credentials() types.DockerAuthConfig { return c.creds }

// Host is the registry host.
func (c *Client) Host() string { return c.host }

// ping asks /v2/ once per client which scheme and authentication the
// registry wants. A failed ping is tried again by the next request.
func (c *Client) ping(ctx context.Context) error {
	c.pingMu.Lock()
	defer c.pingMu.Unlock()
	if c.pinged {
		return nil
	}
	resp, err := c.pingOnce(ctx, c.scheme)
	if err != nil && c.insecure && (strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") || strings.Contains(err.Error(), "does not look like a TLS handshake")) {
		// As containers/image: with verification off, plain HTTP is
		// allowed when the registry does not speak TLS.
		c.scheme = "http"
		resp, err = c.pingOnce(ctx, c.scheme)
	}
	if err != nil {
		return err
	}
	defer drain(resp)
	if resp.StatusCode == http.StatusUnauthorized {
		scheme, params := parseChallenge(resp.Header.Get("WWW-Authenticate"))
		c.challenge, c.params = strings.ToLower(scheme), params
	}
	c.pinged = true
	return nil
}

func (c *Client) pingOnce(ctx context.Context, scheme string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+c.host+"/v2/", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", c.ua)
	c.Requests.Add(1)
	resp, err := c.base.RoundTrip(req)
	if err != nil {
		if strings.Contains(err.Error(), "does not look like a TLS handshake") {
			err = fmt.Errorf("%w (server gave HTTP response to HTTPS client)", err)
		}
		return nil, fmt.Errorf("GET %s://%s/v2/: %w", scheme, c.host, err)
	}
	return resp, nil
}

// authTransport sends requests to the registry with the scheme the ping
// found and the credentials the request's scope needs; requests elsewhere
// (a storage backend a blob GET is redirected to) go out without them.
type authTransport struct{ c *Client }

func (t authTransport) RoundTrip(in *http.Request) (*http.Response, error) {
	resp, err := t.roundTrip(in)
	if resp != nil && resp.Request != nil && resp.Request.URL.Scheme != in.URL.Scheme {
		// The answer is to the request as its sender made it: a Link to
		// the next page resolves against it, and go-containerregistry
		// (v0.21.7) refuses to follow one whose scheme is not the one it
		// guesses for the host (http for 127.0.0.1, 10.x, *.local), even
		// where the ping found TLS. The next page is then sent with the
		// ping's scheme again.
		resp.Request = in
	}
	return resp, err
}

func (t authTransport) roundTrip(in *http.Request) (*http.Response, error) {
	c := t.c
	if in.URL.Host != c.host {
		return c.base.RoundTrip(in)
	}
	if err := c.ping(in.Context()); err != nil {
		return nil, err
	}
	scope := scopeOf(in)
	send := func(req *http.Request) (*http.Response, error) {
		req.URL.Scheme = c.scheme
		if req.Header.Get("User-Agent") == "" {
			req.Header.Set("User-Agent", c.ua)
		}
		if err := c.authorize(req, scope); err != nil {
			return nil, err
		}
		c.Requests.Add(1)
		return c.base.RoundTrip(req)
	}
	canResend := in.Body == nil || in.Body == http.NoBody || in.GetBody != nil
	again := func() (*http.Response, error) {
		req := in.Clone(in.Context())
		if in.GetBody != nil {
			var err error
			if req.Body, err = in.GetBody(); err != nil {
				return nil, err
			}
		}
		return send(req)
	}
	if scope == catalogScope {
		// A catalog asked without credentials lists only the public
		// repositories: a registry the run has credentials for is asked
		// with them.
		c.withCredentials()
	}
	req := in.Clone(in.Context())
	resp, err := send(req)
	if err != nil {
		return resp, err
	}
	if resp.StatusCode == http.StatusNotFound && scope != "" && req.Header.Get("Authorization") == "" && c.withCredentials() {
		// The ping was let in without credentials, and this request was
		// sent without them; a registry that hides its private
		// repositories from anonymous requests answers them 404. The run
		// has credentials for it: ask again with them (and send them from
		// now on) before the answer counts as absent.
		if c.HiddenRetries.Add(1) == 1 {
			logrus.Debugf("%s %s: 404 without credentials: asking again with the credentials for %s, and sending them from now on", req.Method, redact(req.URL), c.host)
		}
		if !canResend {
			e := c.answer(resp, in.Method)
			e.Retry = true // the next attempt carries the credentials
			return nil, e
		}
		drain(resp)
		if resp, err = again(); err != nil {
			return nil, err
		}
	}
	if resp.StatusCode != http.StatusUnauthorized {
		return resp, nil
	}
	// A token that expired or lacks the scope, or a registry that wants
	// credentials only for some repositories: log in again and resend,
	// once, when the body can be sent again.
	if err := c.relogin(in.Context(), resp.Header.Get("WWW-Authenticate"), scope); err != nil {
		drain(resp)
		return nil, err
	}
	if !canResend {
		e := c.answer(resp, in.Method)
		e.Retry = true // the next attempt starts with a fresh token
		return nil, e
	}
	drain(resp)
	if resp, err = again(); err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		return nil, c.answer(resp, in.Method)
	}
	return resp, nil
}

// withCredentials makes the client send its credentials from now on
// although the ping asked for none (basic first: a registry that wants a
// token answers them with its challenge, which relogin follows), and
// reports whether requests now carry credentials. It is false without a
// user name and password (an identity token needs a token realm, which only
// a challenge names). A request that went out without credentials while
// the client had a challenge to answer cannot be, so where one did, another
// request switched (to basic, or on to the token its challenge asked for)
// after it left: it is sent again all the same.
func (c *Client) withCredentials() bool {
	if c.bearer != "" || c.creds.Username == "" {
		return false
	}
	c.pingMu.Lock()
	defer c.pingMu.Unlock()
	if c.challenge == "" {
		c.challenge = "basic"
	}
	return true
}

const catalogScope = "registry:catalog:*"

// scopeOf is the token scope a request needs: pull for reads, push for
// writes, everything for deletes (distribution wants "delete", quay
// "push"; both accept "*"), and pull of the source of a mount.
func scopeOf(req *http.Request) string {
	if req.URL.Path == "/v2/_catalog" {
		return catalogScope
	}
	repo := repoOf(req.URL.Path)
	if repo == "" {
		return ""
	}
	action := "pull,push"
	switch req.Method {
	case http.MethodGet, http.MethodHead:
		action = "pull"
	case http.MethodDelete:
		action = "*"
	}
	scope := "repository:" + repo + ":" + action
	if from := req.URL.Query().Get("from"); from != "" && from != repo {
		scope += " repository:" + from + ":pull"
	}
	return scope
}

// repoOf takes the repository out of a /v2/<repo>/{manifests,blobs,tags,referrers}/… path.
func repoOf(path string) string {
	rest, ok := strings.CutPrefix(path, "/v2/")
	if !ok {
		return ""
	}
	for _, kind := range []string{"/manifests/", "/blobs/", "/tags/", "/referrers/"} {
		if i := strings.LastIndex(rest, kind); i > 0 {
			return rest[:i]
		}
	}
	return ""
}

func (c *Client) authorize(req *http.Request, scope string) error {
	if c.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+c.bearer)
		return nil
	}
	c.pingMu.Lock()
	challenge := c.challenge
	c.pingMu.Unlock()
	switch challenge {
	case "basic":
		if c.creds.Username != "" {
			req.SetBasicAuth(c.creds.Username, c.creds.Password)
		}
	case "bearer":
		if scope == "" {
			return nil
		}
		tok, err := c.token(req.Context(), scope, false)
		if err != nil {
			return fmt.Errorf("%s %s: %w", req.Method, redact(req.URL), err)
		}
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
	}
	return nil
}

// relogin answers a 401: the challenge may be new (the ping was answered
// anonymously) or the token expired.
func (c *Client) relogin(ctx context.Context, challenge, scope string) error {
	scheme, params := parseChallenge(challenge)
	switch strings.ToLower(scheme) {
	case "basic":
		if c.creds.Username == "" {
			return c.noCredentials()
		}
		c.pingMu.Lock()
		c.challenge = "basic"
		c.pingMu.Unlock()
		return nil
	case "bearer":
		c.pingMu.Lock()
		c.challenge, c.params = "bearer", params
		c.pingMu.Unlock()
		_, err := c.token(ctx, scope, true)
		return err
	default:
		return fmt.Errorf("registry %s wants authentication %q, which gapmirror cannot answer", c.host, challenge)
	}
}

// ErrNoCredentials marks a registry asking for credentials the run has none
// for: no retry helps, so callers classify it as an authentication failure.
var ErrNoCredentials = errors.New("no credentials configured")

func (c *Client) noCredentials() error {
	return &advice{Err: fmt.Errorf("registry %s wants credentials: %w", c.host, ErrNoCredentials), Text: fmt.Sprintf(": log in (podman login %s) or pass --authfile", c.host)}
}

// token returns a bearer token for scope, from the token server when none
// is held, the one held is about to expire, or renew is set.
func (c *Client) token(ctx context.Context, scope string, renew bool) (string, error) {
	c.tokMu.Lock()
	t := c.tokens[scope]
	if t == nil {
		t = &token{}
		c.tokens[scope] = t
	}
	c.tokMu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.value != "" && !renew && time.Now().Before(t.expires) {
		return t.value, nil
	}
	value, lifetime, err := c.fetchToken(ctx, scope)
	if err != nil {
		return "", err
	}
	// Renew before the end: a request must not start with a token that
	// expires on its way.
	t.value, t.expires = value, time.Now().Add(lifetime-min(lifetime/10, 10*time.Second))
	return value, nil
}

func (c *Client) fetchToken(ctx context.Context, scope string) (string, time.Duration, error) {
	c.pingMu.Lock()
	params := c.params
	c.pingMu.Unlock()
	realm, err := url.Parse(params["realm"])
	if err != nil || realm.Host == "" {
		return "", 0, fmt.Errorf("registry %s sent a bearer challenge without a usable realm: %q", c.host, params["realm"])
	}
	q := url.Values{}
	if s := params["service"]; s != "" {
		q.Set("service", s)
	}
	for _, s := range strings.Fields(scope) {
		q.Add("scope", s)
	}
	var req *http.Request
	if c.creds.IdentityToken != "" {
		// An identity token is an OAuth2 refresh token: exchanged with a
		// POST, as containers/image does.
		q.Set("grant_type", "refresh_token")
		q.Set("refresh_token", c.creds.IdentityToken)
		q.Set("client_id", "gapmirror")
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, realm.String(), strings.NewReader(q.Encode()))
		if err == nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
	} else {
		all := realm.Query() // a realm may carry parameters of its own
		for k, v := range q {
			all[k] = v
		}
		realm.RawQuery = all.Encode()
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, realm.String(), nil)
		if err == nil && c.creds.Username != "" {
			req.SetBasicAuth(c.creds.Username, c.creds.Password)
		}
	}
	if err != nil {
		return "", 0, err
	}
	req.Header.Set("User-Agent", c.ua)
	realm.RawQuery = "" // errors name the realm without the parameters
	resp, err := c.base.RoundTrip(req)
	if err != nil {
		return "", 0, fmt.Errorf("getting a token from %s: %w", realm, err)
	}
	defer drain(resp)
	if resp.StatusCode != http.StatusOK {
		if c.creds.Username == "" && c.creds.IdentityToken == "" {
			return "", 0, fmt.Errorf("getting a token from %s: %s: %w", realm, resp.Status, c.noCredentials())
		}
		return "", 0, &advice{Err: fmt.Errorf("getting a token from %s: %s", realm, resp.Status), Text: fmt.Sprintf(" (check the credentials for %s in --authfile)", c.host)}
	}
	var tok struct {
		Token       string `json:"token"`
		AccessToken string `json:"access_token"`
		ExpiresIn   int    `json:"expires_in"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil {
		return "", 0, fmt.Errorf("token from %s: %w", realm, err)
	}
	if tok.Token == "" {
		tok.Token = tok.AccessToken
	}
	lifetime := time.Duration(tok.ExpiresIn) * time.Second
	if lifetime <= 0 {
		lifetime = 60 * time.Second // the token specification's default
	}
	return tok.Token, lifetime, nil
}

// advice is an error with advice for the person running gapmirror, kept
// apart so that a summary stating the fix once can leave it out of each
// failure it lists (Advices).
type advice struct {
	Err  error
	Text string // follows Err's message as it is, e.g. " (check --authfile)"
}

func (a *advice) Error() string { return a.Err.Error() + a.Text }
func (a *advice) Unwrap() error { return a.Err }

// Advices returns the advice texts anywhere in err's chain.
func Advices(err error) []string {
	var out []string
	var walk func(error)
	walk = func(err error) {
		for err != nil {
			if a, ok := err.(*advice); ok {
				out = append(out, a.Text)
			}
			if m, ok := err.(interface{ Unwrap() []error }); ok {
				for _, e := range m.Unwrap() {
					walk(e)
				}
				return
			}
			err = errors.Unwrap(err)
		}
	}
	walk(err)
	return out
}

// Error is a registry answer other than success, with what to do about it.
type Error struct {
	Method, URL string
	Status      int
	Codes       []string
	Body        string
	Hint        string // what to do about it, when known
	// Retry: sending the request again may succeed (an upload whose token
	// expired on the way).
	Retry bool
	// Denied: the credentials were accepted but lack the action (403, or a
	// token registry's 401 with error="insufficient_scope").
	Denied bool
	// Redirected: the answer came from where the registry redirected the
	// request (the storage or CDN a blob GET is sent to), not the registry.
	Redirected bool
}

func (e *Error) Error() string {
	who := "registry"
	if e.Redirected {
		who = "the storage the registry redirected to"
	}
	msg := fmt.Sprintf("%s %s: %s answered %d", e.Method, e.URL, who, e.Status)
	// Plain-text bodies often start with the status again ("404 page not found").
	if body := strings.TrimSpace(strings.TrimPrefix(e.Body, strconv.Itoa(e.Status))); body != "" {
		msg += " " + body
	}
	if e.Hint != "" {
		msg += " (" + e.Hint + ")"
	}
	return msg
}

// unsupported reports a 405 / UNSUPPORTED answer: the registry does not
// allow this operation (deletes disabled, or tag deletion not implemented).
func (e *Error) unsupported() bool {
	if e.Status == http.StatusMethodNotAllowed {
		return true
	}
	for _, c := range e.Codes {
		if c == "UNSUPPORTED" {
			return true
		}
	}
	return false
}

// notFound reports a 404 / *_UNKNOWN answer.
func (e *Error) notFound() bool {
	if e.Status == http.StatusNotFound {
		return true
	}
	for _, c := range e.Codes {
		if c == "MANIFEST_UNKNOWN" || c == "NAME_UNKNOWN" {
			return true
		}
	}
	return false
}

// IsNotFound reports whether err is a registry's "not found".
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.notFound()
}

// IsUnsupported reports whether err is a registry's 405 / UNSUPPORTED.
func IsUnsupported(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.unsupported()
}

// parseChallenge splits `Bearer realm="…",service="…"` into scheme and parameters.
func parseChallenge(h string) (string, map[string]string) {
	scheme, rest, _ := strings.Cut(strings.TrimSpace(h), " ")
	params := map[string]string{}
	for rest != "" {
		rest = strings.TrimLeft(rest, " ,")
		key, after, ok := strings.Cut(rest, "=")
		if !ok {
			break
		}
		var val string
		if strings.HasPrefix(after, `"`) {
			end := strings.Index(after[1:], `"`)
			if end < 0 {
				val, rest = after[1:], ""
			} else {
				val, rest = after[1:1+end], after[2+end:]
			}
		} else {
			val, rest, _ = strings.Cut(after, ",")
		}
		params[strings.ToLower(strings.TrimSpace(key))] = val
	}
	return scheme, params
}

func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
}

// tracing logs each request at logrus debug level, the way containers/image
// logs its own, so --log-level trace shows every request whichever client
// sent it.
type tracing struct{ next http.RoundTripper }

func (t tracing) RoundTrip(req *http.Request) (*http.Response, error) {
	if !logrus.IsLevelEnabled(logrus.DebugLevel) {
		return t.next.RoundTrip(req)
	}
	start := time.Now()
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		logrus.Debugf("%s %s: %v (%s)", req.Method, redact(req.URL), err, time.Since(start).Round(time.Millisecond))
		return resp, err
	}
	logrus.Debugf("%s %s: %d (%s)", req.Method, redact(req.URL), resp.StatusCode, time.Since(start).Round(time.Millisecond))
	return resp, nil
}

// redact is u without its query (an upload location's _state, tokens).
func redact(u *url.URL) string {
	v := *u
	v.RawQuery = ""
	return v.String()
}

// answer turns a registry's answer other than success into an Error.
func (c *Client) answer(resp *http.Response, method string) *Error {
	defer drain(resp)
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	e := &Error{Method: method, URL: redact(resp.Request.URL), Status: resp.StatusCode, Body: strings.TrimSpace(string(body)), Hint: c.authHint(resp.StatusCode, resp.Header.Get("WWW-Authenticate")),
		Redirected: resp.Request.URL.Host != c.host}
	// Without credentials a missing action is a missing login, not a denial.
	if c.creds.Username != "" || c.creds.IdentityToken != "" {
		e.Denied = resp.StatusCode == http.StatusForbidden || (resp.StatusCode == http.StatusUnauthorized && strings.Contains(resp.Header.Get("WWW-Authenticate"), "insufficient_scope"))
	}
	var errs struct {
		Errors []struct {
			Code string `json:"code"`
		} `json:"errors"`
	}
	if json.Unmarshal(body, &errs) == nil {
		for _, c := range errs.Errors {
			e.Codes = append(e.Codes, c.Code)
		}
	}
	return e
}

// notFoundHint is said of a 404 answered to a request without credentials
// by a registry whose ping asked for none, when the run has none for it:
// such a registry may hide a private repository from anonymous requests.
func (c *Client) notFoundHint() string {
	if c.bearer != "" || c.creds.Username != "" || c.creds.IdentityToken != "" {
		return ""
	}
	c.pingMu.Lock()
	open := c.pinged && c.challenge == ""
	c.pingMu.Unlock()
	if !open {
		return ""
	}
	return fmt.Sprintf("asked without credentials, as none are configured for %s; a registry that hides private repositories from anonymous requests answers them so: if this one is private, log in (podman login %s) or pass --authfile", c.host, c.host)
}

// authHint says what to do about a 401 or 403 that survived logging in, or
// a 404 that may be a private repository hidden (notFoundHint). Token registries (distribution) answer 401 with error="insufficient_scope"
// when the token is valid but lacks the action; others answer 403.
func (c *Client) authHint(status int, challenge string) string {
	if status == http.StatusNotFound {
		return c.notFoundHint()
	}
	if status != http.StatusUnauthorized && status != http.StatusForbidden {
		return ""
	}
	if c.creds.Username == "" && c.creds.IdentityToken == "" {
		return c.noCredentials().Error()
	}
	if status == http.StatusForbidden || strings.Contains(challenge, "insufficient_scope") {
		return fmt.Sprintf("denied: the account --authfile gives for %s may not do this; reading needs pull, pushing push, deleting delete (push on some registries)", c.host)
	}
	return fmt.Sprintf("the registry refused the credentials for %s: check them in --authfile", c.host)
}
