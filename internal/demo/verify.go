package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/opencontainers/go-digest"
)

// The verification below uses nothing of gapmirror: HTTPS requests of the
// distribution API and sha256 over the bytes the mirror returns.

// manifestAccept lists the manifest media types the checker asks for.
var manifestAccept = strings.Join([]string{
	"application/vnd.oci.image.index.v1+json",
	"application/vnd.oci.image.manifest.v1+json",
	"application/vnd.docker.distribution.manifest.list.v2+json",
	"application/vnd.docker.distribution.manifest.v2+json",
}, ", ")

// checker verifies images at a registry.
type checker struct {
	base   string // "https://127.0.0.1:PORT"
	client *http.Client
}

// imageCheck is what checking one image found.
type imageCheck struct {
	Digest    digest.Digest // of the manifest the tag points at
	Manifests int           // manifests read (the index and its platform manifests)
	Blobs     int           // distinct blobs read and checked
	Bytes     int64         // bytes of those blobs
}

// image checks that repo:tag is the manifest want (any, when want is empty:
// images gapmirror builds) and that every manifest and blob it references
// is in repo with the right digest and size.
func (c *checker) image(ctx context.Context, repo, tag string, want digest.Digest) (imageCheck, error) {
	var res imageCheck
	data, header, err := c.get(ctx, "/v2/"+repo+"/manifests/"+tag, manifestAccept)
	if err != nil {
		return res, err
	}
	res.Digest = digest.SHA256.FromBytes(data)
	if want != "" && res.Digest != want {
		return res, fmt.Errorf("%s:%s is %s, want %s", repo, tag, res.Digest, want)
	}
	if h := header.Get("Docker-Content-Digest"); h != "" && h != res.Digest.String() {
		return res, fmt.Errorf("%s:%s: the registry says its digest is %s, the bytes hash to %s", repo, tag, h, res.Digest)
	}
	seen := map[digest.Digest]bool{}
	if err := c.walk(ctx, repo, data, seen, &res); err != nil {
		return res, fmt.Errorf("%s:%s: %w", repo, tag, err)
	}
	return res, nil
}

// descriptor is the part of a content descriptor the checker needs.
type descriptor struct {
	Digest digest.Digest `json:"digest"`
	Size   int64         `json:"size"`
}

// walk checks the content manifest data references: child manifests of an
// index recursively, then the config and layers of an image manifest.
func (c *checker) walk(ctx context.Context, repo string, data []byte, seen map[digest.Digest]bool, res *imageCheck) error {
	res.Manifests++
	var m struct {
		Manifests []descriptor `json:"manifests"`
		Config    *descriptor  `json:"config"`
		Layers    []descriptor `json:"layers"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("decoding a manifest: %w", err)
	}
	for _, child := range m.Manifests {
		body, _, err := c.get(ctx, "/v2/"+repo+"/manifests/"+child.Digest.String(), manifestAccept)
		if err != nil {
			return err
		}
		if got := digest.SHA256.FromBytes(body); got != child.Digest {
			return fmt.Errorf("platform manifest %s has digest %s", child.Digest, got)
		}
		if err := c.walk(ctx, repo, body, seen, res); err != nil {
			return err
		}
	}
	blobs := m.Layers
	if m.Config != nil {
		blobs = append([]descriptor{*m.Config}, blobs...)
	}
	for _, b := range blobs {
		if seen[b.Digest] {
			continue
		}
		seen[b.Digest] = true
		if err := c.blob(ctx, repo, b); err != nil {
			return err
		}
		res.Blobs++
		res.Bytes += b.Size
	}
	return nil
}

// blob reads blob d of repo and checks its size and digest.
func (c *checker) blob(ctx context.Context, repo string, d descriptor) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/v2/"+repo+"/blobs/"+d.Digest.String(), nil)
	if err != nil {
		return err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return fmt.Errorf("blob %s: %w", d.Digest, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("blob %s is missing: the mirror answered %s", d.Digest, resp.Status)
	}
	h := digest.SHA256.Digester()
	n, err := io.Copy(h.Hash(), resp.Body)
	if err != nil {
		return fmt.Errorf("blob %s: reading: %w", d.Digest, err)
	}
	if n != d.Size {
		return fmt.Errorf("blob %s is %d bytes, the manifest says %d", d.Digest, n, d.Size)
	}
	if got := h.Digest(); got != d.Digest {
		return fmt.Errorf("blob %s has content with digest %s", d.Digest, got)
	}
	return nil
}

// get fetches path and returns the body and headers of a 200 answer.
func (c *checker) get(ctx context.Context, path, accept string) ([]byte, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return nil, nil, err
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, nil, fmt.Errorf("GET %s: reading: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("GET %s: the mirror answered %s", path, resp.Status)
	}
	return body, resp.Header, nil
}

// content returns the manifest or blob d of repo: the catalog library reads
// a catalog image's FBC through it.
func (c *checker) content(ctx context.Context, repo string, d digest.Digest) ([]byte, error) {
	data, _, err := c.get(ctx, "/v2/"+repo+"/blobs/"+d.String(), "")
	if err != nil {
		data, _, err = c.get(ctx, "/v2/"+repo+"/manifests/"+d.String(), manifestAccept)
	}
	if err != nil {
		return nil, err
	}
	if got := digest.SHA256.FromBytes(data); got != d {
		return nil, fmt.Errorf("%s@%s has content with digest %s", repo, d, got)
	}
	return data, nil
}

// missing reports whether repo:tag is not at the registry (404).
func (c *checker) missing(ctx context.Context, repo, tag string) bool {
	_, _, err := c.get(ctx, "/v2/"+repo+"/manifests/"+tag, manifestAccept)
	return err != nil && strings.Contains(err.Error(), "404")
}
