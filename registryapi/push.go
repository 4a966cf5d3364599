package registryapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/opencontainers/go-digest"
)

// singlePostLimit is the largest blob offered in one POST while finding
// out whether the registry takes that form: a registry that does not
// ignores the body, and it is sent again with the PUT.
const singlePostLimit = 1 << 20

func (c *Client) url(path string) string { return "https://" + c.host + path } // the transport sets the scheme

func (c *Client) send(ctx context.Context, method, u string, header http.Header, body io.Reader, size int64) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if body != nil {
		req.ContentLength = size
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	return c.http.Do(req)
}

// HasBlob reports whether repo holds blob d (one HEAD).
func (c *Client) HasBlob(ctx context.Context, repo string, d digest.Digest) (bool, error) {
	resp, err := c.send(ctx, http.MethodHead, c.url("/v2/"+repo+"/blobs/"+d.String()), nil, nil, 0)
	if err != nil {
		return false, c.wrap(err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
		drain(resp)
		return true, nil
	case http.StatusNotFound:
		drain(resp)
		return false, nil
	}
	return false, c.answer(resp, http.MethodHead)
}

// Mount asks the registry to make blob d of repository from available in
// repo. Only a 201 is a mount; a registry that cannot mount opens an
// upload session instead (202), whose location PutBlob then uses, so a
// failed mount costs no request.
func (c *Client) Mount(ctx context.Context, repo, from string, d digest.Digest) (mounted bool, location string, err error) {
	q := url.Values{"mount": {d.String()}, "from": {from}}
	resp, err := c.send(ctx, http.MethodPost, c.url("/v2/"+repo+"/blobs/uploads/?"+q.Encode()), nil, nil, 0)
	if err != nil {
		return false, "", c.wrap(err)
	}
	switch resp.StatusCode {
	case http.StatusCreated:
		drain(resp)
		return true, "", nil
	case http.StatusAccepted:
		loc, err := uploadLocation(resp)
		drain(resp)
		return false, loc, err
	}
	return false, "", c.answer(resp, http.MethodPost)
}

func uploadLocation(resp *http.Response) (string, error) {
	loc, err := resp.Location()
	if err != nil {
		return "", fmt.Errorf("%s %s: the registry opened an upload without a usable Location: %w", resp.Request.Method, redact(resp.Request.URL), err)
	}
	return loc.String(), nil
}

// PutBlob uploads blob d of size bytes from r into repo in one piece: into
// the upload session at location when one is open, else with a POST and a
// PUT, or one POST where the registry takes a blob that way. The registry
// checks the digest before it keeps the blob.
func (c *Client) PutBlob(ctx context.Context, repo string, d digest.Digest, size int64, r io.Reader, location string) error {
	if location == "" {
		var err error
		if location, err = c.startUpload(ctx, repo, d, size, &r); err != nil || location == "" {
			return err
		}
	}
	u, err := url.Parse(location)
	if err != nil {
		return fmt.Errorf("upload location of %s in %s: %w", d, repo, err)
	}
	q := u.Query()
	q.Set("digest", d.String())
	u.RawQuery = q.Encode()
	resp, err := c.send(ctx, http.MethodPut, u.String(), nil, r, size)
	if err != nil {
		return c.wrap(err)
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusOK {
		e := c.answer(resp, http.MethodPut)
		// A session the registry dropped (restarted, expired) is opened
		// again by the next attempt.
		e.Retry = e.Retry || resp.StatusCode == http.StatusNotFound || resp.StatusCode >= 500
		return e
	}
	drain(resp)
	return nil
}

// startUpload opens an upload session in repo and returns its location,
// or "" when the blob was stored by a single POST. It tries that form once
// per registry, with a small blob, and remembers the answer until the
// registry answers one with a session after all (see singlePost).
func (c *Client) startUpload(ctx context.Context, repo string, d digest.Digest, size int64, r *io.Reader) (string, error) {
	post := c.url("/v2/" + repo + "/blobs/uploads/")
	state := c.single.Load()
	if state == 0 && size <= singlePostLimit && c.single.CompareAndSwap(0, 2) {
		data, err := io.ReadAll(io.LimitReader(*r, size+1))
		if err != nil {
			c.single.Store(0)
			return "", err
		}
		*r = bytes.NewReader(data)
		resp, err := c.send(ctx, http.MethodPost, post+"?digest="+url.QueryEscape(d.String()), nil, bytes.NewReader(data), int64(len(data)))
		if err != nil {
			c.single.Store(0)
			return "", c.wrap(err)
		}
		switch resp.StatusCode {
		case http.StatusCreated:
			drain(resp)
			c.single.Store(1)
			return "", nil
		case http.StatusAccepted:
			// The registry opened a session and left the body: the PUT sends it.
			c.single.Store(-1)
			loc, err := uploadLocation(resp)
			drain(resp)
			return loc, err
		}
		drain(resp)
		c.single.Store(-1) // some registries refuse the form outright: the two-step one it is
	} else if state == 1 {
		return c.singlePost(ctx, post, d, size, r)
	}
	resp, err := c.send(ctx, http.MethodPost, post, nil, nil, 0)
	if err != nil {
		return "", c.wrap(err)
	}
	if resp.StatusCode != http.StatusAccepted {
		return "", c.answer(resp, http.MethodPost)
	}
	loc, err := uploadLocation(resp)
	drain(resp)
	return loc, err
}

// singlePost stores blob d with one POST, on a registry that took that
// form before, and returns "" when it did. A registry may still open an
// upload session instead (202: it takes the form only for some blobs, or
// the instances behind its address differ): the session's location is
// returned and the PUT sends the body there, and the two-step form is used
// from then on. So that the body can be sent again, a small blob is kept in
// memory; a large one is streamed, and when the registry has read some of
// it before answering 202 it cannot be sent again from here: the error
// says so and asks for a retry, which reads the blob afresh.
func (c *Client) singlePost(ctx context.Context, post string, d digest.Digest, size int64, r *io.Reader) (string, error) {
	body := &countingReader{r: *r}
	small := size <= singlePostLimit
	if small {
		data, err := io.ReadAll(io.LimitReader(*r, size+1))
		if err != nil {
			return "", err
		}
		*r = bytes.NewReader(data)
		body, size = &countingReader{r: bytes.NewReader(data)}, int64(len(data))
	}
	resp, err := c.send(ctx, http.MethodPost, post+"?digest="+url.QueryEscape(d.String()), nil, body, size)
	if err != nil {
		return "", c.wrap(err)
	}
	switch resp.StatusCode {
	case http.StatusCreated:
		drain(resp)
		return "", nil
	case http.StatusAccepted:
		c.single.Store(-1)
		loc, err := uploadLocation(resp)
		drain(resp)
		if err != nil || small || body.n == 0 {
			return loc, err
		}
		return "", &Error{Method: http.MethodPost, URL: redact(resp.Request.URL), Status: resp.StatusCode, Retry: true,
			Body: fmt.Sprintf("the registry opened an upload session instead of storing blob %s from this request, after reading %d of its bytes: it is sent again in two requests (POST, then PUT)", d, body.n)}
	}
	return "", c.answer(resp, http.MethodPost)
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// PutManifest stores data (of media type mt) in repo under ref, a tag or
// a digest. The registry checks that everything it references is there.
func (c *Client) PutManifest(ctx context.Context, repo, ref, mt string, data []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, c.url("/v2/"+repo+"/manifests/"+ref), bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", mt)
	resp, err := c.http.Do(req)
	if err != nil {
		return c.wrap(err)
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusAccepted {
		return c.answer(resp, http.MethodPut)
	}
	drain(resp)
	return nil
}

// Blob opens blob d (size bytes) of repo. A transfer that breaks off is
// resumed from where it stopped with a range request (a few times); the
// caller verifies the content.
func (c *Client) Blob(ctx context.Context, repo string, d digest.Digest, size int64) (io.ReadCloser, error) {
	b := &blobReader{ctx: ctx, c: c, u: c.url("/v2/" + repo + "/blobs/" + d.String()), size: size}
	if err := b.open(); err != nil {
		return nil, err
	}
	return b, nil
}

type blobReader struct {
	ctx     context.Context
	c       *Client
	u       string
	size    int64
	n       int64
	body    io.ReadCloser
	resumes int
}

func (b *blobReader) open() error {
	var h http.Header
	if b.n > 0 {
		h = http.Header{"Range": {"bytes=" + strconv.FormatInt(b.n, 10) + "-"}}
	}
	resp, err := b.c.send(b.ctx, http.MethodGet, b.u, h, nil, 0)
	if err != nil {
		return b.c.wrap(err)
	}
	want := http.StatusOK
	if b.n > 0 {
		want = http.StatusPartialContent
	}
	if resp.StatusCode != want {
		if b.n > 0 && resp.StatusCode == http.StatusOK {
			drain(resp)
			return errors.New("the registry does not resume transfers (no range support)")
		}
		return b.c.answer(resp, http.MethodGet)
	}
	b.body = resp.Body
	return nil
}

func (b *blobReader) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	b.n += int64(n)
	if err == nil || err == io.EOF || b.ctx.Err() != nil || b.n >= b.size || b.resumes >= 3 {
		return n, err
	}
	// Broken off: go on from here.
	b.body.Close()
	b.resumes++
	if oerr := b.open(); oerr != nil {
		return n, errors.Join(err, oerr)
	}
	return n, nil
}

func (b *blobReader) Close() error { return b.body.Close() }
