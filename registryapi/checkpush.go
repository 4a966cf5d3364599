package registryapi

import (
	"context"
	"net/http"
	"net/url"
)

// CheckPush asks the registry to start a blob upload in repo and cancels
// the upload at once: the answer says whether these credentials may push
// there, and nothing is written. A registry that refuses answers 401/403
// (*Error, with the registry's words).
func (c *Client) CheckPush(ctx context.Context, repo string) error {
	resp, err := c.send(ctx, http.MethodPost, c.url("/v2/"+repo+"/blobs/uploads/"), nil, nil, 0)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusAccepted {
		return c.answer(resp, http.MethodPost)
	}
	loc := resp.Header.Get("Location")
	drain(resp)
	if loc == "" {
		return nil
	}
	// Cancel the upload session (best effort: registries expire them).
	u, err := url.Parse(loc)
	if err != nil || u.Host != "" && u.Host != c.host {
		return nil
	}
	if resp, err := c.send(ctx, http.MethodDelete, c.url(u.RequestURI()), nil, nil, 0); err == nil {
		drain(resp)
	}
	return nil
}
