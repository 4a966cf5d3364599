package release

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Default update service addresses and the environment variable that
// replaces the OpenShift one (used by enclaves that run their own OSUS).
const (
	DefaultOCPGraphURL   = "https://api.openshift.com/api/upgrades_info/v1/graph"
	DefaultOKDGraphURL   = "https://origin-release.ci.openshift.org/graph"
	EnvUpdateURLOverride = "UPDATE_URL_OVERRIDE"
)

// maxGraphBytes bounds an update graph response (real ones are a few MiB).
const maxGraphBytes = 64 << 20

// defaultHTTPTimeout bounds one request when no client is injected.
const defaultHTTPTimeout = 2 * time.Minute

// ErrNoReleases says a channel has no releases for an architecture (unknown
// channel, wrong architecture, or a channel that does not exist yet).
var ErrNoReleases = errors.New("no releases")

// ErrGraphNotSaved says an update graph was never saved in a graph directory.
var ErrGraphNotSaved = errors.New("update graph not saved")

// ChannelType says which update service a channel belongs to.
type ChannelType string

// Channel types of mirror.platform.channels[].type.
const (
	TypeOCP ChannelType = "ocp"
	TypeOKD ChannelType = "okd"
)

// GraphKey names one update graph: a channel of one product for one
// architecture.
type GraphKey struct {
	// Channel is the channel name, e.g. stable-4.18.
	Channel string
	// Type picks the update service (ocp or okd).
	Type ChannelType
	// Arch is the graph architecture (amd64, arm64, ppc64le, s390x, multi).
	Arch string
}

// String renders the key for messages, e.g. "stable-4.18 (arch amd64)".
func (k GraphKey) String() string {
	return fmt.Sprintf("%s (arch %s)", k.Channel, k.Arch)
}

// GraphSource gives the update graph of one channel for one architecture.
type GraphSource interface {
	Graph(ctx context.Context, key GraphKey) (*Graph, error)
}

// GraphClient fetches update graphs from the OpenShift Update Service
// (Cincinnati) over HTTPS. The zero value is ready to use.
type GraphClient struct {
	// HTTPClient sends the requests; nil means a client with the system
	// trust store, proxy settings from the environment and a 2 minute timeout.
	HTTPClient *http.Client
	// OCPURL replaces the OpenShift graph URL; empty means
	// $UPDATE_URL_OVERRIDE, else DefaultOCPGraphURL.
	OCPURL string
	// OKDURL replaces the OKD graph URL; empty means DefaultOKDGraphURL.
	OKDURL string
	// UserAgent is sent with every request when set.
	UserAgent string
}

// URL returns the graph endpoint used for channels of type t.
func (c *GraphClient) URL(t ChannelType) string {
	if t == TypeOKD {
		if c.OKDURL != "" {
			return c.OKDURL
		}
		return DefaultOKDGraphURL
	}
	if c.OCPURL != "" {
		return c.OCPURL
	}
	if env := strings.TrimSpace(os.Getenv(EnvUpdateURLOverride)); env != "" {
		return env
	}
	return DefaultOCPGraphURL
}

// Graph fetches the update graph of key.Channel for key.Arch. An unknown
// channel yields either an empty graph (what the update service usually
// answers) or an error wrapping ErrNoReleases (HTTP 404).
func (c *GraphClient) Graph(ctx context.Context, key GraphKey) (*Graph, error) {
	base := c.URL(key.Type)
	u, err := url.Parse(base)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("update service URL %q is not an absolute URL: fix --graph-url or %s", base, EnvUpdateURLOverride)
	}
	q := u.Query()
	q.Set("channel", key.Channel)
	q.Set("arch", key.Arch)
	u.RawQuery = q.Encode()
	where := fmt.Sprintf("channel %s (arch %s) from %s", key.Channel, key.Arch, base)

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("fetching update graph of %s: %w", where, err)
	}
	req.Header.Set("Accept", "application/json")
	if c.UserAgent != "" {
		req.Header.Set("User-Agent", c.UserAgent)
	}
	resp, err := httpClient(c.HTTPClient).Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching update graph of %s: %w; check the network and proxy settings (HTTPS_PROXY), or point %s at a reachable update service", where, err, EnvUpdateURLOverride)
	}
	defer resp.Body.Close()

	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, fmt.Errorf("channel %s has no releases for arch %s: the update service at %s answered %s; check the channel name (e.g. stable-4.18) and the architecture: %w",
			key.Channel, key.Arch, base, resp.Status, ErrNoReleases)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("fetching update graph of %s: HTTP %s: %s; retry later, or point %s at a reachable update service",
			where, resp.Status, snippet(resp.Body), EnvUpdateURLOverride)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxGraphBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading update graph of %s: %w", where, err)
	}
	if len(data) > maxGraphBytes {
		return nil, fmt.Errorf("update graph of %s is larger than %d MiB: the URL does not look like an update service", where, maxGraphBytes>>20)
	}
	if !json.Valid(data) {
		return nil, fmt.Errorf("update service answered for %s with something that is not JSON (Content-Type %q): %s; check that the URL is an update graph endpoint",
			where, resp.Header.Get("Content-Type"), snippet(strings.NewReader(string(data))))
	}
	return ParseGraph(data, key.Channel, key.Arch)
}

// httpClient returns c, or the default client when c is nil.
func httpClient(c *http.Client) *http.Client {
	if c != nil {
		return c
	}
	return &http.Client{Timeout: defaultHTTPTimeout}
}

// snippet returns the start of a response body, on one line, for messages.
func snippet(r io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(r, 300))
	s := strings.Join(strings.Fields(string(b)), " ")
	if s == "" {
		return "(empty body)"
	}
	return s
}

// GraphFileName is the file name a saved graph has in a graph directory:
// <arch>-<channel>.json, as oc-mirror writes them.
func GraphFileName(channel, arch string) string {
	return arch + "-" + channel + ".json"
}

// checkFileSafe refuses channel and arch names that would escape a directory.
func checkFileSafe(channel, arch string) error {
	for _, s := range []string{channel, arch} {
		if s == "" || strings.ContainsAny(s, `/\`) || strings.Contains(s, "..") {
			return fmt.Errorf("channel %q / arch %q cannot name a graph file: use names like stable-4.18 and amd64", channel, arch)
		}
	}
	return nil
}

// SaveGraph writes g's JSON (Raw when set) to dir/<arch>-<channel>.json,
// atomically, creating dir if needed.
func SaveGraph(dir string, g *Graph) error {
	if err := checkFileSafe(g.Channel, g.Arch); err != nil {
		return err
	}
	data := g.Raw
	if len(data) == 0 {
		var err error
		if data, err = json.Marshal(g); err != nil {
			return fmt.Errorf("encoding update graph of %s (arch %s): %w", g.Channel, g.Arch, err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("saving update graph of %s (arch %s): %w", g.Channel, g.Arch, err)
	}
	path := filepath.Join(dir, GraphFileName(g.Channel, g.Arch))
	tmp, err := os.CreateTemp(dir, ".graph-*")
	if err != nil {
		return fmt.Errorf("saving update graph to %s: %w", path, err)
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("saving update graph to %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("saving update graph to %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("saving update graph to %s: %w", path, err)
	}
	return nil
}

// LoadGraph reads a graph saved by SaveGraph. A graph that was never saved
// gives an error wrapping ErrGraphNotSaved.
func LoadGraph(dir, channel, arch string) (*Graph, error) {
	if err := checkFileSafe(channel, arch); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, GraphFileName(channel, arch))
	data, err := readBounded(path, maxGraphBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no saved update graph for channel %s (arch %s): %s does not exist; run mirror-to-disk with this channel first so the archive carries it: %w",
			channel, arch, path, ErrGraphNotSaved)
	}
	if err != nil {
		return nil, fmt.Errorf("reading saved update graph %s: %w", path, err)
	}
	g, err := ParseGraph(data, channel, arch)
	if err != nil {
		return nil, fmt.Errorf("saved update graph %s: %w", path, err)
	}
	return g, nil
}

// GraphDir is a directory of graphs saved by SaveGraph, used as a source
// where the update service cannot be reached (disk-to-mirror, delete).
type GraphDir string

// Graph loads the saved graph of key.
func (d GraphDir) Graph(_ context.Context, key GraphKey) (*Graph, error) {
	return LoadGraph(string(d), key.Channel, key.Arch)
}

// SavingGraphSource fetches graphs from Source and saves each one in Dir, so
// that later runs can read them with GraphDir.
type SavingGraphSource struct {
	Source GraphSource
	Dir    string
}

// Graph fetches the graph of key and saves it.
func (s SavingGraphSource) Graph(ctx context.Context, key GraphKey) (*Graph, error) {
	g, err := s.Source.Graph(ctx, key)
	if err != nil {
		return nil, err
	}
	if g.Channel == "" {
		g.Channel = key.Channel
	}
	if g.Arch == "" {
		g.Arch = key.Arch
	}
	if err := SaveGraph(s.Dir, g); err != nil {
		return nil, err
	}
	return g, nil
}
