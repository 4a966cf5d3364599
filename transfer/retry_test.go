package transfer

import (
	"bufio"
	"context"
	"net"
	"strings"
	"testing"

	"github.com/distribution/reference"
	"go.podman.io/image/v5/types"
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
	c := Classify(err)
	if c.Kind != CauseScheme || !c.Registry || !strings.Contains(c.Fix, "plain HTTP") || !strings.Contains(c.Fix, "--src-tls-verify=false") || strings.Contains(c.Fix, "certificate") {
		t.Errorf("%v\nclassified %+v; want %s (registry-level) with the plain-HTTP fix", err, c, CauseScheme)
	}
	if Transient(err) {
		t.Errorf("a plain-HTTP server is retried")
	}
}
