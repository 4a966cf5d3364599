package registryapi

import (
	"context"
	"errors"
	"fmt"
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

// Tags lists the tags of repo (every page); a repository that does not
// exist has none.
func (c *Client) Tags(ctx context.Context, repo string) ([]string, error) {
	r, err := c.repository(repo)
	if err != nil {
		return nil, err
	}
	tags, err := remote.List(r, c.options(ctx)...)
	if err != nil {
		err = c.wrap(err)
		if IsNotFound(err) {
			return nil, nil
		}
		return nil, err
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
		// Some registries leave the header out of HEAD: ask for the content.
		// An answer with a status (a 404 for every signature tag looked up)
		// is not that, and is not formatted to find out.
		var status *transport.Error
		if !errors.As(err, &status) && strings.Contains(err.Error(), "Docker-Content-Digest") {
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
