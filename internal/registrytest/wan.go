package registrytest

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// WAN puts a wide-area network between a registry and its clients, as a
// handler wrapper (Options.Wrap, SetWrap) on the registry's own 127.0.0.1
// listener, so that image references keep their host:
//
//   - every request waits the delay once, before it is served and so before
//     its answer's headers, as a round trip would;
//   - every response body goes through one link of a fixed rate that all
//     requests and connections share (a Throttle: a token bucket a few
//     milliseconds deep);
//   - it counts the requests and the body bytes it passed, the most
//     requests in flight at once, and, with ConnState as Options.ConnState,
//     the connections clients opened and those that carried no request.
//
// A run that makes R requests, at most P at once, and reads B bytes through
// it takes at least max(B ÷ rate, R × delay ÷ P). What it does not model:
// a real WAN also charges a round trip for each new TCP connection and one
// or two for each TLS handshake, and its upload direction; request bodies
// pass unpaced. Connections and NoRequest say how many handshakes a run
// would have paid for.
type WAN struct {
	delay time.Duration
	link  *Throttle

	mu       sync.Mutex
	inFlight int64
	win      WANStats // since the last Take
	bytesAt  int64    // link.Bytes() at the last Take
	conns    map[string]bool
}

// WANStats is what went through a WAN.
type WANStats struct {
	// Requests is the number of requests served.
	Requests int64
	// Bytes is the response body bytes passed through the shared link.
	Bytes int64
	// PeakInFlight is the most requests in flight at once (from their
	// arrival, the delay included, to the end of their answer).
	PeakInFlight int64
	// Busy is the sum of the requests' times in flight: Busy ÷ the wall
	// time is the mean number in flight.
	Busy time.Duration
	// Connections is the number of connections accepted, NoRequest those
	// of them that closed without carrying a request to the WAN (a TLS
	// handshake tried against a plain-HTTP registry, a connection opened
	// and dropped); both need ConnState as Options.ConnState.
	Connections, NoRequest int64
}

// wanBurst is how deep the link's token bucket is, in time at its rate.
const wanBurst = 5 * time.Millisecond

// NewWAN returns a WAN of delay per request (at least 0) and a shared link
// of bytesPerSecond (at least 1).
func NewWAN(delay time.Duration, bytesPerSecond int64) *WAN {
	link := NewThrottle(bytesPerSecond)
	link.burst = wanBurst
	return &WAN{delay: max(delay, 0), link: link, conns: map[string]bool{}}
}

// Delay is the delay of every request.
func (w *WAN) Delay() time.Duration { return w.delay }

// Rate is the link's rate in bytes per second.
func (w *WAN) Rate() float64 { return w.link.rate }

// Take returns what went through since the last Take (or since NewWAN)
// and starts counting afresh; the peak starts again from the requests in
// flight now.
func (w *WAN) Take() WANStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.win
	now := w.link.Bytes()
	s.Bytes = now - w.bytesAt
	w.bytesAt = now
	w.win = WANStats{PeakInFlight: w.inFlight}
	return s
}

// Wrap is the handler wrapper.
func (w *WAN) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		start := time.Now()
		w.mu.Lock()
		w.inFlight++
		w.win.Requests++
		w.win.PeakInFlight = max(w.win.PeakInFlight, w.inFlight)
		if _, ok := w.conns[r.RemoteAddr]; ok {
			w.conns[r.RemoteAddr] = true
		}
		w.mu.Unlock()
		defer func() {
			w.mu.Lock()
			w.inFlight--
			w.win.Busy += time.Since(start)
			w.mu.Unlock()
		}()
		if w.delay > 0 {
			timer := time.NewTimer(w.delay)
			select {
			case <-timer.C:
			case <-r.Context().Done():
				timer.Stop()
				return
			}
		}
		next.ServeHTTP(&pacedWriter{ResponseWriter: rw, t: w.link, ctx: r.Context()}, r)
	})
}

// ConnState is the hook for Options.ConnState: it counts the connections
// clients open, and those that close without a request.
func (w *WAN) ConnState(c net.Conn, state http.ConnState) {
	addr := c.RemoteAddr().String()
	w.mu.Lock()
	defer w.mu.Unlock()
	switch state {
	case http.StateNew:
		w.win.Connections++
		w.conns[addr] = false
	case http.StateClosed, http.StateHijacked:
		if served, ok := w.conns[addr]; ok {
			if !served {
				w.win.NoRequest++
			}
			delete(w.conns, addr)
		}
	}
}
