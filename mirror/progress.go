package mirror

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/gapmirror/gapmirror/imageset"
)

// Progress receives events while a copy runs. Implementations must be safe
// for concurrent use.
type Progress interface {
	Start(images int)
	// AddTotal grows (or shrinks) the number of bytes expected to move.
	AddTotal(n int64)
	// Add reports n bytes moved (negative: a failed attempt is taken back).
	Add(n int64)
	ImageDone(img imageset.Image, err error)
	Finish()
}

type nopProgress struct{}

func (nopProgress) Start(int)                       {}
func (nopProgress) AddTotal(int64)                  {}
func (nopProgress) Add(int64)                       {}
func (nopProgress) ImageDone(imageset.Image, error) {}
func (nopProgress) Finish()                         {}

// NewBarProgress shows a byte-based bar with rate and ETA, for terminals.
func NewBarProgress(w io.Writer, what string) Progress {
	return &barProgress{w: w, what: what}
}

type barProgress struct {
	w      io.Writer
	what   string
	bar    *progressbar.ProgressBar
	total  atomic.Int64
	images int
	done   atomic.Int64
}

func (p *barProgress) Start(images int) {
	p.images = images
	p.bar = progressbar.NewOptions64(-1,
		progressbar.OptionSetWriter(p.w),
		progressbar.OptionShowBytes(true),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionShowCount(),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionSetDescription(fmt.Sprintf("%s 0/%d images", p.what, images)),
		progressbar.OptionClearOnFinish(),
	)
}

func (p *barProgress) AddTotal(n int64) {
	p.bar.ChangeMax64(p.total.Add(n))
}

func (p *barProgress) Add(n int64) { p.bar.Add64(n) }

func (p *barProgress) ImageDone(imageset.Image, error) {
	p.bar.Describe(fmt.Sprintf("%s %d/%d images", p.what, p.done.Add(1), p.images))
}

func (p *barProgress) Finish() { p.bar.Finish() }

// NewLineProgress prints a plain line every interval, for logs and pipes.
func NewLineProgress(w io.Writer, what string, interval time.Duration) Progress {
	return &lineProgress{w: w, what: what, interval: interval}
}

type lineProgress struct {
	w        io.Writer
	what     string
	interval time.Duration
	images   int
	total    atomic.Int64
	moved    atomic.Int64
	done     atomic.Int64
	failed   atomic.Int64
	start    time.Time
	stop     chan struct{}
	wg       sync.WaitGroup
}

func (p *lineProgress) Start(images int) {
	p.images, p.start, p.stop = images, time.Now(), make(chan struct{})
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(p.interval)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.line()
			}
		}
	}()
}

func (p *lineProgress) line() {
	el := time.Since(p.start).Seconds()
	moved := p.moved.Load()
	fmt.Fprintf(p.w, "%s: %d/%d images, %s of %s, %.1f MiB/s\n", p.what, p.done.Load(), p.images,
		HumanBytes(moved), HumanBytes(p.total.Load()), float64(moved)/(1<<20)/max(el, 0.001))
}

func (p *lineProgress) AddTotal(n int64) { p.total.Add(n) }
func (p *lineProgress) Add(n int64)      { p.moved.Add(n) }
func (p *lineProgress) ImageDone(_ imageset.Image, err error) {
	p.done.Add(1)
	if err != nil {
		p.failed.Add(1)
	}
}
func (p *lineProgress) Finish() {
	close(p.stop)
	p.wg.Wait()
}

// HumanBytes formats n in binary units.
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
