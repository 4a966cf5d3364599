package releasetest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"

	"github.com/gapmirror/gapmirror/internal/imagebuilder"
)

// Services are what the connected side of a release mirror talks to besides
// registries, on one HTTP server on 127.0.0.1: the update service's graph
// endpoint (/graph), the signature store (/signatures/) and the
// cincinnati-graph-data tarball (/graph-data).
type Services struct {
	Graphs     *GraphServer
	Signatures *SignatureServer
	server     *httptest.Server
}

// StartServices starts the services; graphData is the tarball /graph-data
// serves (see GraphDataTarball). Close stops them.
func StartServices(graphData []byte) *Services {
	s := &Services{Graphs: NewGraphServer(), Signatures: NewSignatureServer()}
	mux := http.NewServeMux()
	mux.Handle("/graph", s.Graphs)
	mux.Handle("/signatures/", s.Signatures)
	mux.HandleFunc("/graph-data", func(rw http.ResponseWriter, _ *http.Request) { _, _ = rw.Write(graphData) })
	s.server = httptest.NewServer(mux)
	return s
}

// URL is the server's base URL, http://127.0.0.1:PORT.
func (s *Services) URL() string { return s.server.URL }

// GraphURL is the update graph endpoint (--graph-url, UPDATE_URL_OVERRIDE).
func (s *Services) GraphURL() string { return s.server.URL + "/graph" }

// SignatureURL is the signature store (--release-signature-url, OCP_SIGNATURE_URL).
func (s *Services) SignatureURL() string { return s.server.URL + "/signatures" }

// GraphDataURL is the graph data tarball (--graph-data-url).
func (s *Services) GraphDataURL() string { return s.server.URL + "/graph-data" }

// Close stops the server.
func (s *Services) Close() { s.server.Close() }

// Channel is a channel of published, signed release payloads.
type Channel struct {
	// Payloads are the pushed payloads by version.
	Payloads map[string]*Payload
	// Signatures are the signatures the store serves, by version.
	Signatures map[string][]byte
	// Versions are the published versions, oldest first.
	Versions []string

	s      *Services
	target imagebuilder.Target
	key    *Key
	name   string
	spec   PayloadSpec
}

// PublishChannel generates one payload per version from spec (its Version
// and Previous are filled in: each release names the earlier ones),
// pushes it to t, signs it with key, puts the signature in the store and
// serves the versions as channel with generated edges.
func (s *Services) PublishChannel(ctx context.Context, t imagebuilder.Target, key *Key, channel string, spec PayloadSpec, versions ...string) (*Channel, error) {
	if spec.Arch == "" {
		spec.Arch = "amd64"
	}
	c := &Channel{Payloads: map[string]*Payload{}, Signatures: map[string][]byte{}, s: s, target: t, key: key, name: channel, spec: spec}
	return c, c.Add(ctx, versions...)
}

// Add publishes more versions after the earlier ones, as upstream ships
// releases: each is pushed and signed, and the channel is served again
// with all of them.
func (c *Channel) Add(ctx context.Context, versions ...string) error {
	for _, v := range versions {
		spec := c.spec
		spec.Version, spec.Previous = v, slices.Clone(c.Versions)
		p, err := NewPayload(spec)
		if err != nil {
			return err
		}
		if err := p.Push(ctx, c.target); err != nil {
			return err
		}
		sig, err := c.key.SignRelease(p.Digest.String(), p.Ref())
		if err != nil {
			return err
		}
		c.s.Signatures.Put(p.Digest.String(), sig)
		c.Payloads[v], c.Signatures[v] = p, sig
		c.Versions = append(c.Versions, v)
	}
	g := NewGraph(c.spec.Arch, c.Versions...)
	for _, v := range c.Versions {
		g.SetPayload(v, c.Payloads[v].PullSpec())
	}
	return c.s.Graphs.Put(c.name, g.GenerateEdges())
}

// GraphDataTarball is a small cincinnati-graph-data tarball: a version file
// and channels/<name>.yaml listing each channel's versions.
func GraphDataTarball(channels map[string][]string) ([]byte, error) {
	files := map[string]string{"version": "1.0.0\n"}
	for name, versions := range channels {
		files["channels/"+name+".yaml"] = fmt.Sprintf("name: %s\nversions:\n- %s\n", name, strings.Join(versions, "\n- "))
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names) // the same channels give the same bytes
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, name := range names {
		body := files[name]
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg, ModTime: keyTime}); err != nil {
			return nil, err
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
