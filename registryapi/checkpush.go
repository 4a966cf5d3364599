package registryapi

import (
	"context"
	"net/http"
	"net/url"
)

// pushScope asks for pull and push, as a copy into repo does.
func pushScope(repo string) string { return "repository:" + repo + ":pull,push" }

// CheckPush asks the registry to start a blob upload in repo and cancels
// the upload at once: the answer says whether these credentials may push
// there, and nothing is written. A registry that refuses answers 401/403
// (*Error, with the registry's words).
func (r *Client) CheckPush(ctx context.Context, repo string) error {
	resp, err := r.do(ctx, http.MethodPost, "/v2/"+repo+"/blobs/uploads/", nil, pushScope(repo))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusAccepted {
		return r.answer(resp, http.MethodPost)
	}
	loc := resp.Header.Get("Location")
	drain(resp)
	if loc == "" {
		return nil
	}
	// Cancel the upload session (best effort: registries expire them).
	u, err := url.Parse(loc)
	if err != nil || u.Host != "" && u.Host != r.host {
		return nil
	}
	if resp, err := r.do(ctx, http.MethodDelete, u.RequestURI(), nil, pushScope(repo)); err == nil {
		drain(resp)
	}
	return nil
}
