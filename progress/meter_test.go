package progress

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/image/v5/types"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
	"github.com/gapmirror/gapmirror/transfer"
)

// TestProgressFromPlan: the copy's progress knows its byte and blob totals
// from its first reading, only moves forward, ends at the bytes moved plus
// those found, and agrees with the Result's tally; the planning pass costs
// the mirror no extra request on a rerun.
func TestProgressFromPlan(t *testing.T) {
	ctx := context.Background()
	up := registrytest.Start(t, registrytest.Options{})
	dst := registrytest.Start(t, registrytest.Options{})
	shared := imagebuilder.RandomLayer(7, 64<<10)
	var set imageset.Set
	push := func(i int) {
		img, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{shared, imagebuilder.RandomLayer(uint64(200+i), int64(32<<10+i))}})
		if err != nil {
			t.Fatal(err)
		}
		repo := fmt.Sprintf("ns/app-%d", i)
		if err := imagebuilder.Push(ctx, imagebuilder.Target{URL: up.URL()}, repo, "v1", img); err != nil {
			t.Fatal(err)
		}
		set.Images = append(set.Images, imageset.Image{Source: up.Host() + "/" + repo + "@" + img.Digest.String(), Origin: up.Host() + "/" + repo + ":v1",
			Digest: img.Digest.String(), Destination: repo + ":v1", Kind: imageset.KindAdditional})
	}
	for i := 0; i < 6; i++ {
		push(i)
	}
	run := func() (*transfer.Result, []counts) {
		src := transfer.NewUpstream(meterTestOptions(t))
		mir, err := transfer.NewMirror(dst.Host()+"/m", meterTestOptions(t))
		if err != nil {
			t.Fatal(err)
		}
		m := NewLineProgress(slog.New(slog.NewTextHandler(io.Discard, nil)), time.Hour)
		var mu sync.Mutex
		var seen []counts
		m.observe(func(c counts) {
			mu.Lock()
			seen = append(seen, c)
			mu.Unlock()
		})
		res := transfer.CopyPlanned(ctx, &set, src, mir, transfer.Options{ParallelImages: 3, Progress: m})
		m.Finish()
		if res.Err() != nil {
			t.Fatal(res.Err())
		}
		var copying []counts
		for _, c := range seen {
			if c.Phase == "copying" {
				copying = append(copying, c)
			}
		}
		if len(copying) < 2 {
			t.Fatalf("%d progress readings while copying", len(copying))
		}
		return res, copying
	}
	check := func(name string, res *transfer.Result, cs []counts) {
		t.Helper()
		first, last := cs[0], cs[len(cs)-1]
		if first.Bytes != last.Bytes || first.Blobs != last.Blobs || !first.TotalKnown {
			t.Errorf("%s: the first reading's total %d bytes / %d blobs is not the final %d / %d", name, first.Bytes, first.Blobs, last.Bytes, last.Blobs)
		}
		for i := 1; i < len(cs); i++ {
			if cs[i].Done < cs[i-1].Done || cs[i].Bytes < cs[i-1].Bytes || cs[i].ImagesDone < cs[i-1].ImagesDone {
				t.Errorf("%s: progress went back: %+v after %+v", name, cs[i], cs[i-1])
			}
		}
		tl := res.Tally
		if last.Done != last.Bytes || last.Done != tl.BytesMoved+tl.BytesFound {
			t.Errorf("%s: progress ended at %d of %d bytes; moved %d + found %d", name, last.Done, last.Bytes, tl.BytesMoved, tl.BytesFound)
		}
		if tl.BytesMoved != res.Bytes || tl.BlobsMoved != res.Blobs {
			t.Errorf("%s: tally moved %d blobs / %d bytes, the copy counted %d / %d", name, tl.BlobsMoved, tl.BytesMoved, res.Blobs, res.Bytes)
		}
		if tl.BlobsMoved+tl.BlobsFound != tl.Blobs || tl.BytesMoved+tl.BytesFound != tl.Bytes || tl.Blobs != last.Blobs {
			t.Errorf("%s: blobs do not add up: %+v (progress: %d blobs)", name, tl, last.Blobs)
		}
	}
	res, cs := run()
	check("first run", res, cs)
	// 6 images: the shared layer once, 6 own layers, 6 configs (distinct sizes).
	if res.Tally.Blobs != 13 || res.Tally.BlobsMoved != 13 || res.Tally.Reused != 5 {
		t.Errorf("first run: tally %+v, want 13 blobs moved and 5 shared references reused", res.Tally)
	}

	// Two new images in new repositories, the others already at the
	// mirror: the planning pass answers the copy's existence checks, one
	// HEAD per image already there; the catalog answers for the new ones.
	push(6)
	push(7)
	onDst := registrytest.NewRequestCounter()
	dst.SetWrap(onDst.Wrap)
	res, cs = run()
	dst.SetWrap(nil)
	check("rerun", res, cs)
	if len(res.Skipped) != 6 || len(res.Copied) != 2 {
		t.Errorf("rerun: %d skipped, %d copied; want 6 and 2", len(res.Skipped), len(res.Copied))
	}
	if got := onDst.N["HEAD manifest"]; got != 6 || onDst.N["GET catalog"] != 1 {
		t.Errorf("rerun: %d manifest HEADs for 6 images already there, want 6 and one catalog reading (%v)", got, onDst.N)
	}
}

// TestBarKeepsLogLines: on a terminal, a log line clears the status line,
// prints, and the status comes back; readings say images, IEC bytes and
// percent.
func TestBarKeepsLogLines(t *testing.T) {
	var buf strings.Builder
	term := NewTerminal(&buf)
	m := NewBarProgress(term, nil)
	m.Phase("copying", 2, transfer.Totals{Blobs: 2, Bytes: 3 << 20})
	m.Add(1 << 20)
	m.ImageDone(imageset.Image{Destination: "a:v1"}, false, nil)
	io.WriteString(term, "2026-11-25T00:00:00.000Z INFO  a log line\n")
	m.Finish()
	out := buf.String()
	for _, want := range []string{"copying 1/2 images [", " 33% 1.0 MiB/3.0 MiB, blobs 0/2", "\r\033[K2026-11-25T00:00:00.000Z INFO  a log line\ncopying 1/2 images"} {
		if !strings.Contains(out, want) {
			t.Errorf("terminal output lacks %q:\n%q", want, out)
		}
	}
	if !strings.HasSuffix(out, "\r\033[K") {
		t.Errorf("the status line is not cleared at the end: %q", out)
	}
}

// TestNestedPhase: a copy resolution needs (a rebuilt catalog) shows its
// phases, then the resolving phase comes back and ends last.
func TestNestedPhase(t *testing.T) {
	m := NewLineProgress(nil, time.Hour)
	var phases []string
	m.observe(func(c counts) {
		p := c.Phase
		if c.FinalReport {
			p += " done"
		}
		if len(phases) == 0 || phases[len(phases)-1] != p {
			phases = append(phases, p)
		}
	})
	m.Phase("resolving", 0, transfer.Totals{})
	m.Phase("planning", 1, transfer.Totals{})
	m.Phase("copying", 1, transfer.Totals{})
	m.ImageDone(imageset.Image{Destination: "catalog:v1"}, false, nil)
	m.Finish()
	m.Finish()
	want := []string{"resolving", "planning", "planning done", "copying", "copying done", "resolving", "resolving done"}
	if strings.Join(phases, ",") != strings.Join(want, ",") {
		t.Errorf("phases %v, want %v", phases, want)
	}
}

// TestETAOfSmallBlobsAfterLargeOnes: large blobs go first, so the bytes are
// nearly all in while most blobs are not; the ETA then comes from the blobs
// still queued at the pace blobs have been handled (not "0s" from the bytes
// left), leaves those in flight to the bytes' estimate, and falls to the
// bytes' own once nothing is queued.
func TestETAOfSmallBlobsAfterLargeOnes(t *testing.T) {
	large := ocispec.Descriptor{Digest: digest.FromString("large"), Size: 99 << 20}
	var small []ocispec.Descriptor
	of := map[string][]ocispec.Descriptor{"big:v1": {large}}
	for i := range 100 {
		d := ocispec.Descriptor{Digest: digest.FromString(fmt.Sprint("small", i)), Size: 10 << 10}
		small = append(small, d)
		of[fmt.Sprintf("small-%d:v1", i)] = []ocispec.Descriptor{d}
	}
	m := NewLineProgress(slog.New(slog.NewTextHandler(io.Discard, nil)), time.Hour)
	defer m.Finish()
	m.Phase("copying", len(of), transfer.TotalsOf(of))
	img := imageset.Image{Destination: "big:v1"}
	send := func(d ocispec.Descriptor) {
		m.Sending(d)
		m.Add(d.Size)
		m.Sent(d, true)
		m.Blob(img, d, transfer.BlobMoved)
	}
	send(large)
	for _, d := range small[:19] {
		send(d)
	}
	for _, d := range small[19:21] {
		m.Sending(d) // in flight
	}
	m.mu.Lock()
	m.start = time.Now().Add(-20 * time.Second) // 20 blobs handled in 20 s
	m.mu.Unlock()
	c := m.counts()
	if pct := float64(c.Done) / float64(c.Bytes); pct < 0.99 {
		t.Fatalf("the bytes are %.0f%% in; the check needs nearly all", pct*100)
	}
	// 101 blobs, 20 handled, 2 in flight: 79 queued at a second each.
	if c.ETA < 78*time.Second || c.ETA > 80*time.Second {
		t.Errorf("ETA %s with 79 blobs queued at one a second, want 79s (from the bytes alone: 0s)", c.ETA)
	}
	if !strings.Contains(c.String(), "ETA 1m19s") {
		t.Errorf("status line %q does not show the ETA", c.String())
	}
	for _, d := range small[19:21] {
		m.Add(d.Size)
		m.Sent(d, true)
		m.Blob(img, d, transfer.BlobMoved)
	}
	for _, d := range small[21:] {
		send(d)
	}
	if c := m.counts(); c.ETA != 0 {
		t.Errorf("ETA %s with every blob handled, want none", c.ETA)
	}
}

// meterTestOptions reach the test registries over plain HTTP, with an
// empty registries.conf and auth file of the test's own.
func meterTestOptions(t *testing.T) transfer.RegistryOptions {
	conf, auth := registrytest.ClientFiles(t)
	return transfer.RegistryOptions{TLSVerify: types.OptionalBoolFalse, RegistriesConf: conf, AuthFile: auth}
}

// TestBarLastFrameIsFinal: on a terminal, the last frame of a finished
// phase shows its final figures: 100% of its bytes and the rate they went
// at. A short phase (an archive written in less than a redraw interval)
// used to have its first frame, at 0% and 0 B/s, drawn again under the
// 100% line its end logged.
func TestBarLastFrameIsFinal(t *testing.T) {
	for _, c := range []struct {
		name string
		end  func(m *Meter)
	}{
		{"finished", func(m *Meter) { m.Finish() }},
		{"followed by the next phase", func(m *Meter) { m.Phase("checking archive", 0, transfer.Totals{}); m.Finish() }},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf strings.Builder
			term := NewTerminal(&buf)
			m := NewBarProgress(term, slog.New(slog.NewTextHandler(term, nil)))
			m.Phase("writing archive", 0, transfer.Totals{Blobs: 3, Bytes: 3 << 20})
			time.Sleep(10 * time.Millisecond) // a rate needs some time
			m.Add(3 << 20)
			c.end(m)
			out := buf.String()
			logged := strings.Index(out, "msg=\"writing archive 100% 3.0 MiB/3.0 MiB")
			if logged < 0 {
				t.Fatalf("the end of the phase is not logged:\n%q", out)
			}
			// Frames are what follows each "clear the line"; the last one
			// of the phase is the one left when it ended.
			var last string
			for _, f := range strings.Split(out, "\r\033[K") {
				if f, _, _ := strings.Cut(f, "\n"); strings.HasPrefix(f, "writing archive [") {
					last = f
				}
			}
			if !strings.Contains(last, "[========================] 100% 3.0 MiB/3.0 MiB") || strings.Contains(last, " 0 B/s") || !strings.Contains(last, "/s") {
				t.Errorf("the last frame of the finished phase is %q, want 100%% of 3.0 MiB and its rate; output:\n%q", last, out)
			}
			if strings.Contains(out[logged:], "writing archive [ ") {
				t.Errorf("a frame short of 100%% is drawn after the phase ended:\n%q", out[logged:])
			}
		})
	}
}
