package registrytest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"

	"github.com/opencontainers/go-digest"
	"go.podman.io/image/v5/manifest"
)

// ErrNotFound is returned (wrapped) when a repository, manifest or blob does not exist.
var ErrNotFound = errors.New("not found")

// manifestAccept lists every manifest media type the inspection helpers
// accept: the list containers/image asks for.
var manifestAccept = strings.Join(manifest.DefaultRequestedManifestMIMETypes, ", ")

// The inspection helpers below talk to the registry application in-process:
// they bypass the network, TLS and the Wrap hook (so injected faults never hit
// them), and send the registry's credentials when auth is on.

// do runs one request against the registry application and records the answer.
func (r *Registry) do(method, path string, header http.Header) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, "http://"+r.host+path, nil)
	req.Host = r.host
	for k, v := range header {
		req.Header[k] = v
	}
	if r.tokens != nil {
		// The helpers skip the token server: a token minted here for the path.
		if tok, err := r.tokens.helperToken(path); err == nil {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
	} else if r.opts.Username != "" {
		req.SetBasicAuth(r.opts.Username, r.opts.Password)
	}
	rec := httptest.NewRecorder()
	r.app.ServeHTTP(rec, req)
	return rec
}

// answerError turns a non-success registry answer into an error.
func answerError(what string, rec *httptest.ResponseRecorder) error {
	body := strings.TrimSpace(rec.Body.String())
	if len(body) > 300 {
		body = body[:300] + "…"
	}
	if rec.Code == http.StatusNotFound {
		return fmt.Errorf("%s: %w (registry answered %d %s)", what, ErrNotFound, rec.Code, body)
	}
	return fmt.Errorf("%s: registry answered %d %s", what, rec.Code, body)
}

// ManifestDigest is the digest of the manifest repo:ref (ref is a tag or a digest).
func (r *Registry) ManifestDigest(repo, ref string) (digest.Digest, error) {
	what := fmt.Sprintf("manifest %s", r.Ref(repo, ref))
	rec := r.do(http.MethodHead, "/v2/"+repo+"/manifests/"+ref, http.Header{"Accept": {manifestAccept}})
	if rec.Code != http.StatusOK {
		return "", answerError(what, rec)
	}
	d, err := digest.Parse(rec.Header().Get("Docker-Content-Digest"))
	if err != nil {
		return "", fmt.Errorf("%s: bad Docker-Content-Digest header: %w", what, err)
	}
	return d, nil
}

// Manifest is the manifest repo:ref (ref is a tag or a digest) and its media type.
func (r *Registry) Manifest(repo, ref string) ([]byte, string, error) {
	rec := r.do(http.MethodGet, "/v2/"+repo+"/manifests/"+ref, http.Header{"Accept": {manifestAccept}})
	if rec.Code != http.StatusOK {
		return nil, "", answerError(fmt.Sprintf("manifest %s", r.Ref(repo, ref)), rec)
	}
	return rec.Body.Bytes(), rec.Header().Get("Content-Type"), nil
}

// HasBlob reports whether the blob d is linked into repo.
func (r *Registry) HasBlob(repo string, d digest.Digest) (bool, error) {
	rec := r.do(http.MethodHead, "/v2/"+repo+"/blobs/"+d.String(), nil)
	switch rec.Code {
	case http.StatusOK:
		return true, nil
	case http.StatusNotFound:
		return false, nil
	default:
		return false, answerError(fmt.Sprintf("blob %s in %s", d, repo), rec)
	}
}

// Blob is the content of blob d in repo, checked against d. Meant for small
// blobs (configs, test layers): it is read into memory.
func (r *Registry) Blob(repo string, d digest.Digest) ([]byte, error) {
	what := fmt.Sprintf("blob %s in %s", d, repo)
	rec := r.do(http.MethodGet, "/v2/"+repo+"/blobs/"+d.String(), nil)
	if rec.Code != http.StatusOK {
		return nil, answerError(what, rec)
	}
	data := rec.Body.Bytes()
	if got := d.Algorithm().FromBytes(data); got != d {
		return nil, fmt.Errorf("%s: content has digest %s", what, got)
	}
	return data, nil
}

// DeleteBlob unlinks blob d from repo (DELETE /v2/<repo>/blobs/<d>), so the
// repository no longer holds it: what a registry restored from an older
// backup, or cleaned behind gapmirror's back, has lost.
func (r *Registry) DeleteBlob(repo string, d digest.Digest) error {
	rec := r.do(http.MethodDelete, "/v2/"+repo+"/blobs/"+d.String(), nil)
	if rec.Code != http.StatusAccepted {
		return answerError(fmt.Sprintf("deleting blob %s in %s", d, repo), rec)
	}
	return nil
}

// DeleteManifest deletes manifest d from repo (DELETE
// /v2/<repo>/manifests/<d>), and with it every tag of repo naming it: what
// a cleanup script or another tool did behind gapmirror's back.
func (r *Registry) DeleteManifest(repo string, d digest.Digest) error {
	rec := r.do(http.MethodDelete, "/v2/"+repo+"/manifests/"+d.String(), nil)
	if rec.Code != http.StatusAccepted {
		return answerError(fmt.Sprintf("deleting manifest %s in %s", d, repo), rec)
	}
	return nil
}

// Catalog lists the registry's repositories, sorted.
func (r *Registry) Catalog() ([]string, error) {
	var repos []string
	path := fmt.Sprintf("/v2/_catalog?n=%d", maxListEntries)
	for path != "" {
		rec := r.do(http.MethodGet, path, nil)
		if rec.Code != http.StatusOK {
			return nil, answerError("catalog", rec)
		}
		var page struct {
			Repositories []string `json:"repositories"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil {
			return nil, fmt.Errorf("catalog: decoding the answer: %w", err)
		}
		repos = append(repos, page.Repositories...)
		next, err := nextPage(rec.Header().Get("Link"))
		if err != nil {
			return nil, fmt.Errorf("catalog: %w", err)
		}
		path = next
	}
	slices.Sort(repos)
	return repos, nil
}

// Tags lists the tags of repo, sorted; the error wraps ErrNotFound for an unknown repo.
func (r *Registry) Tags(repo string) ([]string, error) {
	var tags []string
	path := fmt.Sprintf("/v2/%s/tags/list?n=%d", repo, maxListEntries)
	for path != "" {
		rec := r.do(http.MethodGet, path, nil)
		if rec.Code != http.StatusOK {
			return nil, answerError(fmt.Sprintf("tags of %s", repo), rec)
		}
		var page struct {
			Tags []string `json:"tags"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil {
			return nil, fmt.Errorf("tags of %s: decoding the answer: %w", repo, err)
		}
		tags = append(tags, page.Tags...)
		next, err := nextPage(rec.Header().Get("Link"))
		if err != nil {
			return nil, fmt.Errorf("tags of %s: %w", repo, err)
		}
		path = next
	}
	slices.Sort(tags)
	return tags, nil
}

// nextPage extracts the path and query of a `Link: <…>; rel="next"` header.
func nextPage(link string) (string, error) {
	if link == "" {
		return "", nil
	}
	start, end := strings.Index(link, "<"), strings.Index(link, ">")
	if start < 0 || end < start {
		return "", fmt.Errorf("malformed Link header %q", link)
	}
	u, err := url.Parse(link[start+1 : end])
	if err != nil {
		return "", fmt.Errorf("malformed Link header %q: %w", link, err)
	}
	return u.RequestURI(), nil
}

// isDigest reports whether ref is a digest rather than a tag.
func isDigest(ref string) bool {
	_, err := digest.Parse(ref)
	return err == nil
}
