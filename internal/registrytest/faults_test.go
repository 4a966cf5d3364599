package registrytest_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// pushed starts a registry and pushes a one-layer image of layerSize bytes to
// fault/app:v1 before any fault is active.
func pushed(t *testing.T, opts registrytest.Options, layerSize int64) (*registrytest.Registry, *imagebuilder.Image) {
	t.Helper()
	reg := registrytest.Start(t, opts)
	img, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(1, layerSize)}})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if err := imagebuilder.Push(context.Background(), target(reg, "", ""), "fault/app", "v1", img); err != nil {
		t.Fatalf("Push: %v", err)
	}
	return reg, img
}

// fetch GETs a blob and returns the body read so far and the read error.
func fetch(t *testing.T, reg *registrytest.Registry, d digest.Digest) (int, []byte, error) {
	t.Helper()
	resp, err := reg.Client().Get(reg.URL() + "/v2/fault/app/blobs/" + d.String())
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

func TestBlobTruncator(t *testing.T) {
	for _, tls := range []bool{false, true} {
		t.Run(map[bool]string{false: "http", true: "https"}[tls], func(t *testing.T) {
			cut := registrytest.NewBlobTruncator(1000, 2)
			reg, img := pushed(t, registrytest.Options{TLS: tls}, 200<<10)
			reg.SetWrap(cut.Wrap)
			layer := img.Layers[0]
			for i := range 2 {
				status, body, err := fetch(t, reg, layer.Digest)
				if status != http.StatusOK || err == nil || len(body) != 1000 {
					t.Fatalf("fetch %d: status %d, %d bytes, error %v; want 200, 1000 bytes and a short read", i, status, len(body), err)
				}
			}
			status, body, err := fetch(t, reg, layer.Digest)
			if status != http.StatusOK || err != nil || digest.SHA256.FromBytes(body) != layer.Digest {
				t.Fatalf("third fetch: status %d, %d bytes, error %v; want the whole blob", status, len(body), err)
			}
			// The config is shorter than the cut: served whole and not counted.
			if _, body, err := fetch(t, reg, img.Config.Digest); err != nil || int64(len(body)) != img.Config.Size {
				t.Errorf("config fetch: %d bytes, %v", len(body), err)
			}
			if cut.Cuts() != 2 || cut.CutsOf(layer.Digest) != 2 || cut.CutsOf(img.Config.Digest) != 0 {
				t.Errorf("Cuts %d, of layer %d, of config %d; want 2, 2, 0", cut.Cuts(), cut.CutsOf(layer.Digest), cut.CutsOf(img.Config.Digest))
			}
		})
	}
}

func TestBlobTruncatorConcurrent(t *testing.T) {
	cut := registrytest.NewBlobTruncator(100, 5)
	reg, img := pushed(t, registrytest.Options{}, 50<<10)
	reg.SetWrap(cut.Wrap)
	var wg sync.WaitGroup
	var mu sync.Mutex
	short := 0
	for range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := fetch(t, reg, img.Layers[0].Digest); err != nil {
				mu.Lock()
				short++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if short != 5 || cut.Cuts() != 5 {
		t.Errorf("%d short reads, %d cuts; want exactly 5 of 12", short, cut.Cuts())
	}
}

func TestBlobCorrupter(t *testing.T) {
	reg, img := pushed(t, registrytest.Options{}, 4<<10)
	layer := img.Layers[0]
	bad := registrytest.NewBlobCorrupter(1, layer.Digest)
	reg.SetWrap(bad.Wrap)

	status, body, err := fetch(t, reg, layer.Digest)
	if status != http.StatusOK || err != nil || int64(len(body)) != layer.Size || digest.SHA256.FromBytes(body) == layer.Digest {
		t.Fatalf("first fetch: status %d, %d bytes, %v; want full-length bytes that do not match the digest", status, len(body), err)
	}
	if _, body, err := fetch(t, reg, layer.Digest); err != nil || digest.SHA256.FromBytes(body) != layer.Digest {
		t.Errorf("second fetch: %v, want the right content after one corruption", err)
	}
	if _, body, _ := fetch(t, reg, img.Config.Digest); digest.SHA256.FromBytes(body) != img.Config.Digest {
		t.Errorf("config was corrupted though not chosen")
	}
	if bad.Corrupted() != 1 {
		t.Errorf("Corrupted() = %d, want 1", bad.Corrupted())
	}
	// The in-process helpers never see injected faults.
	if _, err := reg.Blob("fault/app", layer.Digest); err != nil {
		t.Errorf("Blob helper: %v", err)
	}
}

func TestFaultInjectorKinds(t *testing.T) {
	tests := []struct {
		name  string
		cfg   registrytest.FaultConfig
		check func(t *testing.T, resp *http.Response, err error)
	}{
		{
			name: "server error",
			cfg:  registrytest.FaultConfig{Rate: 1, Faults: []registrytest.Fault{registrytest.FaultServerError}, Status: 502},
			check: func(t *testing.T, resp *http.Response, err error) {
				if err != nil || resp.StatusCode != http.StatusBadGateway {
					t.Fatalf("got %v %v, want 502", resp, err)
				}
				body, _ := io.ReadAll(resp.Body)
				if !strings.Contains(string(body), `"UNAVAILABLE"`) {
					t.Errorf("body %s, want a registry error", body)
				}
			},
		},
		{
			name: "too many requests",
			cfg:  registrytest.FaultConfig{Rate: 1, Faults: []registrytest.Fault{registrytest.FaultTooManyRequests}, RetryAfterSeconds: 2},
			check: func(t *testing.T, resp *http.Response, err error) {
				if err != nil || resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "2" {
					t.Fatalf("got %v %v, want 429 with Retry-After: 2", resp, err)
				}
			},
		},
		{
			name: "connection reset",
			cfg:  registrytest.FaultConfig{Rate: 1, Faults: []registrytest.Fault{registrytest.FaultReset}},
			check: func(t *testing.T, resp *http.Response, err error) {
				if err == nil {
					t.Fatalf("got %d, want a transport error", resp.StatusCode)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			faults, err := registrytest.NewFaultInjector(tt.cfg)
			if err != nil {
				t.Fatalf("NewFaultInjector: %v", err)
			}
			reg := registrytest.Start(t, registrytest.Options{Wrap: faults.Wrap})
			// No retries: a plain transport without keep-alive reuse.
			client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			resp, err := client.Get(reg.URL() + "/v2/")
			if resp != nil {
				defer resp.Body.Close()
			}
			tt.check(t, resp, err)
			if faults.Injected() != 1 || faults.InjectedOf(tt.cfg.Faults[0]) != 1 {
				t.Errorf("Injected() = %d, InjectedOf(%v) = %d; want 1", faults.Injected(), tt.cfg.Faults[0], faults.InjectedOf(tt.cfg.Faults[0]))
			}
		})
	}
}

func TestFaultInjectorIsSeededAndLimited(t *testing.T) {
	// pattern runs 40 sequential requests and records which ones failed.
	pattern := func(cfg registrytest.FaultConfig) (string, *registrytest.FaultInjector) {
		faults, err := registrytest.NewFaultInjector(cfg)
		if err != nil {
			t.Fatalf("NewFaultInjector: %v", err)
		}
		reg := registrytest.Start(t, registrytest.Options{Wrap: faults.Wrap})
		var b strings.Builder
		for range 40 {
			resp, err := reg.Client().Get(reg.URL() + "/v2/")
			switch {
			case err != nil:
				b.WriteByte('R')
			default:
				resp.Body.Close()
				b.WriteByte(map[int]byte{200: '.', 503: 'E', 429: 'T'}[resp.StatusCode])
			}
		}
		return b.String(), faults
	}
	cfg := registrytest.FaultConfig{Rate: 0.3, Seed: 42}
	first, faults := pattern(cfg)
	second, _ := pattern(cfg)
	if first != second {
		t.Errorf("same seed, different faults:\n%s\n%s", first, second)
	}
	failed := int64(40 - strings.Count(first, "."))
	if failed == 0 || failed == 40 || faults.Injected() != failed {
		t.Errorf("pattern %s: Injected() = %d, failed %d", first, faults.Injected(), failed)
	}
	if other, _ := pattern(registrytest.FaultConfig{Rate: 0.3, Seed: 43}); other == first {
		t.Errorf("different seeds gave the same pattern %s", first)
	}
	limited, faults := pattern(registrytest.FaultConfig{Rate: 1, Limit: 3, Faults: []registrytest.Fault{registrytest.FaultServerError}})
	if limited != "EEE"+strings.Repeat(".", 37) || faults.Injected() != 3 {
		t.Errorf("Limit 3: pattern %s, Injected() = %d", limited, faults.Injected())
	}
}

func TestFaultInjectorMatch(t *testing.T) {
	faults, err := registrytest.NewFaultInjector(registrytest.FaultConfig{
		Rate: 1, Match: registrytest.MatchBlobGet, Faults: []registrytest.Fault{registrytest.FaultServerError},
	})
	if err != nil {
		t.Fatalf("NewFaultInjector: %v", err)
	}
	reg := registrytest.Start(t, registrytest.Options{Wrap: faults.Wrap})
	img := smallImage(t, 1)
	// Pushes and manifest reads are not blob GETs: they go through.
	if err := imagebuilder.Push(context.Background(), target(reg, "", ""), "fault/app", "v1", img); err != nil {
		t.Fatalf("Push: %v", err)
	}
	if status, _, _ := get(t, reg, http.MethodGet, reg.URL()+"/v2/fault/app/manifests/v1", http.Header{"Accept": {img.MediaType}}); status != http.StatusOK {
		t.Errorf("manifest GET = %d", status)
	}
	if status, _, _ := fetch(t, reg, img.Layers[0].Digest); status != http.StatusServiceUnavailable {
		t.Errorf("blob GET = %d, want 503", status)
	}
	if faults.Injected() != 1 {
		t.Errorf("Injected() = %d, want 1", faults.Injected())
	}
}

func TestFaultConfigErrors(t *testing.T) {
	tests := []struct {
		cfg  registrytest.FaultConfig
		want string
	}{
		{registrytest.FaultConfig{Rate: 1.5}, "Rate"},
		{registrytest.FaultConfig{Rate: -0.1}, "Rate"},
		{registrytest.FaultConfig{Status: 404}, "Status"},
		{registrytest.FaultConfig{RetryAfterSeconds: -1}, "RetryAfterSeconds"},
		{registrytest.FaultConfig{Limit: -1}, "Limit"},
		{registrytest.FaultConfig{Faults: []registrytest.Fault{9}}, "Faults[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if _, err := registrytest.NewFaultInjector(tt.cfg); err == nil || !strings.Contains(err.Error(), "FaultConfig."+tt.want) {
				t.Errorf("error %v, want one naming FaultConfig.%s", err, tt.want)
			}
		})
	}
}

func TestChainAndBlobPath(t *testing.T) {
	var order []string
	mark := func(name string) func(http.Handler) http.Handler {
		return func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				order = append(order, name)
				next.ServeHTTP(w, r)
			})
		}
	}
	reg := registrytest.Start(t, registrytest.Options{Wrap: registrytest.Chain(mark("a"), nil, mark("b"))})
	get(t, reg, http.MethodGet, reg.URL()+"/v2/", nil)
	if strings.Join(order, "") != "ab" {
		t.Errorf("wrappers ran in order %v, want a then b", order)
	}

	d := digest.FromString("x")
	tests := []struct {
		path     string
		wantRepo string
		wantOK   bool
	}{
		{"/v2/a/b/blobs/" + d.String(), "a/b", true},
		{"/v2/a/blobs/uploads/", "", false},
		{"/v2/a/blobs/uploads/123", "", false},
		{"/v2/a/manifests/" + d.String(), "", false},
		{"/v2/blobs/" + d.String(), "", false},
		{"/other/a/blobs/" + d.String(), "", false},
	}
	for _, tt := range tests {
		repo, got, ok := registrytest.BlobPath(tt.path)
		if ok != tt.wantOK || repo != tt.wantRepo || (ok && got != d) {
			t.Errorf("BlobPath(%q) = %q, %q, %v", tt.path, repo, got, ok)
		}
	}
	for f, want := range map[registrytest.Fault]string{
		registrytest.FaultServerError:     "server-error",
		registrytest.FaultTooManyRequests: "too-many-requests",
		registrytest.FaultReset:           "connection-reset",
	} {
		if f.String() != want {
			t.Errorf("Fault(%d).String() = %q, want %q", int(f), f.String(), want)
		}
	}
}

// TestThrottle: blob bytes, both ways, go through one link of the
// throttle's rate: one download takes its size over the rate, two at once
// take twice as long, and an upload is paced too. Manifests are not.
func TestThrottle(t *testing.T) {
	const rate = 384 << 10 // a quarter of a second per blob
	reg, img := pushed(t, registrytest.Options{}, 96<<10)
	layer, size := img.Layers[0].Digest, img.Layers[0].Size
	th := registrytest.NewThrottle(rate)
	reg.SetWrap(th.Wrap)

	start := time.Now()
	if status, body, err := fetch(t, reg, layer); status != http.StatusOK || err != nil || digest.FromBytes(body) != layer {
		t.Fatalf("throttled GET: %d, %v", status, err)
	}
	if d, want := time.Since(start), time.Duration(size)*time.Second/rate; d < want {
		t.Errorf("a %d-byte blob at %d bytes/s took %v, want at least %v", size, rate, d, want)
	}
	start = time.Now()
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if status, body, err := fetch(t, reg, layer); status != http.StatusOK || err != nil || digest.FromBytes(body) != layer {
				t.Errorf("concurrent throttled GET: %d, %v", status, err)
			}
		}()
	}
	wg.Wait()
	if d, want := time.Since(start), 2*time.Duration(size)*time.Second/rate; d < want {
		t.Errorf("two blobs at once took %v, want at least %v: the link is not shared", d, want)
	}
	if got := th.Bytes(); got != 3*size {
		t.Errorf("Bytes = %d after three downloads, want %d", got, 3*size)
	}

	other, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(77, 96<<10)}})
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if err := imagebuilder.Push(context.Background(), target(reg, "", ""), "fault/other", "v1", other); err != nil {
		t.Fatalf("throttled push: %v", err)
	}
	if d, want := time.Since(start), time.Duration(other.Layers[0].Size)*time.Second/rate; d < want {
		t.Errorf("pushing a %d-byte layer took %v, want at least %v", other.Layers[0].Size, d, want)
	}
	if got, err := reg.Blob("fault/other", other.Layers[0].Digest); err != nil || digest.FromBytes(got) != other.Layers[0].Digest {
		t.Errorf("the throttled upload stored %d bytes, %v", len(got), err)
	}
	if got := th.Bytes(); got < 3*size+other.Layers[0].Size {
		t.Errorf("Bytes = %d after the upload, want at least %d", got, 3*size+other.Layers[0].Size)
	}
}
