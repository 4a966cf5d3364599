package registrytest

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/subtle"
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
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distribution/distribution/v3/registry/auth/token"
	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// TokenAuth configures the Docker registry token flow, as Quay, Harbor and
// registry.redhat.io use: the registry answers 401 with a Bearer challenge,
// clients get a JWT from a token server with their basic credentials and
// send it as "Authorization: Bearer". The token server runs in this package
// on its own 127.0.0.1 port (HTTPS when the registry is).
type TokenAuth struct {
	// Users are accounts besides Options.Username (which gets every action).
	Users []TokenUser
	// AnonymousPull grants pull on every repository to token requests
	// without credentials (a public registry); otherwise they get a token
	// that allows nothing.
	AnonymousPull bool
	// TTL is how long tokens live; zero means five minutes.
	TTL time.Duration
	// StrictExpiry makes the registry refuse a token past its expiry (1 s
	// of leeway, not distribution's 60 s, which accepts a token for a
	// minute after it expired), answering 401 with a fresh challenge and
	// error="invalid_token", as Quay and Harbor do; see
	// Registry.ExpiredTokens and ExpiryHold.
	StrictExpiry bool
}

// TokenUser is one account of the token server.
type TokenUser struct {
	Username, Password string
	// Actions granted on every repository: "pull", "push", "delete"; nil
	// means all three.
	Actions []string
	// RefreshToken, when set, is also accepted in an OAuth2 POST
	// (grant_type=refresh_token): what auth.json calls an identitytoken.
	RefreshToken string
}

// allActions are what a full user may do on a repository.
var allActions = []string{"pull", "push", "delete"}

const (
	tokenIssuer  = "registrytest-token-issuer"
	tokenService = "registrytest"
)

// tokenServer issues registry tokens signed by a throwaway key whose
// self-signed certificate is the registry's rootcertbundle.
type tokenServer struct {
	users         map[string]TokenUser
	anonymousPull bool
	ttl           time.Duration
	signer        jose.Signer
	bundle        string // path of the rootcertbundle
	realm         string
	server        *http.Server
	served        chan error

	strict  bool
	expired atomic.Int64 // requests refused for an expired token

	mu     sync.Mutex
	issued []string

	closeOnce sync.Once
	closeErr  error
}

// startTokenServer listens on 127.0.0.1 (TLS with cert when not nil) and
// writes the signing certificate under dir.
func startTokenServer(opts Options, dir string, cert *certificate) (*tokenServer, error) {
	ts := &tokenServer{users: map[string]TokenUser{}, anonymousPull: opts.Token.AnonymousPull, ttl: opts.Token.TTL, served: make(chan error, 1),
		strict: opts.Token.StrictExpiry}
	if ts.ttl == 0 {
		ts.ttl = 5 * time.Minute
	}
	for _, u := range opts.Token.Users {
		if u.Username == "" || u.Password == "" {
			return nil, errors.New("registrytest: every TokenAuth user needs a Username and a Password")
		}
		ts.users[u.Username] = u
	}
	if opts.Username != "" {
		ts.users[opts.Username] = TokenUser{Username: opts.Username, Password: opts.Password}
	}

	signing, err := newSelfSignedCertificate()
	if err != nil {
		return nil, err
	}
	key := signing.tls.PrivateKey.(*ecdsa.PrivateKey)
	// distribution finds the verification key by this key ID among the
	// rootcertbundle's keys (no x5c chain needed).
	kid := token.GetJWKThumbprint(&key.PublicKey)
	ts.signer, err = jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		return nil, fmt.Errorf("registrytest: token signer: %w", err)
	}
	ts.bundle = filepath.Join(dir, "token-root.crt")
	if err := os.WriteFile(ts.bundle, signing.certPEM, 0o600); err != nil {
		return nil, fmt.Errorf("registrytest: writing the token root certificate: %w", err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("registrytest: token server: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/token", ts.serveToken)
	ts.server = &http.Server{Handler: mux, ReadHeaderTimeout: 30 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	scheme := "http"
	if cert != nil {
		scheme = "https"
		ts.server.TLSConfig = cert.serverConfig()
	}
	ts.realm = scheme + "://" + ln.Addr().String() + "/token"
	go func() {
		if cert != nil {
			ts.served <- ts.server.ServeTLS(ln, "", "")
		} else {
			ts.served <- ts.server.Serve(ln)
		}
	}()
	return ts, nil
}

// close stops the token server; later calls return the first's result.
func (ts *tokenServer) close() error {
	ts.closeOnce.Do(func() {
		// Close, not Shutdown: token requests are short, and a graceful
		// shutdown waits a second for idle HTTP/2 clients to leave.
		_ = ts.server.Close()
		if err := <-ts.served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			ts.closeErr = fmt.Errorf("registrytest: token server: %w", err)
		}
	})
	return ts.closeErr
}

// serveToken answers GET /token?service=…&scope=… with basic credentials
// (distribution's token spec) and the OAuth2 POST form with
// grant_type=password or refresh_token (distribution's oauth spec).
func (ts *tokenServer) serveToken(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet && req.Method != http.MethodPost {
		tokenError(w, http.StatusMethodNotAllowed, "UNSUPPORTED", "use GET or POST")
		return
	}
	if err := req.ParseForm(); err != nil {
		tokenError(w, http.StatusBadRequest, "INVALID_REQUEST", "bad form")
		return
	}
	q := req.Form
	if s := q.Get("service"); s != "" && s != tokenService {
		tokenError(w, http.StatusBadRequest, "INVALID_REQUEST", "unknown service")
		return
	}
	var user *TokenUser
	name, password, basic := req.BasicAuth()
	switch {
	case req.Method == http.MethodPost && q.Get("grant_type") == "refresh_token":
		user = ts.userByRefreshToken(q.Get("refresh_token"))
	case req.Method == http.MethodPost && q.Get("grant_type") == "password":
		user = ts.user(q.Get("username"), q.Get("password"))
	case req.Method == http.MethodPost:
		tokenError(w, http.StatusBadRequest, "UNSUPPORTED", "unsupported grant_type")
		return
	case basic:
		user = ts.user(name, password)
	}
	var actions []string
	subject := ""
	switch {
	case user != nil:
		subject, actions = user.Username, user.Actions
		if actions == nil {
			actions = allActions
		}
	case basic || req.Method == http.MethodPost:
		w.Header().Set("WWW-Authenticate", `Basic realm="registrytest-token"`)
		tokenError(w, http.StatusUnauthorized, "UNAUTHORIZED", "authentication failed")
		return
	case ts.anonymousPull:
		actions = []string{"pull"}
	}

	var access []*token.ResourceActions
	for _, param := range q["scope"] {
		for _, scope := range strings.Fields(param) {
			if ra := grant(scope, subject, actions); ra != nil {
				access = append(access, ra)
			}
		}
	}
	raw, err := ts.mint(subject, access)
	if err != nil {
		tokenError(w, http.StatusInternalServerError, "UNKNOWN", err.Error())
		return
	}
	ts.mu.Lock()
	ts.issued = append(ts.issued, raw)
	ts.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"token": raw, "access_token": raw,
		"expires_in": int(ts.ttl.Seconds()), "issued_at": time.Now().UTC().Format(time.RFC3339),
	})
}

// user is the account name names when password is right, or nil.
func (ts *tokenServer) user(name, password string) *TokenUser {
	u, ok := ts.users[name]
	if !ok || subtle.ConstantTimeCompare([]byte(u.Password), []byte(password)) != 1 {
		return nil
	}
	return &u
}

// userByRefreshToken is the account whose RefreshToken is tok, or nil.
func (ts *tokenServer) userByRefreshToken(tok string) *TokenUser {
	for _, u := range ts.users {
		if u.RefreshToken != "" && subtle.ConstantTimeCompare([]byte(u.RefreshToken), []byte(tok)) == 1 {
			return &u
		}
	}
	return nil
}

// grant is what subject, allowed actions on every repository, gets of one
// requested scope "type:name:action,…"; nil for nothing.
func grant(scope, subject string, actions []string) *token.ResourceActions {
	typ, rest, ok := strings.Cut(scope, ":")
	i := strings.LastIndex(rest, ":")
	if !ok || i < 0 {
		return nil
	}
	name, requested := rest[:i], strings.Split(rest[i+1:], ",")
	ra := &token.ResourceActions{Type: typ, Name: name}
	switch typ {
	case "registry":
		// The catalog needs "*"; any signed-in user may list it.
		if name == "catalog" && subject != "" {
			ra.Actions = []string{"*"}
		}
	case "repository":
		for _, a := range actions {
			if slices.Contains(requested, a) || slices.Contains(requested, "*") {
				ra.Actions = append(ra.Actions, a)
			}
		}
	}
	if len(ra.Actions) == 0 {
		return nil
	}
	return ra
}

// mint signs a token for subject with access.
func (ts *tokenServer) mint(subject string, access []*token.ResourceActions) (string, error) {
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return "", err
	}
	now := time.Now()
	if access == nil {
		access = []*token.ResourceActions{}
	}
	claims := token.ClaimSet{
		Issuer: tokenIssuer, Subject: subject, Audience: token.AudienceList{tokenService},
		Expiration: now.Add(ts.ttl).Unix(), NotBefore: now.Unix(), IssuedAt: now.Unix(),
		JWTID: hex.EncodeToString(id), Access: access,
	}
	return jwt.Signed(ts.signer).Claims(claims).Serialize()
}

// issuedTokens are the tokens the server handed out so far.
func (ts *tokenServer) issuedTokens() []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return slices.Clone(ts.issued)
}

// tokenError writes a distribution-style error answer.
func tokenError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"errors": []map[string]string{{"code": code, "message": message}}})
}

// helperToken is a token for the inspection helpers: every action on the
// repository path names, and the catalog.
func (ts *tokenServer) helperToken(path string) (string, error) {
	access := []*token.ResourceActions{{Type: "registry", Name: "catalog", Actions: []string{"*"}}}
	rest := strings.TrimPrefix(path, "/v2/")
	rest, _, _ = strings.Cut(rest, "?")
	for _, sep := range []string{"/manifests/", "/blobs/", "/tags/"} {
		if i := strings.LastIndex(rest, sep); i > 0 {
			access = append(access, &token.ResourceActions{Type: "repository", Name: rest[:i], Actions: []string{"*"}})
			break
		}
	}
	return ts.mint("registrytest-helper", access)
}

// strictLeeway is how long past its expiry StrictExpiry still accepts a token.
const strictLeeway = time.Second

// front stands before the registry for StrictExpiry.
func (ts *tokenServer) front(next http.Handler) http.Handler {
	if !ts.strict {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		auth := req.Header.Get("Authorization")
		if !strings.HasPrefix(auth, "Bearer ") || !expired(strings.TrimPrefix(auth, "Bearer "), strictLeeway) {
			next.ServeHTTP(w, req)
			return
		}
		ts.expired.Add(1)
		repo, actions := requestScope(req)
		challenge := fmt.Sprintf(`Bearer realm=%q,service=%q,error="invalid_token"`, ts.realm, tokenService)
		if repo != "" {
			challenge = fmt.Sprintf(`Bearer realm=%q,service=%q,scope="repository:%s:%s",error="invalid_token"`, ts.realm, tokenService, repo, actions)
		}
		w.Header().Set("WWW-Authenticate", challenge)
		tokenError(w, http.StatusUnauthorized, "UNAUTHORIZED", "token expired")
	})
}

// expired reports whether the JWT raw expired more than leeway ago. Its
// signature is the registry's to check; only the expiry is read here.
func expired(raw string, leeway time.Duration) bool {
	exp, ok := tokenExpiry(raw)
	return ok && time.Now().After(exp.Add(leeway))
}

// tokenExpiry is the exp claim of the JWT raw; ok is false when raw is not
// a JWT with one.
func tokenExpiry(raw string) (exp time.Time, ok bool) {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, false
	}
	var claims struct {
		Exp int64 `json:"exp"`
	}
	if json.Unmarshal(payload, &claims) != nil || claims.Exp == 0 {
		return time.Time{}, false
	}
	return time.Unix(claims.Exp, 0), true
}

// ExpiryHold is a handler wrapper (SetWrap) for a registry with
// StrictExpiry: it holds a matching request that carries a bearer token
// until that token has expired, then lets it through, so that the
// registry refuses it with 401 invalid_token. It is a request that spent
// longer on the way than its token lived (a slow link, a proxy buffering
// an upload), made certain: a client that renews its tokens ahead of their
// expiry never sends an expired one by itself. Each blob (repository and
// digest) is held once, so a retry with a new token goes through; at most
// times requests are held in all.
type ExpiryHold struct {
	match func(*http.Request) bool
	times int

	mu   sync.Mutex
	seen map[string]bool
	n    atomic.Int64
}

// NewExpiryHold holds up to times requests that match (MatchBlobGet,
// MatchBlobUpload).
func NewExpiryHold(times int, match func(*http.Request) bool) *ExpiryHold {
	return &ExpiryHold{match: match, times: times, seen: map[string]bool{}}
}

// Held is how many requests were held so far.
func (h *ExpiryHold) Held() int64 { return h.n.Load() }

// claim reports whether req is to be held, and counts it.
func (h *ExpiryHold) claim(req *http.Request) bool {
	if !h.match(req) {
		return false
	}
	repo, _ := requestScope(req)
	key := req.Method + " " + repo + "@" + req.URL.Query().Get("digest")
	if _, d, ok := BlobPath(req.URL.Path); ok {
		key = req.Method + " " + repo + "@" + d.String()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.seen[key] || len(h.seen) >= h.times {
		return false
	}
	h.seen[key] = true
	h.n.Add(1)
	return true
}

// Wrap is the handler wrapper.
func (h *ExpiryHold) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		auth, isBearer := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
		exp, ok := tokenExpiry(auth)
		if isBearer && ok && h.claim(req) {
			// A little past the leeway: the registry must find it expired.
			wait := time.NewTimer(time.Until(exp.Add(strictLeeway + 50*time.Millisecond)))
			select {
			case <-wait.C:
			case <-req.Context().Done():
				wait.Stop()
				return
			}
		}
		next.ServeHTTP(w, req)
	})
}

// requestScope is the repository a registry API request is about and the
// actions it needs ("" for /v2/ itself and the catalog).
func requestScope(req *http.Request) (repo, actions string) {
	p := strings.TrimPrefix(req.URL.Path, "/v2/")
	if p == req.URL.Path || p == "" || p == "_catalog" {
		return "", ""
	}
	for _, sep := range []string{"/manifests/", "/blobs/", "/tags/", "/referrers/"} {
		if i := strings.LastIndex(p, sep); i > 0 {
			repo = p[:i]
			break
		}
	}
	if repo == "" {
		return "", ""
	}
	switch req.Method {
	case http.MethodGet, http.MethodHead:
		return repo, "pull"
	case http.MethodDelete:
		return repo, "delete"
	}
	return repo, "pull,push"
}
