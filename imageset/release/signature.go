package release

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/gapmirror/gapmirror/backoff"
)

// Default release signature store and the environment variable that
// replaces it (OKD, or an internal copy of the store).
const (
	DefaultSignatureURL = "https://mirror.openshift.com/pub/openshift-v4/signatures/openshift/release"
	EnvSignatureURL     = "OCP_SIGNATURE_URL"
)

// MaxSignatures bounds how many signatures (signature-1 … signature-N) are
// read for one release.
const MaxSignatures = 16

// maxSignatureBytes bounds one signature (real ones are under 1 KiB).
const maxSignatureBytes = 1 << 20

// SignatureSource gives the GPG signatures of a release payload digest, in
// the store's order (index 0 is signature-1).
type SignatureSource interface {
	// Signatures returns every signature of digest; none is not an error.
	// When reading one fails, it returns the error and the signatures
	// read before it (signature-1 … signature-N-1).
	Signatures(ctx context.Context, digest string) ([][]byte, error)
	// Location says where the signatures of digest are looked up, for messages.
	Location(digest string) string
}

// SignatureStore reads release signatures over HTTP(S) from
// <URL>/sha256=<hex>/signature-<N>, N = 1, 2, … until the store answers
// 404 (or 403, which object stores give for missing objects). The zero value
// uses $OCP_SIGNATURE_URL, else DefaultSignatureURL.
type SignatureStore struct {
	// URL is the store's base URL; empty means $OCP_SIGNATURE_URL, else
	// DefaultSignatureURL.
	URL string
	// HTTPClient sends the requests; nil means a client with the system
	// trust store, proxy settings from the environment and a timeout.
	HTTPClient *http.Client
	// UserAgent is sent with every request when set.
	UserAgent string
	// Retries is how often a fetch that failed in a way that may pass (a
	// 5xx or 429 answer, a connection cut) is tried again, RetryDelay
	// apart at first and doubling up to 10 s; 0: not retried.
	Retries    int
	RetryDelay time.Duration
}

// BaseURL returns the store URL in use, without a trailing slash.
func (s *SignatureStore) BaseURL() string {
	base := s.URL
	if base == "" {
		base = strings.TrimSpace(os.Getenv(EnvSignatureURL))
	}
	if base == "" {
		base = DefaultSignatureURL
	}
	return strings.TrimRight(base, "/")
}

// Location returns the folder URL that holds the signatures of digest.
func (s *SignatureStore) Location(digest string) string {
	return s.BaseURL() + "/" + strings.Replace(digest, ":", "=", 1)
}

// Signatures fetches signature-1, signature-2, … of digest until the store
// has no more. A failed fetch ends the walk: its error comes back with the
// signatures fetched before it.
func (s *SignatureStore) Signatures(ctx context.Context, digest string) ([][]byte, error) {
	if !validDigest(digest) {
		return nil, fmt.Errorf("release digest %q is not sha256:<64 hex digits>", digest)
	}
	base := s.BaseURL()
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("signature store URL %q is not an http(s) URL: fix it or %s", base, EnvSignatureURL)
	}
	client := httpClient(s.HTTPClient)
	var out [][]byte
	for n := 1; n <= MaxSignatures; n++ {
		loc := fmt.Sprintf("%s/signature-%d", s.Location(digest), n)
		data, found, err := s.fetch(ctx, client, loc)
		if err != nil {
			return out, fmt.Errorf("fetching release signature %s: %w", loc, err)
		}
		if !found {
			break
		}
		out = append(out, data)
	}
	return out, nil
}

// fetch GETs one signature, trying again as Retries allows; found is
// false when the store has none there.
func (s *SignatureStore) fetch(ctx context.Context, client *http.Client, loc string) (data []byte, found bool, err error) {
	attempts := 0
	err = backoff.Policy{Retries: s.Retries, Delay: s.RetryDelay, Max: 10 * time.Second}.Do(ctx, func() (transient bool, err error) {
		attempts++
		data, found, transient, err = s.fetchOnce(ctx, client, loc)
		return transient, err
	})
	if err != nil {
		if attempts > 1 {
			err = fmt.Errorf("%w (after %d attempts)", err, attempts)
		}
		return nil, false, err
	}
	return data, found, nil
}

// fetchOnce GETs one signature; transient says whether a failure may pass.
func (s *SignatureStore) fetchOnce(ctx context.Context, client *http.Client, loc string) (data []byte, found, transient bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, loc, nil)
	if err != nil {
		return nil, false, false, err
	}
	if s.UserAgent != "" {
		req.Header.Set("User-Agent", s.UserAgent)
	}
	resp, err := client.Do(req)
	if err != nil {
		// A refused connection or an unknown host will not pass in seconds.
		var dns *net.DNSError
		transient := ctx.Err() == nil && !errors.Is(err, syscall.ECONNREFUSED) && !errors.As(err, &dns)
		return nil, false, transient, fmt.Errorf("%w; check the network and proxy settings (HTTPS_PROXY), or set %s to a reachable signature store", err, EnvSignatureURL)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound, http.StatusForbidden:
		return nil, false, false, nil
	default:
		transient := resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 && resp.StatusCode != http.StatusNotImplemented
		return nil, false, transient, fmt.Errorf("HTTP %s: %s; retry later, or set %s to another signature store", resp.Status, snippet(resp.Body), EnvSignatureURL)
	}
	data, err = io.ReadAll(io.LimitReader(resp.Body, maxSignatureBytes+1))
	if err != nil {
		return nil, false, ctx.Err() == nil, err
	}
	if len(data) > maxSignatureBytes {
		return nil, false, false, fmt.Errorf("signature is larger than %d KiB: the URL does not look like a signature store", maxSignatureBytes>>10)
	}
	return data, true, false, nil
}

// readBounded reads a file of at most limit bytes: a larger one is refused
// by its size before it is read, or once limit bytes are read when it has
// no size. It returns the error of os.Open as is.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if info, err := f.Stat(); err == nil && info.Mode().IsRegular() && info.Size() > limit {
		return nil, fmt.Errorf("the file is %d bytes, more than the %d it may be: gapmirror did not write it; remove it", info.Size(), limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("the file is more than the %d bytes it may be: gapmirror did not write it; remove it", limit)
	}
	return data, nil
}

// SignatureDir is a directory laid out like a signature store
// (<dir>/sha256=<hex>/signature-<N>), written by SaveSignatures; it lets
// later runs and the air-gapped side read signatures without the network.
type SignatureDir string

// Location returns the folder that holds the signatures of digest.
func (d SignatureDir) Location(digest string) string {
	return filepath.Join(string(d), strings.Replace(digest, ":", "=", 1))
}

// Signatures reads signature-1, signature-2, … of digest until one is missing.
func (d SignatureDir) Signatures(_ context.Context, digest string) ([][]byte, error) {
	if !validDigest(digest) {
		return nil, fmt.Errorf("release digest %q is not sha256:<64 hex digits>", digest)
	}
	var out [][]byte
	for n := 1; n <= MaxSignatures; n++ {
		path := filepath.Join(d.Location(digest), fmt.Sprintf("signature-%d", n))
		data, err := readBounded(path, maxSignatureBytes)
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil {
			return out, fmt.Errorf("reading release signature %s: %w", path, err)
		}
		out = append(out, data)
	}
	return out, nil
}

// SaveSignatures writes the signatures of digest into dir in the layout
// SignatureDir reads, replacing any saved before.
func SaveSignatures(dir, digest string, sigs [][]byte) error {
	if !validDigest(digest) {
		return fmt.Errorf("release digest %q is not sha256:<64 hex digits>", digest)
	}
	folder := SignatureDir(dir).Location(digest)
	if err := os.RemoveAll(folder); err != nil {
		return fmt.Errorf("saving release signatures in %s: %w", folder, err)
	}
	if err := os.MkdirAll(folder, 0o755); err != nil {
		return fmt.Errorf("saving release signatures in %s: %w", folder, err)
	}
	for i, sig := range sigs {
		path := filepath.Join(folder, fmt.Sprintf("signature-%d", i+1))
		if err := os.WriteFile(path, sig, 0o644); err != nil {
			return fmt.Errorf("saving release signature %s: %w", path, err)
		}
	}
	return nil
}
