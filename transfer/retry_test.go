package transfer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/distribution/reference"
	"go.podman.io/image/v5/types"

	"github.com/gapmirror/gapmirror/failure"
	"github.com/gapmirror/gapmirror/registryapi"
)

// TestClassifyPlainHTTPToTLS: a plain-HTTP server that answers a TLS
// client with a page and no status line (as python3 -m http.server answers
// a request line it cannot parse), so that Go reports "first record does
// not look like a TLS handshake" rather than "server gave HTTP response to
// HTTPS client", is the plain-HTTP cause with its fix, not an untrusted
// certificate; and no retry is spent on it.
func TestClassifyPlainHTTPToTLS(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				// The first line of a TLS ClientHello is no HTTP request line:
				// http.server answers it in HTTP/0.9, the page alone.
				_, _ = bufio.NewReader(c).Peek(5)
				_, _ = c.Write([]byte("<!DOCTYPE HTML>\n<html lang=\"en\">\n<head><title>Error response</title></head>\n<body><h1>Error response</h1><p>Error code: 400</p><p>Message: Bad request version.</p></body>\n</html>\n"))
			}()
		}
	}()
	opts := testOptions(t)
	opts.TLSVerify = types.OptionalBoolTrue
	up := NewUpstream(opts)
	up.Retries = 3
	ref, err := reference.ParseNormalizedNamed(ln.Addr().String() + "/apps/app:v1")
	if err != nil {
		t.Fatal(err)
	}
	_, err = up.ResolveDigest(context.Background(), ref)
	if err == nil {
		t.Fatal("resolving a tag at a plain-HTTP server over TLS succeeded")
	}
	if !strings.Contains(err.Error(), "first record does not look like a TLS handshake") {
		t.Fatalf("not the error this test is about: %v", err)
	}
	c := failure.Classify(err)
	if c.Kind != failure.CauseScheme || !c.Registry || !strings.Contains(c.Fix, "plain HTTP") || !strings.Contains(c.Fix, "--src-tls-verify=false") || strings.Contains(c.Fix, "certificate") {
		t.Errorf("%v\nclassified %+v; want %s (registry-level) with the plain-HTTP fix", err, c, failure.CauseScheme)
	}
	if failure.Transient(err) {
		t.Errorf("a plain-HTTP server is retried")
	}
}

// TestClassify: each failure is classified once; permanent ones are not
// retried and registry-level ones are marked so.
func TestClassify(t *testing.T) {
	cases := []struct {
		msg       string
		kind      string
		registry  bool
		transient bool
	}{
		{`pinging container registry r:5000: Get "https://r:5000/v2/": http: server gave HTTP response to HTTPS client`, failure.CauseScheme, true, false},
		{`Get "https://r/v2/": tls: failed to verify certificate: x509: certificate signed by unknown authority`, failure.CauseTLS, true, false},
		{`dial tcp: lookup nowhere.invalid: no such host`, failure.CauseDNS, true, false},
		{`reading manifest v9 in r/apps/app: manifest unknown`, failure.CauseNotFound, false, false},
		{`unauthorized: authentication required`, failure.CauseAuth, true, false},
		{`requested access to the resource is denied`, failure.CauseDenied, false, false},
		{`dial tcp 127.0.0.1:1: connect: connection refused`, failure.CauseUnreachable, false, true},
		{`received unexpected HTTP status: 503 Service Unavailable`, failure.CauseTransient, false, true},
		{`net/http: TLS handshake timeout`, failure.CauseTransient, false, true},
	}
	for _, c := range cases {
		err := failure.Explain(errors.New(c.msg), "r/apps/app:v1")
		got := failure.Classify(err)
		if got.Kind != c.kind || got.Registry != c.registry || failure.Transient(err) != c.transient {
			t.Errorf("%q: %+v transient=%v; want %s registry=%v transient=%v", c.msg, got, failure.Transient(err), c.kind, c.registry, c.transient)
		}
	}
	// What the registry client marks worth retrying is retried, whatever the
	// status: an upload refused for a token that expired on its way, one
	// sent without the credentials a hidden repository wants.
	for _, e := range []*registryapi.Error{
		{Method: "PUT", URL: "https://r/v2/apps/app/blobs/uploads/1", Status: 401, Retry: true},
		{Method: "POST", URL: "https://r/v2/apps/app/blobs/uploads/", Status: 404, Codes: []string{"NAME_UNKNOWN"}, Retry: true},
	} {
		err := failure.Explain(fmt.Errorf("writing blob: %w", e), "r/apps/app:v1")
		if got := failure.Classify(err); got.Kind != failure.CauseTransient || got.Registry || !failure.Transient(err) {
			t.Errorf("%v: %+v, want transient", err, got)
		}
	}
	if got := failure.Classify(failure.Explain(&registryapi.Error{Method: "PUT", Status: 401}, "r/apps/app:v1")); got.Kind != failure.CauseAuth {
		t.Errorf("a 401 not marked Retry: %+v, want %s", got, failure.CauseAuth)
	}
	var calls int
	err := Retry(context.Background(), 5, time.Millisecond, func() error {
		calls++
		return failure.Explain(errors.New("http: server gave HTTP response to HTTPS client"), "r/x:v1")
	})
	if calls != 1 || err == nil {
		t.Errorf("a permanent failure was tried %d times", calls)
	}
}
