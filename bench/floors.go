package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// capacity is what one of the bench's registries can do on this machine,
// measured with bare HTTP: the floors a trip's time is compared with.
type capacity struct {
	bandwidth float64 // bytes per second of one blob GET
	rate      float64 // reads (blob HEADs, 8 at a time) per second
	// blobReads is small blob GETs (1 KiB, 8 at a time) per second: a
	// registry may spend more on serving a blob than on a HEAD
	// (distribution allocates a 4 MiB read buffer for each).
	blobReads float64
	writeRate float64 // writes (POST and PUT of monolithic 1 KiB uploads, 8 at a time) per second
}

// measureCapacity GETs blob (size bytes) of repo a few times, HEADs it
// 2,000 times 8 at a time, uploads 400 blobs of 1 KiB 8 at a time and GETs
// one of them 1,000 times 8 at a time.
func measureCapacity(ctx context.Context, reg *registrytest.Registry, repo string, blob digest.Digest, size int64) (capacity, error) {
	client := reg.Client()
	u := reg.URL() + "/v2/" + repo + "/blobs/" + blob.String()
	var c capacity
	best := time.Duration(0)
	for range 3 {
		start := time.Now()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return c, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return c, err
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || n != size {
			return c, fmt.Errorf("measuring bandwidth: GET %s: %d bytes, %v", u, n, err)
		}
		if took := time.Since(start); best == 0 || took < best {
			best = took
		}
	}
	c.bandwidth = float64(size) / best.Seconds()
	const total, workers = 2000, 8
	var err error
	if c.rate, err = rate(workers, total, func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodHead, u, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}); err != nil {
		return c, fmt.Errorf("measuring the request rate: %w", err)
	}
	const uploads = 400
	var next atomic.Int64
	writes, err := rate(workers, uploads, func() error {
		i := next.Add(1) - 1 // blob 0 is read back below
		return upload(ctx, client, reg.URL(), fmt.Appendf(make([]byte, 0, 1024), "%01024d", i))
	})
	if err != nil {
		return c, fmt.Errorf("measuring the upload rate: %w", err)
	}
	c.writeRate = 2 * writes // a POST and a PUT each

	const gets = 1000
	small := reg.URL() + "/v2/calibration/blobs/" + digest.FromBytes(fmt.Appendf(nil, "%01024d", 0)).String()
	if c.blobReads, err = rate(workers, gets, func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, small, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		n, err := io.Copy(io.Discard, resp.Body)
		if err == nil && (resp.StatusCode != http.StatusOK || n != 1024) {
			err = fmt.Errorf("GET %s: %s, %d bytes", small, resp.Status, n)
		}
		return err
	}); err != nil {
		return c, fmt.Errorf("measuring the blob read rate: %w", err)
	}
	return c, nil
}

// rate runs do total times, workers at a time, and returns how many per
// second; the first error stops it.
func rate(workers, total int, do func() error) (float64, error) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range total / workers {
				if err := do(); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return float64(total) / time.Since(start).Seconds(), first
}

// upload stores data as a blob of the repository "calibration" with a POST
// and a monolithic PUT.
func upload(ctx context.Context, client *http.Client, base string, data []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v2/calibration/blobs/uploads/", nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	loc, err := resp.Location()
	if err != nil || resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("POST: %s, %v", resp.Status, err)
	}
	q := loc.Query()
	q.Set("digest", digest.FromBytes(data).String())
	loc.RawQuery = q.Encode()
	req, err = http.NewRequestWithContext(ctx, http.MethodPut, loc.String(), bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	if resp, err = client.Do(req); err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("PUT: %s", resp.Status)
	}
	return nil
}

// printFloors prints, for each trip, the floors max(bytes ÷ bandwidth,
// requests ÷ request rate) next to its measured time. bytes is what a first
// run moves over the network (a rerun moves none).
func printFloors(c capacity, bytes int64, t *trips) {
	fmt.Printf("  floors (this machine's loopback registry: %.0f MiB/s for one blob GET; %.0f reads/s (blob HEADs), %.0f blob GETs/s (1 KiB) and %.0f writes/s (POST, PUT of 1 KiB uploads), 8 at a time):\n",
		c.bandwidth/(1<<20), c.rate, c.blobReads, c.writeRate)
	fmt.Printf("  %-40s %9s %10s %10s %9s %10s\n", "trip", "bytes s", "requests", "request s", "floor s", "× floor")
	for _, r := range []struct {
		res   tripResult
		bytes int64
	}{{t.m2d, bytes}, {t.d2m, bytes}, {t.m2m, 2 * bytes}, {t.m2dAgain, 0}, {t.m2mAgain, 0}} {
		bs := float64(r.bytes) / c.bandwidth
		var reads, blobReads, writes int64
		for k, v := range r.res.kinds {
			_, req, _ := strings.Cut(k, "\t")
			switch {
			case req == "GET blob":
				blobReads += v
			case strings.HasPrefix(req, "GET ") || strings.HasPrefix(req, "HEAD "):
				reads += v
			default:
				writes += v
			}
		}
		rs := float64(reads)/c.rate + float64(blobReads)/c.blobReads + float64(writes)/c.writeRate
		floor := max(bs, rs)
		fmt.Printf("  %-40s %9.2f %10d %10.2f %9.2f %10.1f\n", r.res.row.op, bs, r.res.row.requests, rs, floor, r.res.row.took.Seconds()/max(floor, 1e-6))
	}
	fmt.Println("  request s = blob GETs ÷ blob GET rate + other reads ÷ read rate + writes ÷ write rate, over both registries; floor = the larger of bytes s and request s.")
	fmt.Println("  mirror-to-mirror moves the bytes twice over loopback (out of upstream, into the mirror); a floor ignores that both ends share the machine's CPUs.")
}
