package registrytest

import (
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"time"
)

// RoundRobin is a load balancer on 127.0.0.1 sending each request to the
// next backend in turn (an L7 balancer: the parts of one upload land on
// different backends), keeping the Host the client asked for.
type RoundRobin struct {
	// Host is the balancer's address, host:port.
	Host string
	// Hits counts the requests sent to each backend.
	Hits []atomic.Int64
	// Pick, when set, chooses the backend of a request instead (set it
	// between runs, not while one sends requests).
	Pick func(*http.Request) int

	backends []*url.URL
	next     atomic.Uint64
	srv      *http.Server
}

// StartRoundRobin balances over backends (host:port, plain HTTP).
func StartRoundRobin(backends ...string) (*RoundRobin, error) {
	lb := &RoundRobin{Hits: make([]atomic.Int64, len(backends))}
	for _, b := range backends {
		u, err := url.Parse("http://" + b)
		if err != nil {
			return nil, err
		}
		lb.backends = append(lb.backends, u)
	}
	proxy := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		i := int((lb.next.Add(1) - 1) % uint64(len(lb.backends)))
		if lb.Pick != nil {
			i = lb.Pick(pr.In)
		}
		lb.Hits[i].Add(1)
		pr.SetURL(lb.backends[i])
		pr.Out.Host = pr.In.Host
	}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	lb.Host = ln.Addr().String()
	lb.srv = &http.Server{Handler: proxy, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = lb.srv.Serve(ln) }()
	return lb, nil
}

// Close stops the balancer.
func (lb *RoundRobin) Close() error { return lb.srv.Close() }
