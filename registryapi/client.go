// Package registryapi is a small client of the OCI distribution API for
// what containers/image does not offer or does expensively: tag listing by
// page, manifest HEADs through one client per registry host (cached tokens,
// no ping per reference) and deletes by digest and by tag. Copies still go
// through containers/image; this client takes credentials, certificates and
// TLS settings from the same containers configuration.
package registryapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/opencontainers/go-digest"
	"go.podman.io/image/v5/manifest"
	"go.podman.io/image/v5/pkg/docker/config"
	"go.podman.io/image/v5/types"
)

// manifestAccept lists every manifest media type a HEAD or GET accepts (the
// list containers/image asks for), so the registry answers with the digest
// the content was pushed under.
var manifestAccept = strings.Join(manifest.DefaultRequestedManifestMIMETypes, ", ")

// Client talks to one registry host: tag listing, manifest lookups and
// deletes. It is safe for concurrent use.
type Client struct {
	host   string
	scheme string
	client *http.Client
	creds  types.DockerAuthConfig

	mu     sync.Mutex
	tokens map[string]string // scope → bearer token
	basic  bool              // the registry asked for basic auth
	agent  string            // User-Agent
	token  string            // a bearer token given outright (--src-registry-token)
}

// NewClient returns a client for host ("host[:port]") configured as
// containers/image would be with sys: auth file, certificates, TLS
// verification and User-Agent.
func NewClient(host string, sys *types.SystemContext) (*Client, error) {
	tr, insecure, err := Transport(host, sys)
	if err != nil {
		return nil, err
	}
	creds, err := config.GetCredentials(sys, host)
	if err != nil {
		return nil, fmt.Errorf("credentials for %s: %w (check --authfile)", host, err)
	}
	agent := "gapmirror"
	if sys != nil && sys.DockerRegistryUserAgent != "" {
		agent = sys.DockerRegistryUserAgent
	}
	r := &Client{host: host, scheme: "https", client: &http.Client{Transport: tr}, creds: creds, tokens: map[string]string{}, agent: agent}
	if sys != nil {
		r.token = sys.DockerBearerRegistryToken
	}
	if insecure {
		// As containers/image: with verification off, plain HTTP is allowed
		// when the registry does not speak TLS.
		resp, err := r.client.Get("https://" + host + "/v2/")
		if err != nil && strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") {
			r.scheme = "http"
		} else if err == nil {
			resp.Body.Close()
		}
	}
	return r, nil
}

// Credentials are the ones the auth file gives for the host.
func (r *Client) Credentials() types.DockerAuthConfig { return r.creds }

// Host is the registry host.
func (r *Client) Host() string { return r.host }

// Error is a registry answer other than success, with what to do about it.
type Error struct {
	Method, URL string
	Status      int
	Codes       []string
	Body        string
	Hint        string // what to do about it, when known
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("%s %s: registry answered %d", e.Method, e.URL, e.Status)
	if e.Body != "" {
		msg += " " + e.Body
	}
	if e.Hint != "" {
		msg += " (" + e.Hint + ")"
	}
	return msg
}

// Unsupported reports a 405 / UNSUPPORTED answer: the registry does not
// allow this operation (deletes disabled, or tag deletion not implemented).
func (e *Error) Unsupported() bool {
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

// NotFound reports a 404 / *_UNKNOWN answer.
func (e *Error) NotFound() bool {
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
	return errors.As(err, &e) && e.NotFound()
}

// IsUnsupported reports whether err is a registry's 405 / UNSUPPORTED.
func IsUnsupported(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Unsupported()
}

func (r *Client) do(ctx context.Context, method, path string, header http.Header, scope string) (*http.Response, error) {
	u := r.scheme + "://" + r.host + path
	for attempt := 0; attempt < 2; attempt++ {
		req, err := http.NewRequestWithContext(ctx, method, u, nil)
		if err != nil {
			return nil, err
		}
		for k, v := range header {
			req.Header[k] = v
		}
		req.Header.Set("User-Agent", r.agent)
		r.authorize(req, scope)
		resp, err := r.client.Do(req)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", method, u, err)
		}
		if resp.StatusCode != http.StatusUnauthorized || attempt == 1 {
			return resp, nil
		}
		challenge := resp.Header.Get("WWW-Authenticate")
		drain(resp)
		if err := r.login(ctx, challenge, scope); err != nil {
			return nil, fmt.Errorf("%s %s: %w", method, u, err)
		}
	}
	return nil, errors.New("unreachable")
}

func (r *Client) authorize(req *http.Request, scope string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	} else if tok := r.tokens[scope]; tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	} else if r.basic && r.creds.Username != "" {
		req.SetBasicAuth(r.creds.Username, r.creds.Password)
	}
}

// login answers a 401 challenge: basic auth, or a bearer token from the
// realm for scope.
func (r *Client) login(ctx context.Context, challenge, scope string) error {
	scheme, params := parseChallenge(challenge)
	switch strings.ToLower(scheme) {
	case "basic":
		if r.creds.Username == "" {
			return fmt.Errorf("registry %s wants credentials and none are configured for it: log in (podman login %s) or pass --authfile", r.host, r.host)
		}
		r.mu.Lock()
		r.basic = true
		r.mu.Unlock()
		return nil
	case "bearer":
		realm, err := url.Parse(params["realm"])
		if err != nil || realm.Host == "" {
			return fmt.Errorf("registry %s sent a bearer challenge without a usable realm: %q", r.host, challenge)
		}
		q := url.Values{}
		if s := params["service"]; s != "" {
			q.Set("service", s)
		}
		q.Set("scope", scope)
		var req *http.Request
		if r.creds.IdentityToken != "" {
			// An identity token is an OAuth2 refresh token: exchanged with
			// a POST, as containers/image does for the copies.
			q.Set("grant_type", "refresh_token")
			q.Set("refresh_token", r.creds.IdentityToken)
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
			if err == nil && r.creds.Username != "" {
				req.SetBasicAuth(r.creds.Username, r.creds.Password)
			}
		}
		if err != nil {
			return err
		}
		realm.RawQuery = "" // errors name the realm without the parameters
		resp, err := r.client.Do(req)
		if err != nil {
			return fmt.Errorf("getting a token from %s: %w", realm, err)
		}
		defer drain(resp)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("getting a token from %s: %s (check the credentials for %s in --authfile)", realm, resp.Status, r.host)
		}
		var tok struct {
			Token       string `json:"token"`
			AccessToken string `json:"access_token"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil {
			return fmt.Errorf("token from %s: %w", realm, err)
		}
		if tok.Token == "" {
			tok.Token = tok.AccessToken
		}
		r.mu.Lock()
		r.tokens[scope] = tok.Token
		r.mu.Unlock()
		return nil
	default:
		return fmt.Errorf("registry %s wants authentication %q, which gapmirror cannot answer", r.host, challenge)
	}
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

func (r *Client) answer(resp *http.Response, method string) error {
	defer drain(resp)
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	e := &Error{Method: method, URL: resp.Request.URL.String(), Status: resp.StatusCode, Body: strings.TrimSpace(string(body)), Hint: r.authHint(resp)}
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

// authHint says what to do about a 401 or 403 that survived logging in.
// Token registries (distribution) answer 401 with error="insufficient_scope"
// when the token is valid but lacks the action; others answer 403.
func (r *Client) authHint(resp *http.Response) string {
	if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
		return ""
	}
	if r.creds.Username == "" && r.creds.IdentityToken == "" {
		return fmt.Sprintf("registry %s wants credentials and none are configured for it: log in (podman login %s) or pass --authfile", r.host, r.host)
	}
	if resp.StatusCode == http.StatusForbidden || strings.Contains(resp.Header.Get("WWW-Authenticate"), "insufficient_scope") {
		return fmt.Sprintf("denied: the account --authfile gives for %s may not do this; listing tags needs pull, deleting needs delete (push on some registries)", r.host)
	}
	return fmt.Sprintf("the registry refused the credentials for %s: check them in --authfile", r.host)
}

func pullScope(repo string) string { return "repository:" + repo + ":pull" }

// deleteScope asks for every action: distribution wants "delete", quay
// "push", and both accept "*" (as containers/image does for deletes).
func deleteScope(repo string) string { return "repository:" + repo + ":*" }

// Tags lists the tags of repo (every page); a repository that does not
// exist has none.
func (r *Client) Tags(ctx context.Context, repo string) ([]string, error) {
	var out []string
	path := "/v2/" + repo + "/tags/list?n=1000"
	for path != "" {
		resp, err := r.do(ctx, http.MethodGet, path, nil, pullScope(repo))
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			err := r.answer(resp, http.MethodGet)
			if IsNotFound(err) {
				return out, nil
			}
			return nil, err
		}
		var page struct {
			Tags []string `json:"tags"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		link := resp.Header.Get("Link")
		drain(resp)
		if err != nil {
			return nil, fmt.Errorf("tags of %s/%s: %w", r.host, repo, err)
		}
		out = append(out, page.Tags...)
		path = nextLink(link)
	}
	return out, nil
}

// nextLink takes the path of a `Link: </v2/…>; rel="next"` header.
func nextLink(h string) string {
	if h == "" || !strings.Contains(h, `rel="next"`) {
		return ""
	}
	start, end := strings.Index(h, "<"), strings.Index(h, ">")
	if start < 0 || end < start {
		return ""
	}
	u, err := url.Parse(h[start+1 : end])
	if err != nil {
		return ""
	}
	if u.RawQuery != "" {
		return u.Path + "?" + u.RawQuery
	}
	return u.Path
}

// Head returns the digest and media type of the manifest repo:ref names.
func (r *Client) Head(ctx context.Context, repo, ref string) (digest.Digest, string, error) {
	resp, err := r.do(ctx, http.MethodHead, "/v2/"+repo+"/manifests/"+ref, http.Header{"Accept": {manifestAccept}}, pullScope(repo))
	if err != nil {
		return "", "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", "", r.answer(resp, http.MethodHead)
	}
	drain(resp)
	d, err := digest.Parse(resp.Header.Get("Docker-Content-Digest"))
	if err != nil {
		// Some registries leave the header out of HEAD: ask for the content.
		data, mt, gerr := r.Manifest(ctx, repo, ref)
		if gerr != nil {
			return "", "", gerr
		}
		return digest.FromBytes(data), mt, nil
	}
	return d, resp.Header.Get("Content-Type"), nil
}

// Manifest returns the manifest repo:ref and its media type.
func (r *Client) Manifest(ctx context.Context, repo, ref string) ([]byte, string, error) {
	resp, err := r.do(ctx, http.MethodGet, "/v2/"+repo+"/manifests/"+ref, http.Header{"Accept": {manifestAccept}}, pullScope(repo))
	if err != nil {
		return nil, "", err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, "", r.answer(resp, http.MethodGet)
	}
	defer drain(resp)
	data, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, "", fmt.Errorf("manifest %s/%s:%s: %w", r.host, repo, ref, err)
	}
	return data, resp.Header.Get("Content-Type"), nil
}

// DeleteManifest deletes manifest d from repo; the registry drops every
// tag of repo that points at it.
func (r *Client) DeleteManifest(ctx context.Context, repo string, d digest.Digest) error {
	return r.delete(ctx, repo, d.String())
}

// DeleteTag removes tag from repo and leaves the manifest it names (OCI
// distribution spec; distribution v3, quay and others implement it).
func (r *Client) DeleteTag(ctx context.Context, repo, tag string) error {
	return r.delete(ctx, repo, tag)
}

func (r *Client) delete(ctx context.Context, repo, ref string) error {
	resp, err := r.do(ctx, http.MethodDelete, "/v2/"+repo+"/manifests/"+ref, nil, deleteScope(repo))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusOK {
		return r.answer(resp, http.MethodDelete)
	}
	drain(resp)
	return nil
}
