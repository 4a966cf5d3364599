package transfer

import (
	"sync"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/gapmirror/gapmirror/imageset"
)

// RetryReporter hears of every retry: a Progress, or whoever counts the
// retries of requests made outside a phase (see WithProgress).
type RetryReporter interface {
	// Retry says an operation failed with err and is tried again after wait.
	Retry(what string, err error, attempt int, wait time.Duration)
}

// Progress receives events while a trip runs. Implementations must be safe
// for concurrent use.
type Progress interface {
	// Phase starts a phase (resolving, copying, writing the archive,
	// checking an archive) with what it will handle, as far as known.
	Phase(name string, images int, total Totals)
	// Sending says a blob's bytes start to move; a blob the phase's totals
	// did not include (without totals: every blob) grows them.
	Sending(desc ocispec.Descriptor)
	// Sent ends the transfer Sending began: its blob moved (ok) or not.
	Sent(desc ocispec.Descriptor, ok bool)
	// Add reports n bytes moved (negative: a failed attempt is taken back).
	Add(n int64)
	// Blob says how one blob reference of img reached the destination.
	Blob(img imageset.Image, desc ocispec.Descriptor, how BlobOutcome)
	RetryReporter
	// ImageDone says img is handled (in the planning phase: planned).
	ImageDone(img imageset.Image, skipped bool, err error)
	// Finish ends the phase.
	Finish()
}

// BlobOutcome is how a blob reference was satisfied.
type BlobOutcome int

const (
	// BlobMoved: its bytes were sent.
	BlobMoved BlobOutcome = iota
	// BlobFound: the destination had it, or made it available (a mount).
	BlobFound
)

// Totals are the blobs and bytes a phase handles, known before it starts.
type Totals struct {
	Blobs int64
	Bytes int64
	// Of maps an image's destination to its blobs, so that an image found
	// complete at the destination moves the count by its blobs.
	Of map[string][]ocispec.Descriptor
}

// TotalsOf counts the distinct blobs of the images in of.
func TotalsOf(of map[string][]ocispec.Descriptor) Totals {
	t := Totals{Of: of}
	seen := map[digest.Digest]bool{}
	for _, ds := range of {
		for _, d := range ds {
			if !seen[d.Digest] {
				seen[d.Digest] = true
				t.Blobs++
				t.Bytes += d.Size
			}
		}
	}
	return t
}

// Tally sorts blob references into distinct blobs moved or found and
// further references reused; the copy's Result and the Meter keep one each,
// fed the same events, so log lines and summary show the same numbers.
type Tally struct {
	mu      sync.Mutex
	planned bool
	of      map[string][]ocispec.Descriptor
	inPlan  map[digest.Digest]bool
	seen    map[digest.Digest]bool
	// Blobs and Bytes: the set's, grown by blobs the plan did not know.
	Blobs, Bytes           int64
	BlobsMoved, BlobsFound int64
	BytesMoved, BytesFound int64
	Reused                 int64
	// unread counts images found at the destination whose blobs were not
	// read (the plan asked the destination, not the source).
	unread int
}

// NewTally counts against the totals t the plan knows (none: they grow as
// blobs are met).
func NewTally(t Totals) *Tally {
	ty := &Tally{planned: t.Blobs > 0 || t.Of != nil, of: t.Of, inPlan: map[digest.Digest]bool{}, seen: map[digest.Digest]bool{}, Blobs: t.Blobs, Bytes: t.Bytes}
	for _, ds := range t.Of {
		for _, d := range ds {
			ty.inPlan[d.Digest] = true
		}
	}
	return ty
}

// Blob counts one reference; first: the first of its blob.
func (t *Tally) Blob(desc ocispec.Descriptor, how BlobOutcome) (first bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.seen[desc.Digest] {
		t.Reused++
		return false
	}
	t.seen[desc.Digest] = true
	if !t.inPlan[desc.Digest] {
		t.Blobs++
		t.Bytes += desc.Size
	}
	if how == BlobMoved {
		t.BlobsMoved++
		t.BytesMoved += desc.Size
	} else {
		t.BlobsFound++
		t.BytesFound += desc.Size
	}
	return true
}

// BlobTally is a copy's blob figures: BlobsMoved + BlobsFound = Blobs (the
// distinct blobs of the set, when the copy knew them up front, else those
// met), bytes likewise; Reused counts further references to those blobs.
type BlobTally struct {
	Blobs, Bytes           int64
	BlobsMoved, BlobsFound int64
	BytesMoved, BytesFound int64
	Reused                 int64
	// Known: Blobs and Bytes came from the plan before the copy.
	Known bool
	// Unread counts images already at the destination whose blobs were
	// not read: Blobs and Bytes are then those of the images to copy.
	Unread int
}

// Add sums u into t: the tally of two copies as one.
func (t *BlobTally) Add(u BlobTally) {
	t.Blobs, t.Bytes, t.Reused, t.Unread = t.Blobs+u.Blobs, t.Bytes+u.Bytes, t.Reused+u.Reused, t.Unread+u.Unread
	t.BlobsMoved, t.BlobsFound = t.BlobsMoved+u.BlobsMoved, t.BlobsFound+u.BlobsFound
	t.BytesMoved, t.BytesFound = t.BytesMoved+u.BytesMoved, t.BytesFound+u.BytesFound
	t.Known = t.Known && u.Known
}

// Planned reports whether the totals came from a plan, before the copy.
func (t *Tally) Planned() bool { return t.planned }

// Counts is a reading of the tally.
func (t *Tally) Counts() BlobTally {
	t.mu.Lock()
	defer t.mu.Unlock()
	return BlobTally{Blobs: t.Blobs, Bytes: t.Bytes, BlobsMoved: t.BlobsMoved, BlobsFound: t.BlobsFound,
		BytesMoved: t.BytesMoved, BytesFound: t.BytesFound, Reused: t.Reused, Known: t.planned, Unread: t.unread}
}

// Skipped counts the blobs of an image the destination has as found.
func (t *Tally) Skipped(img imageset.Image) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.of[img.Destination]) == 0 {
		t.unread++
	}
	for _, d := range t.of[img.Destination] {
		if !t.seen[d.Digest] {
			t.seen[d.Digest] = true
			t.BlobsFound++
			t.BytesFound += d.Size
		}
	}
}

// counted is the copier's hook for each blob reference it settles.
func (c *copier) counted(img imageset.Image, desc ocispec.Descriptor, how BlobOutcome) {
	c.tally.Blob(desc, how)
	c.opts.Progress.Blob(img, desc, how)
}

// settled is the copier's hook when an image is done.
func (c *copier) settled(img imageset.Image, skipped bool, err error) {
	if skipped && err == nil {
		c.tally.Skipped(img)
	}
	c.opts.Progress.ImageDone(img, skipped, err)
}

type nopProgress struct{}

func (nopProgress) Phase(string, int, Totals)                            {}
func (nopProgress) Sending(ocispec.Descriptor)                           {}
func (nopProgress) Sent(ocispec.Descriptor, bool)                        {}
func (nopProgress) Add(int64)                                            {}
func (nopProgress) Blob(imageset.Image, ocispec.Descriptor, BlobOutcome) {}
func (nopProgress) Retry(string, error, int, time.Duration)              {}
func (nopProgress) ImageDone(imageset.Image, bool, error)                {}
func (nopProgress) Finish()                                              {}
