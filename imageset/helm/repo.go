// Package helm reads helm chart repositories and charts and finds the
// container images a chart deploys by rendering it with its default values.
package helm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"

	"github.com/Masterminds/semver/v3"
	"sigs.k8s.io/yaml"
)

// maxIndexSize and maxChartSize bound what a repository may send, so a
// misconfigured URL (a file server's huge file) fails instead of filling memory.
const (
	maxIndexSize = 256 << 20
	maxChartSize = 64 << 20
)

// Index is the part of a chart repository's index.yaml gapmirror reads.
type Index struct {
	Entries map[string][]ChartVersion `json:"entries"`
}

// ChartVersion is one chart version listed in a repository index.
type ChartVersion struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Type is "library" for charts that deploy nothing on their own.
	Type string `json:"type,omitempty"`
	// Digest is the sha256 of the chart archive, hex (helm's form) or sha256:hex.
	Digest string   `json:"digest,omitempty"`
	URLs   []string `json:"urls"`
}

// parseIndex reads an index.yaml.
func parseIndex(data []byte) (*Index, error) {
	var ix Index
	if err := yaml.Unmarshal(data, &ix); err != nil {
		return nil, fmt.Errorf("not a chart repository index: %w", err)
	}
	if ix.Entries == nil {
		return nil, fmt.Errorf("not a chart repository index: it has no entries")
	}
	return &ix, nil
}

// Version finds one version of a chart; an empty version means the latest
// stable one (helm's choice: the highest semantic version that is not a
// pre-release).
func (ix *Index) Version(name, version string) (ChartVersion, error) {
	list, ok := ix.Entries[name]
	if !ok || len(list) == 0 {
		return ChartVersion{}, fmt.Errorf("chart %q is not in the repository index (it has %s)", name, ix.names())
	}
	if version != "" {
		for _, cv := range list {
			if cv.Version == version || strings.TrimPrefix(cv.Version, "v") == strings.TrimPrefix(version, "v") {
				return cv, nil
			}
		}
		return ChartVersion{}, fmt.Errorf("chart %q has no version %q in the repository index (it has %s)", name, version, versions(list))
	}
	var best ChartVersion
	var bestV *semver.Version
	for _, cv := range list {
		v, err := semver.NewVersion(cv.Version)
		if err != nil || v.Prerelease() != "" {
			continue
		}
		if bestV == nil || v.GreaterThan(bestV) {
			best, bestV = cv, v
		}
	}
	if bestV == nil {
		return ChartVersion{}, fmt.Errorf("chart %q has no stable semantic version in the repository index (it has %s): set charts[].version", name, versions(list))
	}
	return best, nil
}

// All returns every version of every chart that is not a library chart,
// ordered by name and version.
func (ix *Index) All() []ChartVersion {
	var out []ChartVersion
	for name, list := range ix.Entries {
		for _, cv := range list {
			if cv.Type == "library" {
				continue
			}
			if cv.Name == "" {
				cv.Name = name
			}
			out = append(out, cv)
		}
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].Name != out[b].Name {
			return out[a].Name < out[b].Name
		}
		return out[a].Version < out[b].Version
	})
	return out
}

func (ix *Index) names() string {
	return ShortList(slices.Sorted(maps.Keys(ix.Entries)))
}

func versions(list []ChartVersion) string {
	var vs []string
	for _, cv := range list {
		vs = append(vs, cv.Version)
	}
	return ShortList(vs)
}

// ShortList lists the first few names for messages.
func ShortList(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	if len(list) > 8 {
		return strings.Join(list[:8], ", ") + fmt.Sprintf(" and %d more", len(list)-8)
	}
	return strings.Join(list, ", ")
}

// Repository is a chart repository served over HTTP(S).
type Repository struct {
	// URL is the repository root; index.yaml is under it.
	URL    string
	Client *http.Client
}

// Redacted is the repository URL without credentials, for messages.
func (r Repository) Redacted() string {
	u, err := url.Parse(r.URL)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// Index downloads and parses the repository's index.yaml.
func (r Repository) Index(ctx context.Context) (*Index, []byte, error) {
	loc, err := r.resolve("index.yaml")
	if err != nil {
		return nil, nil, err
	}
	data, err := r.get(ctx, loc, maxIndexSize)
	if err != nil {
		return nil, nil, err
	}
	ix, err := parseIndex(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", redact(loc), err)
	}
	return ix, data, nil
}

// Download fetches a chart archive and checks it against the digest the
// index gives, when it gives one.
func (r Repository) Download(ctx context.Context, cv ChartVersion) ([]byte, error) {
	if len(cv.URLs) == 0 {
		return nil, fmt.Errorf("the repository index lists no URL for chart %s %s", cv.Name, cv.Version)
	}
	loc, err := r.resolve(cv.URLs[0])
	if err != nil {
		return nil, err
	}
	data, err := r.get(ctx, loc, maxChartSize)
	if err != nil {
		return nil, err
	}
	if err := CheckDigest(data, cv.Digest); err != nil {
		return nil, fmt.Errorf("%s: %w: the repository index and the chart disagree; ask the repository owner to reindex it", redact(loc), err)
	}
	return data, nil
}

// CheckDigest compares data with an index digest (hex or sha256:hex); an
// empty want checks nothing.
func CheckDigest(data []byte, want string) error {
	if want == "" {
		return nil
	}
	if got := Digest(data); strings.TrimPrefix(want, "sha256:") != strings.TrimPrefix(got, "sha256:") {
		return fmt.Errorf("downloaded chart has digest %s, the index says %s", got, want)
	}
	return nil
}

// Digest is the sha256:hex digest of a chart archive.
func Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// resolve turns a URL of the index (absolute or relative to the repository) into an absolute one.
func (r Repository) resolve(ref string) (string, error) {
	base, err := url.Parse(strings.TrimSuffix(r.URL, "/") + "/")
	if err != nil {
		return "", fmt.Errorf("repository URL %s: %w", r.Redacted(), err)
	}
	u, err := url.Parse(ref)
	if err != nil {
		return "", fmt.Errorf("chart URL %q in the index of %s: %w", ref, r.Redacted(), err)
	}
	abs := base.ResolveReference(u)
	// Credentials in the repository URL also serve the charts it lists on the same host.
	if abs.User == nil && base.User != nil && abs.Host == base.Host {
		abs.User = base.User
	}
	return abs.String(), nil
}

func (r Repository) get(ctx context.Context, loc string, limit int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, loc, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", redact(loc), err)
	}
	if u := req.URL.User; u != nil {
		pw, _ := u.Password()
		req.SetBasicAuth(u.Username(), pw)
		req.URL.User = nil
	}
	client := r.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		// The transport's error repeats the URL: strip credentials from it.
		return nil, fmt.Errorf("cannot reach chart repository: %s", redactIn(err.Error(), loc))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", redact(loc), resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", redact(loc), err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("GET %s: larger than %d MiB, which is not a chart repository file", redact(loc), limit>>20)
	}
	return data, nil
}

func redact(loc string) string {
	u, err := url.Parse(loc)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// redactIn replaces the password of loc wherever it appears in msg.
func redactIn(msg, loc string) string {
	u, err := url.Parse(loc)
	if err != nil || u.User == nil {
		return msg
	}
	if pw, ok := u.User.Password(); ok && pw != "" {
		msg = strings.ReplaceAll(msg, pw, "xxxxx")
		msg = strings.ReplaceAll(msg, url.QueryEscape(pw), "xxxxx")
	}
	return msg
}
