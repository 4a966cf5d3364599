package registrytest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opencontainers/go-digest"
)

// Fault injectors are handler wrappers for Options.Wrap / SetWrap. They are
// safe for concurrent requests. Chain combines several.

// Chain combines handler wrappers; the first one sees requests first.
func Chain(wraps ...func(http.Handler) http.Handler) func(http.Handler) http.Handler {
	return func(h http.Handler) http.Handler {
		for i := len(wraps) - 1; i >= 0; i-- {
			if wraps[i] != nil {
				h = wraps[i](h)
			}
		}
		return h
	}
}

// BlobPath splits a /v2/<repo>/blobs/<digest> request path; ok is false for
// any other path (uploads included).
func BlobPath(path string) (repo string, d digest.Digest, ok bool) {
	rest, found := strings.CutPrefix(path, "/v2/")
	if !found {
		return "", "", false
	}
	i := strings.LastIndex(rest, "/blobs/")
	if i <= 0 {
		return "", "", false
	}
	d, err := digest.Parse(rest[i+len("/blobs/"):])
	if err != nil {
		return "", "", false
	}
	return rest[:i], d, true
}

// MatchBlobGet matches GET requests for blob content.
func MatchBlobGet(r *http.Request) bool {
	_, _, ok := BlobPath(r.URL.Path)
	return ok && r.Method == http.MethodGet
}

// MatchBlobUpload matches the request that completes a blob upload: the PUT
// closing an upload session, or a POST carrying the whole blob (both name
// the blob's digest).
func MatchBlobUpload(r *http.Request) bool {
	return (r.Method == http.MethodPut || r.Method == http.MethodPost) && strings.Contains(r.URL.Path, "/blobs/uploads/") && r.URL.Query().Get("digest") != ""
}

// matchReads matches GET and HEAD requests (pulls), leaving pushes alone.
func matchReads(r *http.Request) bool {
	return r.Method == http.MethodGet || r.Method == http.MethodHead
}

// errInjected stops the registry's copy into a response writer that must not
// take more bytes.
var errInjected = errors.New("registrytest: injected fault")

// BlobTruncator cuts blob GET response bodies after a number of bytes and
// drops the connection, the first few times each blob is fetched, then serves
// it normally: a dropped connection in the middle of a transfer.
type BlobTruncator struct {
	after int64
	times int

	mu   sync.Mutex
	cuts map[digest.Digest]int
	all  atomic.Int64
}

// NewBlobTruncator cuts the body of each blob after afterBytes bytes (negative
// counts as 0) on its first times fetches; times <= 0 cuts every fetch.
// Bodies no longer than afterBytes are served whole and not counted.
func NewBlobTruncator(afterBytes int64, times int) *BlobTruncator {
	return &BlobTruncator{after: max(afterBytes, 0), times: times, cuts: map[digest.Digest]int{}}
}

// Cuts is how many responses were cut so far.
func (t *BlobTruncator) Cuts() int64 { return t.all.Load() }

// CutsOf is how many responses for blob d were cut so far.
func (t *BlobTruncator) CutsOf(d digest.Digest) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cuts[d]
}

// reserve claims one cut of d, or reports that d is served normally now.
func (t *BlobTruncator) reserve(d digest.Digest) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.times > 0 && t.cuts[d] >= t.times {
		return false
	}
	t.cuts[d]++
	return true
}

// release gives back a claim that did not cut anything.
func (t *BlobTruncator) release(d digest.Digest) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cuts[d]--
}

// Wrap is the handler wrapper.
func (t *BlobTruncator) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, d, ok := BlobPath(r.URL.Path)
		if !ok || r.Method != http.MethodGet || !t.reserve(d) {
			next.ServeHTTP(w, r)
			return
		}
		cw := &cutWriter{ResponseWriter: w, left: t.after}
		next.ServeHTTP(cw, r)
		if !cw.cut {
			t.release(d)
			return
		}
		t.all.Add(1)
		_ = http.NewResponseController(w).Flush()
		// Drop the connection: the client has the headers and part of the body.
		panic(http.ErrAbortHandler)
	})
}

// cutWriter passes at most left body bytes of a successful response.
type cutWriter struct {
	http.ResponseWriter
	left    int64
	status  int
	cut     bool
	started bool
}

func (c *cutWriter) WriteHeader(status int) {
	if !c.started {
		c.started, c.status = true, status
	}
	c.ResponseWriter.WriteHeader(status)
}

func (c *cutWriter) Write(p []byte) (int, error) {
	if !c.started {
		c.started, c.status = true, http.StatusOK
	}
	if c.status/100 != 2 {
		return c.ResponseWriter.Write(p)
	}
	if int64(len(p)) <= c.left {
		n, err := c.ResponseWriter.Write(p)
		c.left -= int64(n)
		return n, err
	}
	n, err := c.ResponseWriter.Write(p[:c.left])
	c.left -= int64(n)
	c.cut = true
	if err != nil {
		return n, err
	}
	return n, errInjected
}

func (c *cutWriter) Flush() { _ = http.NewResponseController(c.ResponseWriter).Flush() }

// Unwrap lets http.ResponseController reach the server's writer.
func (c *cutWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// BlobCorrupter serves bytes that do not match the digest for chosen blobs:
// the first byte of the body is flipped, the length is unchanged.
type BlobCorrupter struct {
	times int

	mu      sync.Mutex
	targets map[digest.Digest]int // corruptions so far per chosen blob
	all     atomic.Int64
}

// NewBlobCorrupter corrupts the given blobs on their first times fetches;
// times <= 0 corrupts every fetch.
func NewBlobCorrupter(times int, digests ...digest.Digest) *BlobCorrupter {
	targets := make(map[digest.Digest]int, len(digests))
	for _, d := range digests {
		targets[d] = 0
	}
	return &BlobCorrupter{times: times, targets: targets}
}

// Corrupted is how many responses were corrupted so far.
func (c *BlobCorrupter) Corrupted() int64 { return c.all.Load() }

func (c *BlobCorrupter) reserve(d digest.Digest) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, chosen := c.targets[d]
	if !chosen || (c.times > 0 && n >= c.times) {
		return false
	}
	c.targets[d] = n + 1
	return true
}

func (c *BlobCorrupter) release(d digest.Digest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.targets[d]--
}

// Wrap is the handler wrapper.
func (c *BlobCorrupter) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, d, ok := BlobPath(r.URL.Path)
		if !ok || r.Method != http.MethodGet || !c.reserve(d) {
			next.ServeHTTP(w, r)
			return
		}
		fw := &flipWriter{ResponseWriter: w}
		next.ServeHTTP(fw, r)
		if fw.flipped {
			c.all.Add(1)
		} else {
			c.release(d)
		}
	})
}

// flipWriter flips the first body byte of a successful response.
type flipWriter struct {
	http.ResponseWriter
	status  int
	started bool
	flipped bool
}

func (f *flipWriter) WriteHeader(status int) {
	if !f.started {
		f.started, f.status = true, status
	}
	f.ResponseWriter.WriteHeader(status)
}

func (f *flipWriter) Write(p []byte) (int, error) {
	if !f.started {
		f.started, f.status = true, http.StatusOK
	}
	if f.flipped || len(p) == 0 || f.status/100 != 2 {
		return f.ResponseWriter.Write(p)
	}
	q := make([]byte, len(p))
	copy(q, p)
	q[0] ^= 0xff
	f.flipped = true
	return f.ResponseWriter.Write(q)
}

func (f *flipWriter) Flush() { _ = http.NewResponseController(f.ResponseWriter).Flush() }

// Unwrap lets http.ResponseController reach the server's writer.
func (f *flipWriter) Unwrap() http.ResponseWriter { return f.ResponseWriter }

// Fault is a kind of failure FaultInjector produces.
type Fault int

// Kinds of injected failures.
const (
	// FaultServerError answers FaultConfig.Status (default 503) with a registry error body.
	FaultServerError Fault = iota
	// FaultTooManyRequests answers 429 with a Retry-After header.
	FaultTooManyRequests
	// FaultReset closes the connection without an answer (TCP reset where possible).
	FaultReset
	// FaultResetMidBody drops the connection half-way through a body: the
	// answer's, after its headers and half of it (GET), or the request's,
	// after half of it is read (uploads).
	FaultResetMidBody
)

// String names the fault.
func (f Fault) String() string {
	switch f {
	case FaultServerError:
		return "server-error"
	case FaultTooManyRequests:
		return "too-many-requests"
	case FaultReset:
		return "connection-reset"
	case FaultResetMidBody:
		return "connection-reset-mid-body"
	default:
		return "fault(" + strconv.Itoa(int(f)) + ")"
	}
}

// FaultConfig configures a FaultInjector.
type FaultConfig struct {
	// Rate is the probability, 0 to 1, that a matching request fails.
	Rate float64
	// Seed seeds the injector's PRNG: the sequence of decisions is the same on
	// every run (which request gets which decision depends on arrival order).
	Seed uint64
	// Faults are the kinds to inject, picked uniformly; empty means all kinds.
	Faults []Fault
	// Status is the status of FaultServerError, 500 to 599; 0 means 503.
	Status int
	// RetryAfterSeconds is the Retry-After value sent with 429 answers.
	RetryAfterSeconds int
	// Match selects the requests that may fail; nil means every request.
	Match func(*http.Request) bool
	// Limit caps the number of injected faults; 0 means no cap.
	Limit int
}

// FaultInjector fails a seeded-random share of requests with 5xx answers,
// 429 answers or connection resets, and counts what it injected.
type FaultInjector struct {
	cfg FaultConfig

	mu  sync.Mutex
	rng *rand.Rand

	total  atomic.Int64
	byKind [FaultResetMidBody + 1]atomic.Int64
}

// NewFaultInjector checks cfg and returns an injector.
func NewFaultInjector(cfg FaultConfig) (*FaultInjector, error) {
	if cfg.Rate < 0 || cfg.Rate > 1 {
		return nil, fmt.Errorf("registrytest: FaultConfig.Rate is %v: must be between 0 and 1", cfg.Rate)
	}
	if cfg.Status == 0 {
		cfg.Status = http.StatusServiceUnavailable
	}
	if cfg.Status < 500 || cfg.Status > 599 {
		return nil, fmt.Errorf("registrytest: FaultConfig.Status is %d: must be a 5xx status", cfg.Status)
	}
	if cfg.RetryAfterSeconds < 0 {
		return nil, fmt.Errorf("registrytest: FaultConfig.RetryAfterSeconds is %d: must not be negative", cfg.RetryAfterSeconds)
	}
	if cfg.Limit < 0 {
		return nil, fmt.Errorf("registrytest: FaultConfig.Limit is %d: must not be negative", cfg.Limit)
	}
	if len(cfg.Faults) == 0 {
		cfg.Faults = []Fault{FaultServerError, FaultTooManyRequests, FaultReset}
	}
	for i, f := range cfg.Faults {
		if f < FaultServerError || f > FaultResetMidBody {
			return nil, fmt.Errorf("registrytest: FaultConfig.Faults[%d] is %v: unknown fault", i, f)
		}
	}
	cfg.Faults = append([]Fault(nil), cfg.Faults...)
	return &FaultInjector{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0x9e3779b97f4a7c15))}, nil
}

// Injected is how many faults were injected so far.
func (f *FaultInjector) Injected() int64 { return f.total.Load() }

// InjectedOf is how many faults of kind k were injected so far.
func (f *FaultInjector) InjectedOf(k Fault) int64 {
	if k < FaultServerError || k > FaultResetMidBody {
		return 0
	}
	return f.byKind[k].Load()
}

// decide draws whether this request fails, and how.
func (f *FaultInjector) decide() (Fault, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cfg.Limit > 0 && f.total.Load() >= int64(f.cfg.Limit) {
		return 0, false
	}
	if f.rng.Float64() >= f.cfg.Rate {
		return 0, false
	}
	k := f.cfg.Faults[f.rng.IntN(len(f.cfg.Faults))]
	f.total.Add(1)
	f.byKind[k].Add(1)
	return k, true
}

// Wrap is the handler wrapper.
func (f *FaultInjector) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.cfg.Match != nil && !f.cfg.Match(r) {
			next.ServeHTTP(w, r)
			return
		}
		kind, fail := f.decide()
		if !fail {
			next.ServeHTTP(w, r)
			return
		}
		switch kind {
		case FaultServerError:
			writeRegistryError(w, f.cfg.Status, "UNAVAILABLE", "injected server error")
		case FaultTooManyRequests:
			w.Header().Set("Retry-After", strconv.Itoa(f.cfg.RetryAfterSeconds))
			writeRegistryError(w, http.StatusTooManyRequests, "TOOMANYREQUESTS", "injected rate limit")
		case FaultReset:
			resetConnection(w)
		case FaultResetMidBody:
			resetMidBody(w, r, next)
		}
	})
}

// resetMidBody serves r through next and drops the connection half-way
// through the request body (when it has one) or the answer's.
func resetMidBody(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if r.ContentLength > 1 {
		_, _ = io.CopyN(io.Discard, r.Body, r.ContentLength/2)
		panic(http.ErrAbortHandler)
	}
	hw := &halfWriter{ResponseWriter: w}
	next.ServeHTTP(hw, r)
	if hw.cut {
		_ = http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler)
	}
}

// halfWriter passes half of a successful answer's body (by its
// Content-Length) and then refuses more.
type halfWriter struct {
	http.ResponseWriter
	cw  *cutWriter // nil until the header is written; then nil if not cut
	cut bool
	hdr bool
}

func (h *halfWriter) WriteHeader(status int) {
	if !h.hdr {
		h.hdr = true
		if n, err := strconv.ParseInt(h.Header().Get("Content-Length"), 10, 64); err == nil && n > 1 {
			h.cw = &cutWriter{ResponseWriter: h.ResponseWriter, left: n / 2, started: true, status: status}
		}
	}
	h.ResponseWriter.WriteHeader(status)
}

func (h *halfWriter) Write(p []byte) (int, error) {
	if !h.hdr {
		h.WriteHeader(http.StatusOK)
	}
	if h.cw == nil {
		return h.ResponseWriter.Write(p)
	}
	n, err := h.cw.Write(p)
	h.cut = h.cw.cut
	return n, err
}

func (h *halfWriter) Flush() { _ = http.NewResponseController(h.ResponseWriter).Flush() }

// Unwrap lets http.ResponseController reach the server's writer.
func (h *halfWriter) Unwrap() http.ResponseWriter { return h.ResponseWriter }

// writeRegistryError answers with a distribution-style error body.
func writeRegistryError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = fmt.Fprintf(w, `{"errors":[{"code":%q,"message":%q}]}`+"\n", code, message)
}

// resetConnection drops the client's connection without an answer: a TCP RST
// on HTTP/1.x, a stream reset on HTTP/2.
func resetConnection(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	raw := conn
	if nc, ok := conn.(interface{ NetConn() net.Conn }); ok {
		raw = nc.NetConn()
	}
	if tcp, ok := raw.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	// Closing the raw connection skips TLS's close_notify: the client sees a reset.
	_ = raw.Close()
}

// Throttle paces the bytes of blob transfers (the bodies of blob uploads
// and of blob downloads) through one link of a fixed rate that every
// request shares: a slow network between the client and the registry. A
// run that moves B bytes of blobs through it takes at least B/rate,
// however fast the machine.
type Throttle struct {
	rate float64 // bytes per second
	// burst is how far behind the clock the link's schedule may fall while
	// it is idle: a token bucket of burst's worth of bytes, which absorbs
	// the lateness of timers (0 for NewThrottle: an idle moment is lost).
	burst time.Duration

	mu    sync.Mutex
	next  time.Time // when the link is free again
	bytes atomic.Int64
}

// NewThrottle paces blob transfers at bytesPerSecond (at least 1).
func NewThrottle(bytesPerSecond int64) *Throttle {
	return &Throttle{rate: float64(max(bytesPerSecond, 1))}
}

// Bytes is how many bytes went through the throttle so far.
func (t *Throttle) Bytes() int64 { return t.bytes.Load() }

// throttleChunk is the most a request moves at once: the link is shared
// in pieces this big.
const throttleChunk = 16 << 10

// pace waits for n bytes' time on the link.
func (t *Throttle) pace(ctx context.Context, n int) error {
	t.mu.Lock()
	now := time.Now()
	if earliest := now.Add(-t.burst); t.next.Before(earliest) {
		t.next = earliest
	}
	t.next = t.next.Add(time.Duration(float64(n) * float64(time.Second) / t.rate))
	until := t.next
	t.mu.Unlock()
	t.bytes.Add(int64(n))
	timer := time.NewTimer(time.Until(until))
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Wrap is the handler wrapper.
func (t *Throttle) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.Contains(r.URL.Path, "/blobs/uploads/") && r.Body != nil && r.Body != http.NoBody:
			r.Body = &pacedBody{ReadCloser: r.Body, t: t, ctx: r.Context()}
		case MatchBlobGet(r):
			w = &pacedWriter{ResponseWriter: w, t: t, ctx: r.Context()}
		}
		next.ServeHTTP(w, r)
	})
}

type pacedBody struct {
	io.ReadCloser
	t   *Throttle
	ctx context.Context
}

func (p *pacedBody) Read(b []byte) (int, error) {
	n, err := p.ReadCloser.Read(b[:min(len(b), throttleChunk)])
	if n > 0 {
		if perr := p.t.pace(p.ctx, n); perr != nil {
			return n, perr
		}
	}
	return n, err
}

type pacedWriter struct {
	http.ResponseWriter
	t   *Throttle
	ctx context.Context
}

func (p *pacedWriter) Write(b []byte) (int, error) {
	written := 0
	for len(b) > 0 {
		chunk := b[:min(len(b), throttleChunk)]
		if err := p.t.pace(p.ctx, len(chunk)); err != nil {
			return written, err
		}
		n, err := p.ResponseWriter.Write(chunk)
		written += n
		if err != nil {
			return written, err
		}
		b = b[len(chunk):]
	}
	return written, nil
}

func (p *pacedWriter) Flush() { _ = http.NewResponseController(p.ResponseWriter).Flush() }

// Unwrap lets http.ResponseController reach the connection.
func (p *pacedWriter) Unwrap() http.ResponseWriter { return p.ResponseWriter }
