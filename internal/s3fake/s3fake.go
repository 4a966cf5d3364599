// Package s3fake is test and benchmark support: an S3-compatible object
// store (github.com/johannesboyne/gofakes3, in memory) on 127.0.0.1 that,
// unlike gofakes3 alone, checks the AWS Signature Version 4 of every
// request against the one key pair it knows, answering 403
// InvalidAccessKeyId or SignatureDoesNotMatch as S3 does; and a Redis
// server (github.com/alicebob/miniredis/v2) for distribution's
// blob-descriptor cache. Nothing here reaches the network beyond loopback.
package s3fake

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/alicebob/miniredis/v2"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// Region is the region the store signs for.
const Region = "us-east-1"

// Server is a running S3-compatible store.
type Server struct {
	// Endpoint is http://127.0.0.1:PORT, distribution's regionendpoint.
	Endpoint string
	// AccessKey and SecretKey are the only credentials it accepts.
	AccessKey, SecretKey string
	backend              *s3mem.Backend
	srv                  *http.Server
	ln                   net.Listener
	// Requests counts the requests served, Refused those refused for their credentials.
	Requests, Refused atomic.Int64
}

// Start serves an empty store with the given buckets on a free port of
// 127.0.0.1; Close stops it.
func Start(buckets ...string) (*Server, error) {
	backend := s3mem.New()
	for _, b := range buckets {
		if err := backend.CreateBucket(b); err != nil {
			return nil, fmt.Errorf("creating bucket %s: %w", b, err)
		}
	}
	faker := gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog()))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{Endpoint: "http://" + ln.Addr().String(), AccessKey: "GAPMIRRORTESTKEY", SecretKey: "gapmirror-test-secret-key", backend: backend, ln: ln}
	inner := faker.Server()
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.Requests.Add(1)
		if code, msg := s.checkSignature(r); code != "" {
			s.Refused.Add(1)
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message></Error>`, code, msg)
			return
		}
		inner.ServeHTTP(w, r)
	})}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Close stops the store.
func (s *Server) Close() { _ = s.srv.Close() }

// Objects lists the keys under prefix in bucket.
func (s *Server) Objects(bucket, prefix string) ([]string, error) {
	res, err := s.backend.ListBucket(bucket, &gofakes3.Prefix{HasPrefix: true, Prefix: prefix}, gofakes3.ListBucketPage{})
	if err != nil {
		return nil, err
	}
	var keys []string
	for _, c := range res.Contents {
		keys = append(keys, c.Key)
	}
	return keys, nil
}

// checkSignature verifies r's AWS SigV4 Authorization header: an S3 error
// code and message when it is missing, names another key, or its signature
// is not the one the secret key makes.
func (s *Server) checkSignature(r *http.Request) (code, message string) {
	auth := r.Header.Get("Authorization")
	rest, ok := strings.CutPrefix(auth, "AWS4-HMAC-SHA256 ")
	if !ok {
		return "AccessDenied", "Access Denied: the request is not signed with AWS Signature Version 4"
	}
	fields := map[string]string{}
	for _, f := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(f), "=")
		fields[k] = v
	}
	cred := strings.Split(fields["Credential"], "/")
	if len(cred) != 5 {
		return "AuthorizationHeaderMalformed", "malformed Credential"
	}
	if cred[0] != s.AccessKey {
		return "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records."
	}
	signed := strings.Split(fields["SignedHeaders"], ";")
	var canonHeaders strings.Builder
	for _, h := range signed {
		var v string
		switch h {
		case "host":
			v = r.Host
		case "content-length":
			v = fmt.Sprint(r.ContentLength)
		default:
			vals := r.Header.Values(h)
			for i := range vals {
				vals[i] = strings.Join(strings.Fields(vals[i]), " ")
			}
			v = strings.Join(vals, ",")
		}
		canonHeaders.WriteString(h + ":" + v + "\n")
	}
	path, _, _ := strings.Cut(r.RequestURI, "?")
	// url.Values.Encode sorts by key, as the canonical query wants.
	canonQuery := strings.ReplaceAll(r.URL.Query().Encode(), "+", "%20")
	payload := r.Header.Get("X-Amz-Content-Sha256")
	if payload == "" {
		payload = "UNSIGNED-PAYLOAD"
	}
	canonical := strings.Join([]string{r.Method, path, canonQuery, canonHeaders.String(), fields["SignedHeaders"], payload}, "\n")
	amzDate := r.Header.Get("X-Amz-Date")
	scope := strings.Join(cred[1:], "/")
	sum := sha256.Sum256([]byte(canonical))
	toSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(sum[:])
	key := []byte("AWS4" + s.SecretKey)
	for _, part := range cred[1:] {
		key = hmacSHA256(key, part)
	}
	if want := hex.EncodeToString(hmacSHA256(key, toSign)); !hmac.Equal([]byte(want), []byte(fields["Signature"])) {
		return "SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided. Check your key and signing method."
	}
	return "", ""
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// Redis is a Redis server on 127.0.0.1.
type Redis struct {
	*miniredis.Miniredis
}

// StartRedis serves an empty Redis on a free port of 127.0.0.1; Close stops it.
func StartRedis() (*Redis, error) {
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, err
	}
	return &Redis{m}, nil
}
