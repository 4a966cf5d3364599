package progress

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/gapmirror/gapmirror/failure"
	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/transfer"
)

// counts is one reading of a Meter; every figure only grows within a phase.
type counts struct {
	Phase                   string
	Images, ImagesDone      int
	ImagesSkipped, Failed   int
	Blobs, Bytes            int64 // the phase's totals
	Done                    int64 // bytes moved or found, never less than before
	BlobsMoved, BlobsFound  int64 // distinct blobs
	BytesMoved, BytesFound  int64
	Reused                  int64 // further references to a blob already handled
	Retries                 int64
	Elapsed                 time.Duration
	RateBytesPerSec         float64
	ETA                     time.Duration
	TotalKnown, FinalReport bool
}

// Meter counts a phase and shows it: a status line redrawn on a timer
// (Terminal), or the same line logged every interval. With a logger, it
// also logs each image, blob and retry at debug level.
type Meter struct {
	term     *Terminal     // bar mode; nil: line mode
	log      *slog.Logger  // line mode output and debug events; may be nil
	every    time.Duration // redraw (bar) or line interval
	observer func(counts)  // tests: every reading shown

	mu        sync.Mutex
	c         counts
	t         *transfer.Tally
	extra     int64 // bytes of the blobs sent without a plan
	inFlight  int64 // transfers between Sending and Sent
	sent      int64 // bytes read through verifying readers
	start     time.Time
	stop      chan struct{}
	wg        sync.WaitGroup
	runningOn bool
	// outer holds the resolving phase while a copy it needs (a rebuilt
	// catalog, the graph image) shows its own phases; it resumes after.
	outer *meterState
}

// meterState is a phase's figures, kept while a nested phase runs.
type meterState struct {
	c           counts
	t           *transfer.Tally
	extra, sent int64
	start       time.Time
}

// NewBarProgress shows the status on the terminal's last line, redrawn
// about once a second and on every image finished.
func NewBarProgress(t *Terminal, log *slog.Logger) *Meter {
	return &Meter{term: t, log: log, every: time.Second}
}

// NewLineProgress logs the status line every interval, for logs and pipes.
func NewLineProgress(log *slog.Logger, interval time.Duration) *Meter {
	return &Meter{log: log, every: interval}
}

// observe calls f with every reading the meter shows (for tests).
func (m *Meter) observe(f func(counts)) { m.observer = f }

func (m *Meter) Phase(name string, images int, total transfer.Totals) {
	m.mu.Lock()
	if m.runningOn && m.c.Phase == "resolving" && m.outer == nil {
		m.outer = &meterState{c: m.c, t: m.t, extra: m.extra, sent: m.sent, start: m.start}
		m.stopTicker()
	} else {
		m.mu.Unlock()
		m.end(false)
		m.mu.Lock()
	}
	m.c = counts{Phase: name, Images: images}
	m.t = transfer.NewTally(total)
	m.extra, m.sent, m.inFlight, m.start = 0, 0, 0, time.Now()
	m.mu.Unlock()
	m.show(false, false)
	m.startTicker()
}

// stopTicker stops the redraw timer; m.mu is held and stays held.
func (m *Meter) stopTicker() {
	m.runningOn = false
	close(m.stop)
	m.mu.Unlock()
	m.wg.Wait()
	m.mu.Lock()
}

// startTicker redraws the running phase every interval.
func (m *Meter) startTicker() {
	m.mu.Lock()
	m.stop, m.runningOn = make(chan struct{}), true
	stop := m.stop
	m.mu.Unlock()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		t := time.NewTicker(m.every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				m.show(true, false)
			}
		}
	}()
}

func (m *Meter) Sending(desc ocispec.Descriptor) {
	m.mu.Lock()
	if m.t != nil && !m.t.Planned() {
		m.extra += desc.Size
	}
	m.inFlight++
	m.mu.Unlock()
}

func (m *Meter) Sent(desc ocispec.Descriptor, ok bool) {
	m.mu.Lock()
	if !ok && m.t != nil && !m.t.Planned() {
		m.extra -= desc.Size
	}
	m.inFlight--
	m.mu.Unlock()
}

func (m *Meter) Add(n int64) {
	m.mu.Lock()
	m.sent += n
	m.mu.Unlock()
}

func (m *Meter) Blob(img imageset.Image, desc ocispec.Descriptor, how transfer.BlobOutcome) {
	m.mu.Lock()
	t := m.t
	m.mu.Unlock()
	first := t == nil || t.Blob(desc, how)
	if m.log != nil {
		what := "blob moved"
		switch {
		case !first:
			what = "blob reused"
		case how == transfer.BlobFound:
			what = "blob already at the destination"
		}
		m.log.Debug(what, "image", img.Destination, "digest", desc.Digest.String(), "size", desc.Size)
	}
}

func (m *Meter) Retry(what string, err error, attempt int, wait time.Duration) {
	m.mu.Lock()
	m.c.Retries++
	m.mu.Unlock()
	if m.log != nil {
		m.log.Debug("retrying", "what", what, "attempt", attempt, "wait", wait, "cause", failure.Classify(err).Kind, "error", err)
	}
}

func (m *Meter) ImageDone(img imageset.Image, skipped bool, err error) {
	m.mu.Lock()
	if !img.Kind.Attached() {
		// Images as the summary counts them: signatures and referrers apart.
		m.c.ImagesDone++
	}
	if m.c.Phase == "planning" {
		// Planned, not copied: the copying phase says what became of it.
		m.mu.Unlock()
		m.show(false, false)
		return
	}
	switch {
	case err != nil && !img.Kind.Attached():
		m.c.Failed++
	case err != nil:
	case skipped:
		m.c.ImagesSkipped++
		if m.t != nil {
			m.t.Skipped(img)
		}
	}
	m.mu.Unlock()
	if m.log != nil {
		switch {
		case err != nil:
			m.log.Debug("image failed", "image", img.Destination, "error", err)
		case skipped:
			m.log.Debug("image already at the destination, skipped", "image", img.Destination, "digest", img.Digest)
		default:
			m.log.Debug("image copied", "image", img.Destination, "digest", img.Digest)
		}
	}
	m.show(false, false)
}

// Finish ends the phase with a last reading (and resumes the resolving
// phase a nested one interrupted).
func (m *Meter) Finish() { m.end(true) }

// end ends the running phase; resume: go back to the outer phase, if any
// (not when a phase is replaced by the next, as planning by copying).
func (m *Meter) end(resume bool) {
	m.mu.Lock()
	if !m.runningOn {
		m.mu.Unlock()
		return
	}
	m.stopTicker()
	m.mu.Unlock()
	m.show(true, true)
	if !resume {
		return
	}
	m.mu.Lock()
	outer := m.outer
	m.outer = nil
	if outer != nil {
		m.c, m.t, m.extra, m.sent, m.inFlight, m.start = outer.c, outer.t, outer.extra, outer.sent, 0, outer.start
	}
	m.mu.Unlock()
	if outer != nil {
		m.show(false, false)
		m.startTicker()
		return
	}
	if m.term != nil {
		m.term.setStatus("")
	}
}

// counts reads the meter.
func (m *Meter) counts() counts {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.read()
}

func (m *Meter) read() counts {
	var bt transfer.BlobTally
	if m.t != nil {
		bt = m.t.Counts()
	}
	m.c.Blobs, m.c.Bytes, m.c.BlobsMoved, m.c.BlobsFound = bt.Blobs, bt.Bytes, bt.BlobsMoved, bt.BlobsFound
	m.c.BytesMoved, m.c.BytesFound, m.c.Reused, m.c.TotalKnown = bt.BytesMoved, bt.BytesFound, bt.Reused, bt.Known
	c := m.c
	// Done never goes back: a failed attempt's bytes taken back are not
	// shown as lost, the retry catches up.
	done := m.sent + bt.BytesFound
	if done < m.c.Done {
		done = m.c.Done
	}
	m.c.Done = done
	c.Done = done
	if !bt.Known {
		c.Bytes = max(m.extra+bt.BytesFound, 0)
	}
	if c.Bytes < done {
		c.Bytes = done
	}
	c.Elapsed = time.Since(m.start)
	if s := c.Elapsed.Seconds(); s > 0.2 {
		c.RateBytesPerSec = float64(m.sent) / s
	}
	if c.RateBytesPerSec > 0 && c.Bytes > done {
		c.ETA = time.Duration(float64(c.Bytes-done) / c.RateBytesPerSec * float64(time.Second)).Round(time.Second)
	}
	if eta := m.blobETA(c); eta > c.ETA {
		c.ETA = eta
	}
	return c
}

// blobETA is the time the blobs not yet started need at the rate blobs
// have been handled so far. Large blobs go first, so the bytes are mostly
// in long before the many small blobs are, and their requests, not their
// bytes, then set the pace: an ETA from bytes alone says "0s" for that
// whole tail. Blobs in flight are left to the bytes' estimate.
func (m *Meter) blobETA(c counts) time.Duration {
	handled := c.BlobsMoved + c.BlobsFound
	queued := c.Blobs - handled - m.inFlight
	if !c.TotalKnown || handled == 0 || queued <= 0 || c.Elapsed < time.Second {
		return 0
	}
	perBlob := c.Elapsed.Seconds() / float64(handled)
	return time.Duration(float64(queued) * perBlob * float64(time.Second)).Round(time.Second)
}

// show draws a reading: the bar on every event and tick and, final, the
// phase's last frame; a line on each tick (line mode) and at the end.
func (m *Meter) show(tick, final bool) {
	m.mu.Lock()
	if m.c.Phase == "" {
		m.mu.Unlock()
		return
	}
	c := m.read()
	c.FinalReport = final
	if final && c.RateBytesPerSec == 0 && c.Elapsed > 0 {
		// A short phase's rate is still its rate.
		c.RateBytesPerSec = float64(m.sent) / c.Elapsed.Seconds()
	}
	m.mu.Unlock()
	if m.observer != nil {
		m.observer(c)
	}
	if m.term != nil {
		frame := c
		if final {
			// The phase's last frame shows its final figures, bar and
			// rate: else the frame drawn last (up to a redraw interval
			// old, 0% for a short phase) stays up, and the log line
			// below draws it again under the phase's 100%.
			frame.FinalReport, frame.ETA = false, 0
		}
		m.term.setStatus(frame.String())
	}
	if m.log != nil && (final || m.term == nil && tick) {
		m.log.Info(c.String())
	}
}

// String is the status line: phase, images, bytes in IEC units, rate, ETA.
func (c counts) String() string {
	var b strings.Builder
	b.WriteString(c.Phase)
	if c.Images > 0 {
		fmt.Fprintf(&b, " %d/%d images", c.ImagesDone, c.Images)
	}
	if c.Bytes == 0 && c.Done == 0 && c.Blobs == 0 {
		// Nothing counted in bytes (resolving, or nothing to move).
		if c.FinalReport {
			fmt.Fprintf(&b, ", took %s", c.Elapsed.Round(10*time.Millisecond))
		} else {
			fmt.Fprintf(&b, ", %s", c.Elapsed.Round(time.Second))
		}
		if c.Retries > 0 {
			fmt.Fprintf(&b, ", %d retries", c.Retries)
		}
		if c.Failed > 0 {
			fmt.Fprintf(&b, ", %d failed", c.Failed)
		}
		return b.String()
	}
	if c.Bytes > 0 {
		pct := min(float64(c.Done)*100/float64(c.Bytes), 100)
		if !c.FinalReport {
			const width = 24
			fill := int(pct / 100 * width)
			fmt.Fprintf(&b, " [%s%s]", strings.Repeat("=", fill), strings.Repeat(" ", width-fill))
		}
		fmt.Fprintf(&b, " %3.0f%%", pct)
	}
	fmt.Fprintf(&b, " %s/%s", HumanBytes(c.Done), HumanBytes(c.Bytes))
	if c.Blobs > 0 && (c.Images > 0 || c.BlobsMoved+c.BlobsFound > 0) {
		// Phases without images (writing, checking an archive) count
		// bytes only.
		fmt.Fprintf(&b, ", blobs %d/%d", c.BlobsMoved+c.BlobsFound, c.Blobs)
	}
	fmt.Fprintf(&b, ", %s/s", HumanBytes(int64(c.RateBytesPerSec)))
	if !c.FinalReport && c.ETA > 0 {
		fmt.Fprintf(&b, ", ETA %s", c.ETA)
	}
	if c.FinalReport {
		fmt.Fprintf(&b, ", took %s", c.Elapsed.Round(100*time.Millisecond))
	}
	if c.Reused > 0 {
		fmt.Fprintf(&b, ", %d reused", c.Reused)
	}
	if c.Retries > 0 {
		fmt.Fprintf(&b, ", %d retries", c.Retries)
	}
	if c.Failed > 0 {
		fmt.Fprintf(&b, ", %d failed", c.Failed)
	}
	return b.String()
}

// Terminal is stderr shared by log lines and a status line kept at the
// bottom: a log line clears the status, prints, and redraws it.
type Terminal struct {
	mu     sync.Mutex
	w      io.Writer
	status string
}

// NewTerminal wraps a terminal's writer.
func NewTerminal(w io.Writer) *Terminal { return &Terminal{w: w} }

func (t *Terminal) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.status != "" {
		io.WriteString(t.w, "\r\033[K")
	}
	n, err := t.w.Write(p)
	if t.status != "" {
		io.WriteString(t.w, t.status)
	}
	return n, err
}

// setStatus replaces the status line ("" clears it).
func (t *Terminal) setStatus(s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	io.WriteString(t.w, "\r\033[K"+s)
	t.status = s
}

// ArchiveProgress adapts p to archive.WriteOptions.Progress and the
// archive reader's checks: each call reports the bytes done so far.
func ArchiveProgress(p transfer.Progress) func(done, total int64) {
	var mu sync.Mutex
	var last int64
	return func(done, _ int64) {
		mu.Lock()
		d := done - last
		last = done
		mu.Unlock()
		p.Add(d)
	}
}

// HumanBytes formats n in binary (IEC) units.
func HumanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
