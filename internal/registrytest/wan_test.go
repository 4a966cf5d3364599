package registrytest_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// wanRegistry starts a registry behind wan from its start (pushes go
// through it too) and pushes one image of layers layers of layerSize bytes
// to wan/app:v1.
func wanRegistry(t *testing.T, wan *registrytest.WAN, layers int, layerSize int64) (*registrytest.Registry, *imagebuilder.Image) {
	t.Helper()
	reg := registrytest.Start(t, registrytest.Options{Wrap: wan.Wrap, ConnState: wan.ConnState})
	var specs []imagebuilder.LayerSpec
	for i := range layers {
		specs = append(specs, imagebuilder.RandomLayer(uint64(100+i), layerSize))
	}
	img, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: specs})
	if err != nil {
		t.Fatal(err)
	}
	if err := imagebuilder.Push(context.Background(), target(reg, "", ""), "wan/app", "v1", img); err != nil {
		t.Fatalf("Push: %v", err)
	}
	return reg, img
}

// freshClient is a client with connections of its own (none left idle by
// the push).
func freshClient(t *testing.T) *http.Client {
	t.Helper()
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 16}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// TestWANDelay: every request waits the delay once, before its answer's
// headers; requests in sequence add up; the counts are the requests and
// the body bytes.
func TestWANDelay(t *testing.T) {
	const delay = 60 * time.Millisecond
	wan := registrytest.NewWAN(delay, 1<<30)
	reg, _ := wanRegistry(t, wan, 1, 4<<10)
	_ = wan.Take()
	client := freshClient(t)

	manifest := reg.URL() + "/v2/wan/app/manifests/v1"
	start := time.Now()
	var bodyBytes int64
	for i, method := range []string{http.MethodGet, http.MethodHead, http.MethodGet} {
		req, err := http.NewRequest(method, manifest, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json")
		sent := time.Now()
		resp, err := client.Do(req) // returns with the headers
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(sent); took < delay {
			t.Errorf("request %d: headers after %v, want at least the delay %v", i, took, delay)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: %s, %v", method, manifest, resp.Status, err)
		}
		bodyBytes += n
	}
	if took := time.Since(start); took < 3*delay {
		t.Errorf("three requests in sequence took %v, want at least 3 × %v", took, delay)
	}
	got := wan.Take()
	if got.Requests != 3 || got.Bytes != bodyBytes || got.PeakInFlight != 1 || got.Busy < 3*delay {
		t.Errorf("stats %+v, want 3 requests, %d bytes (two manifest bodies), peak 1, busy at least %v", got, bodyBytes, 3*delay)
	}
	if got.Connections != 1 || got.NoRequest != 0 {
		t.Errorf("stats %+v, want 1 connection (kept alive), none without a request", got)
	}
	if wan.Delay() != delay {
		t.Errorf("Delay() = %v, want %v", wan.Delay(), delay)
	}
	if again := wan.Take(); again != (registrytest.WANStats{}) {
		t.Errorf("a second Take with nothing served = %+v, want zero", again)
	}
}

// TestWANSharedLink: four blobs downloaded at once share one link of the
// WAN's rate: together they take their total size over the rate (within
// the bucket's depth), not one blob's time; the peak in flight is 4 and
// every body byte is counted.
func TestWANSharedLink(t *testing.T) {
	const (
		rate  = 4 << 20 // bytes per second
		size  = 1 << 20 // per blob
		blobs = 4
		delay = 20 * time.Millisecond
	)
	wan := registrytest.NewWAN(delay, rate)
	reg, img := wanRegistry(t, wan, blobs, size)
	_ = wan.Take()
	client := freshClient(t)

	var wg sync.WaitGroup
	var total int64
	var mu sync.Mutex
	start := time.Now()
	for _, l := range img.Layers {
		wg.Add(1)
		go func(d digest.Digest) {
			defer wg.Done()
			resp, err := client.Get(reg.URL() + "/v2/wan/app/blobs/" + d.String())
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != http.StatusOK || digest.FromBytes(body) != d {
				t.Errorf("GET blob %s: %s, %d bytes, %v", d, resp.Status, len(body), err)
			}
			mu.Lock()
			total += int64(len(body))
			mu.Unlock()
		}(l.Digest)
	}
	wg.Wait()
	took := time.Since(start)
	// The bucket lets 5 ms of the rate through at once; the rest is paced.
	floor := time.Duration(float64(total-rate*5/1000)/rate*float64(time.Second)) + delay
	if took < floor*95/100 {
		t.Errorf("%d blobs of %d bytes at once at %d bytes/s took %v, want at least %v: the link is not shared", blobs, size, rate, took, floor)
	}
	if max := 3*floor + time.Second; took > max {
		t.Errorf("%d blobs of %d bytes at once at %d bytes/s took %v, want about %v (at most %v): the parallel downloads do not use the link", blobs, size, rate, took, floor, max)
	}
	got := wan.Take()
	if got.Requests != blobs || got.Bytes != total || got.PeakInFlight != blobs {
		t.Errorf("stats %+v, want %d requests, %d bytes, peak %d in flight", got, blobs, total, blobs)
	}
	if got.Connections != blobs || got.NoRequest != 0 {
		t.Errorf("stats %+v, want %d connections, none without a request", got, blobs)
	}
	t.Logf("%d × %d bytes at %d bytes/s in %v (floor %v): %.2f MiB/s", blobs, size, rate, took, floor, float64(total)/(1<<20)/took.Seconds())
}

// TestWANNoRequest: a TLS handshake tried against the plain-HTTP registry,
// as a client told to skip verification tries before it falls back to
// HTTP, opens a connection that carries no request: counted, and not
// delayed (the WAN sees requests only).
func TestWANNoRequest(t *testing.T) {
	wan := registrytest.NewWAN(10*time.Millisecond, 1<<30)
	reg, _ := wanRegistry(t, wan, 1, 1<<10)
	_ = wan.Take()

	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", reg.Host(), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a handshake meant to fail
	if err == nil {
		conn.Close()
		t.Fatal("a TLS handshake with a plain-HTTP registry succeeded")
	}
	var sum registrytest.WANStats
	for deadline := time.Now().Add(5 * time.Second); sum.NoRequest == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		s := wan.Take()
		sum.Connections += s.Connections
		sum.NoRequest += s.NoRequest
		sum.Requests += s.Requests
	}
	if sum.Connections != 1 || sum.NoRequest != 1 || sum.Requests != 0 {
		t.Errorf("after a failed TLS handshake: %+v, want 1 connection, 1 without a request, no requests", sum)
	}
}
