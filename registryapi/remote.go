package registryapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/opencontainers/go-digest"
)

// Tags, lookups and deletes are go-containerregistry's remote, over the
// client's one transport.

func (c *Client) options(ctx context.Context) []remote.Option {
	return []remote.Option{remote.WithContext(ctx), remote.WithTransport(c.remote), remote.WithUserAgent(c.ua), remote.WithPageSize(1000)}
}

func (c *Client) repository(repo string) (name.Repository, error) {
	r, err := name.NewRepository(c.host+"/"+repo, name.WeakValidation)
	if err != nil {
		return name.Repository{}, fmt.Errorf("repository %s/%s: %w", c.host, repo, err)
	}
	return r, nil
}

// reference is repo:ref or repo@ref.
func (c *Client) reference(repo, ref string) (name.Reference, error) {
	r, err := c.repository(repo)
	if err != nil {
		return nil, err
	}
	if strings.Contains(ref, ":") {
		return r.Digest(ref), nil
	}
	return r.Tag(ref), nil
}

// Tags lists the tags of repo (every page, followed by Link); a repository
// that does not exist has none. Not remote.List: go-containerregistry
// (v0.21.7) refuses a next page whose scheme differs from the one it
// guesses for the host (http for private and loopback addresses), which is
// every page of a TLS registry on a private network.
func (c *Client) Tags(ctx context.Context, repo string) ([]string, error) {
	if _, err := c.repository(repo); err != nil {
		return nil, err
	}
	u := c.url("/v2/" + repo + "/tags/list?n=1000")
	var tags []string
	for page := 0; u != ""; page++ {
		if page == 100000 {
			return nil, fmt.Errorf("tags of %s/%s: more than %d pages", c.host, repo, page)
		}
		resp, err := c.send(ctx, http.MethodGet, u, nil, nil, 0)
		if err != nil {
			return nil, c.wrap(err)
		}
		if resp.StatusCode != http.StatusOK {
			e := c.answer(resp, http.MethodGet)
			if e.NotFound() {
				return nil, nil
			}
			return nil, e
		}
		var list struct {
			Tags []string `json:"tags"`
		}
		err = json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&list)
		drain(resp)
		if err != nil {
			return nil, fmt.Errorf("tags of %s/%s: %w", c.host, repo, err)
		}
		tags = append(tags, list.Tags...)
		if u, err = c.nextLink(resp); err != nil {
			return nil, err
		}
	}
	return tags, nil
}

// Catalog lists the registry's repositories whose names start with prefix
// (all when prefix is ""), reading at most maxPages pages of its catalog.
// Registries order the catalog differently (distribution walks path
// components), so every page is read and filtered. A registry that does
// not offer its catalog to these credentials, or a catalog longer than
// maxPages, answers with an error.
func (c *Client) Catalog(ctx context.Context, prefix string, maxPages int) ([]string, error) {
	reg, err := name.NewRegistry(c.host, name.WeakValidation)
	if err != nil {
		return nil, fmt.Errorf("registry %q: %w", c.host, err)
	}
	const page = 1000
	var out []string
	last := ""
	for range maxPages {
		repos, err := remote.CatalogPage(reg, last, page, c.options(ctx)...)
		if err != nil {
			return nil, c.wrap(err)
		}
		for _, r := range repos {
			if strings.HasPrefix(r, prefix) {
				out = append(out, r)
			}
		}
		if len(repos) < page {
			return out, nil
		}
		if repos[len(repos)-1] == last {
			return nil, fmt.Errorf("the catalog of %s does not page", c.host)
		}
		last = repos[len(repos)-1]
	}
	return nil, fmt.Errorf("the catalog of %s has more than %d repositories", c.host, maxPages*page)
}

// Head returns the digest and media type of the manifest repo:ref names.
func (c *Client) Head(ctx context.Context, repo, ref string) (digest.Digest, string, error) {
	r, err := c.reference(repo, ref)
	if err != nil {
		return "", "", err
	}
	desc, err := remote.Head(r, c.options(ctx)...)
	if err != nil {
		if strings.Contains(err.Error(), "Docker-Content-Digest") {
			// Some registries leave the header out of HEAD: ask for the content.
			data, mt, gerr := c.Manifest(ctx, repo, ref)
			if gerr != nil {
				return "", "", gerr
			}
			return digest.FromBytes(data), mt, nil
		}
		return "", "", c.wrap(err)
	}
	return digest.Digest(desc.Digest.String()), string(desc.MediaType), nil
}

// Manifest returns the manifest repo:ref and its media type; by digest, it
// is verified against the digest.
func (c *Client) Manifest(ctx context.Context, repo, ref string) ([]byte, string, error) {
	r, err := c.reference(repo, ref)
	if err != nil {
		return nil, "", err
	}
	desc, err := remote.Get(r, c.options(ctx)...)
	if err != nil {
		return nil, "", c.wrap(err)
	}
	return desc.Manifest, string(desc.MediaType), nil
}

// DeleteManifest deletes manifest d from repo; the registry drops every
// tag of repo that points at it.
func (c *Client) DeleteManifest(ctx context.Context, repo string, d digest.Digest) error {
	return c.delete(ctx, repo, d.String())
}

// DeleteTag removes tag from repo and leaves the manifest it names (OCI
// distribution spec; distribution v3, quay and others implement it).
func (c *Client) DeleteTag(ctx context.Context, repo, tag string) error {
	return c.delete(ctx, repo, tag)
}

func (c *Client) delete(ctx context.Context, repo, ref string) error {
	r, err := c.reference(repo, ref)
	if err != nil {
		return err
	}
	return c.wrap(remote.Delete(r, c.options(ctx)...))
}

// wrap turns go-containerregistry's registry errors into Errors (with the
// hint for authentication failures); ours pass through.
func (c *Client) wrap(err error) error {
	if err == nil {
		return nil
	}
	var mine *Error
	if errors.As(err, &mine) {
		return mine
	}
	var te *transport.Error
	if !errors.As(err, &te) {
		return err
	}
	e := &Error{Status: te.StatusCode, Hint: c.authHint(te.StatusCode, "")}
	if te.Request != nil {
		e.Method, e.URL = te.Request.Method, redact(te.Request.URL)
	}
	var msgs []string
	for _, d := range te.Errors {
		e.Codes = append(e.Codes, string(d.Code))
		msgs = append(msgs, string(d.Code)+": "+d.Message)
	}
	e.Body = strings.Join(msgs, "; ")
	if e.Status == http.StatusTooManyRequests || e.Status >= 500 {
		e.Retry = true
	}
	return e
}
