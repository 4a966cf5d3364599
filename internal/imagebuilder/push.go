package imagebuilder

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/docker/distribution/registry/client/auth/challenge"
	"github.com/opencontainers/go-digest"
)

// Target is a registry to push to.
type Target struct {
	// URL is the registry's base URL: "http://127.0.0.1:5000", "https://…",
	// or a bare "host:port" meaning plain HTTP.
	URL string
	// Client sends the requests; nil means a client without proxy that trusts
	// the system roots. For HTTPS with a private CA, pass a client trusting it.
	Client *http.Client
	// Username and Password, when set, are sent as HTTP basic auth, or to
	// the token server of a registry that answers with a Bearer challenge.
	Username string
	// Password is the password of Username.
	Password string
}

// defaultClient is used when Target.Client is nil.
var defaultClient = sync.OnceValue(func() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	return &http.Client{Transport: t}
})

// pusher uploads to one Target and remembers where blobs already are, so a
// blob pushed to one repository is mounted into the next instead of re-sent.
type pusher struct {
	base   *url.URL
	client *http.Client
	target Target

	mu     sync.Mutex
	repoOf map[digest.Digest]string // a repository known to hold the blob
	tokens map[string]string        // bearer token per tokenKey
}

func newPusher(t Target) (*pusher, error) {
	raw := t.URL
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	base, err := url.Parse(raw)
	if err != nil || base.Host == "" || (base.Scheme != "http" && base.Scheme != "https") {
		return nil, fmt.Errorf("Target.URL %q: want http://host:port, https://host:port or host:port", t.URL)
	}
	base.Path = strings.TrimSuffix(base.Path, "/")
	client := t.Client
	if client == nil {
		client = defaultClient()
	}
	return &pusher{base: base, client: client, target: t, repoOf: map[digest.Digest]string{}, tokens: map[string]string{}}, nil
}

// Push uploads img's blobs and manifest to repo on t, tagged tag (or by
// digest only when tag is empty). Blobs the repository has are skipped.
func Push(ctx context.Context, t Target, repo, tag string, img *Image) error {
	p, err := newPusher(t)
	if err != nil {
		return err
	}
	return p.pushImage(ctx, repo, tag, img)
}

// PushIndex uploads every image of idx by digest, then the index tagged tag
// (or by digest only when tag is empty).
func PushIndex(ctx context.Context, t Target, repo, tag string, idx *Index) error {
	p, err := newPusher(t)
	if err != nil {
		return err
	}
	return p.pushIndex(ctx, repo, tag, idx)
}

// PushBlob uploads one blob into repo unless the repository has it.
func PushBlob(ctx context.Context, t Target, repo string, b Blob) error {
	p, err := newPusher(t)
	if err != nil {
		return err
	}
	return p.pushBlob(ctx, repo, b)
}

// PushManifest uploads raw manifest bytes of mediaType as repo:ref (a tag or
// the manifest's digest). Blobs and child manifests must already be there.
func PushManifest(ctx context.Context, t Target, repo, ref, mediaType string, manifest []byte) error {
	p, err := newPusher(t)
	if err != nil {
		return err
	}
	return p.pushManifest(ctx, repo, ref, mediaType, manifest)
}

func (p *pusher) pushImage(ctx context.Context, repo, tag string, img *Image) error {
	if img == nil {
		return fmt.Errorf("pushing %s/%s: no image given", p.base.Host, repo)
	}
	for _, b := range img.Blobs() {
		if err := p.pushBlob(ctx, repo, b); err != nil {
			return err
		}
	}
	ref := tag
	if ref == "" {
		ref = img.Digest.String()
	}
	return p.pushManifest(ctx, repo, ref, img.MediaType, img.Manifest)
}

func (p *pusher) pushIndex(ctx context.Context, repo, tag string, idx *Index) error {
	if idx == nil {
		return fmt.Errorf("pushing %s/%s: no index given", p.base.Host, repo)
	}
	for _, img := range idx.Images {
		if err := p.pushImage(ctx, repo, "", img); err != nil {
			return fmt.Errorf("image %s of index: %w", img.Platform, err)
		}
	}
	ref := tag
	if ref == "" {
		ref = idx.Digest.String()
	}
	return p.pushManifest(ctx, repo, ref, idx.MediaType, idx.Manifest)
}

// endpoint is the absolute URL of a registry API path.
func (p *pusher) endpoint(path string) string {
	return p.base.String() + path
}

// do sends one request with credentials and returns the response; body, when
// not nil, is the request's content.
func (p *pusher) do(ctx context.Context, method, target string, body *Blob, header http.Header) (*http.Response, error) {
	key := tokenKey(target)
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, method, target, nil)
		if err != nil {
			return nil, fmt.Errorf("building %s %s: %w", method, target, err)
		}
		if body != nil {
			req.Body = body.Open()
			req.ContentLength = body.Size
			req.GetBody = func() (io.ReadCloser, error) { return body.Open(), nil }
			if body.Size == 0 {
				req.Body = http.NoBody
			}
		}
		for k, v := range header {
			req.Header[k] = v
		}
		p.mu.Lock()
		tok := p.tokens[key]
		p.mu.Unlock()
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		} else if p.target.Username != "" {
			req.SetBasicAuth(p.target.Username, p.target.Password)
		}
		resp, err := p.client.Do(req)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", method, target, err)
		}
		bearer := bearerChallenge(resp)
		if resp.StatusCode != http.StatusUnauthorized || bearer == nil || attempt > 0 {
			return resp, nil
		}
		drain(resp)
		if tok, err = p.fetchToken(ctx, bearer); err != nil {
			return nil, fmt.Errorf("%s %s: %w", method, target, err)
		}
		p.mu.Lock()
		p.tokens[key] = tok
		p.mu.Unlock()
	}
}

// tokenKey groups requests that need the same token: the repository, and
// the source repository of a mount.
func tokenKey(target string) string {
	u, err := url.Parse(target)
	if err != nil {
		return target
	}
	repo := u.Path
	for _, sep := range []string{"/blobs/", "/manifests/"} {
		if i := strings.LastIndex(repo, sep); i >= 0 {
			repo = repo[:i]
			break
		}
	}
	return repo + " " + u.Query().Get("from")
}

// bearerChallenge is the parameters of resp's Bearer challenge, or nil.
func bearerChallenge(resp *http.Response) map[string]string {
	for _, c := range challenge.ResponseChallenges(resp) {
		if strings.EqualFold(c.Scheme, "bearer") {
			return c.Parameters
		}
	}
	return nil
}

// fetchToken gets a token for the challenge's scope from its realm, with
// the target's credentials when it has some.
func (p *pusher) fetchToken(ctx context.Context, params map[string]string) (string, error) {
	realm, err := url.Parse(params["realm"])
	if err != nil || realm.Host == "" {
		return "", fmt.Errorf("bearer challenge with a bad realm %q", params["realm"])
	}
	q := realm.Query()
	if s := params["service"]; s != "" {
		q.Set("service", s)
	}
	for _, s := range strings.Fields(params["scope"]) {
		q.Add("scope", s)
	}
	realm.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, realm.String(), nil)
	if err != nil {
		return "", err
	}
	if p.target.Username != "" {
		req.SetBasicAuth(p.target.Username, p.target.Password)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("getting a token: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", answerError("getting a token from "+realm.Host, resp)
	}
	defer drain(resp)
	var tok struct {
		Token       string `json:"token"`
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil {
		return "", fmt.Errorf("token from %s: %w", realm.Host, err)
	}
	if tok.Token == "" {
		tok.Token = tok.AccessToken
	}
	return tok.Token, nil
}

// answerError describes an unexpected registry answer and closes its body.
func answerError(what string, resp *http.Response) error {
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	hint := ""
	if resp.StatusCode == http.StatusUnauthorized {
		hint = " (set Target.Username and Target.Password)"
	}
	return fmt.Errorf("%s: registry answered %s%s: %s", what, resp.Status, hint, strings.TrimSpace(string(body)))
}

// drain closes a response body after reading what is left of it.
func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
}

func (p *pusher) pushBlob(ctx context.Context, repo string, b Blob) error {
	what := fmt.Sprintf("pushing blob %s to %s/%s", b.Digest, p.base.Host, repo)
	resp, err := p.do(ctx, http.MethodHead, p.endpoint("/v2/"+repo+"/blobs/"+b.Digest.String()), nil, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
		drain(resp)
		p.remember(b.Digest, repo)
		return nil
	case http.StatusNotFound:
		drain(resp)
	default:
		return answerError(what, resp)
	}

	start := url.Values{}
	if from := p.knownRepo(b.Digest, repo); from != "" {
		start.Set("mount", b.Digest.String())
		start.Set("from", from)
	}
	startURL := p.endpoint("/v2/" + repo + "/blobs/uploads/")
	if len(start) > 0 {
		startURL += "?" + start.Encode()
	}
	resp, err = p.do(ctx, http.MethodPost, startURL, nil, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	switch resp.StatusCode {
	case http.StatusCreated: // mounted from another repository
		drain(resp)
		p.remember(b.Digest, repo)
		return nil
	case http.StatusAccepted:
		drain(resp)
	default:
		return answerError(what, resp)
	}

	location, err := resp.Location()
	if err != nil {
		return fmt.Errorf("%s: upload answer has no usable Location header: %w", what, err)
	}
	q := location.Query()
	q.Set("digest", b.Digest.String())
	location.RawQuery = q.Encode()
	resp, err = p.do(ctx, http.MethodPut, location.String(), &b, http.Header{
		"Content-Type": {"application/octet-stream"},
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if resp.StatusCode != http.StatusCreated {
		return answerError(what, resp)
	}
	drain(resp)
	p.remember(b.Digest, repo)
	return nil
}

// remember notes that repo holds blob d.
func (p *pusher) remember(d digest.Digest, repo string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.repoOf[d]; !ok {
		p.repoOf[d] = repo
	}
}

// knownRepo is another repository holding d, or "".
func (p *pusher) knownRepo(d digest.Digest, repo string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := p.repoOf[d]; r != repo {
		return r
	}
	return ""
}

func (p *pusher) pushManifest(ctx context.Context, repo, ref, mediaType string, manifest []byte) error {
	what := fmt.Sprintf("pushing manifest %s/%s:%s", p.base.Host, repo, ref)
	if isDigest(ref) {
		what = fmt.Sprintf("pushing manifest %s/%s@%s", p.base.Host, repo, ref)
	}
	body := newBlob(mediaType, manifest)
	resp, err := p.do(ctx, http.MethodPut, p.endpoint("/v2/"+repo+"/manifests/"+ref), &body, http.Header{
		"Content-Type": {mediaType},
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if resp.StatusCode != http.StatusCreated {
		return answerError(what, resp)
	}
	drain(resp)
	want := digest.SHA256.FromBytes(manifest)
	if got := resp.Header.Get("Docker-Content-Digest"); got != "" && got != want.String() {
		return fmt.Errorf("%s: registry stored digest %s, want %s", what, got, want)
	}
	return nil
}
