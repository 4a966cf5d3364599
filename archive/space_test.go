package archive

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
)

// TestNoSpace: a full disk (ENOSPC) and an exhausted quota (EDQUOT), however
// wrapped, become a NoSpaceError naming the path and what is still needed;
// other errors, and one already converted, pass through unchanged.
func TestNoSpace(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT} {
		err := NoSpace(fmt.Errorf("writing chunk: %w", errno), "/data/out/mirror_000001.tar", 3*giB, true)
		var ns *NoSpaceError
		if !errors.As(err, &ns) || !errors.Is(err, errno) {
			t.Fatalf("%v: got %v, want a NoSpaceError wrapping it", errno, err)
		}
		wantErr(t, err, "no space left on the device of /data/out/mirror_000001.tar", "at least 3 GiB is still needed there", "run again")
		if again := NoSpace(fmt.Errorf("again: %w", err), "/elsewhere", 1, false); !errors.As(again, &ns) || ns.Path != "/data/out/mirror_000001.tar" {
			t.Errorf("a NoSpaceError converted again names %q, want the first path", ns.Path)
		}
	}
	other := errors.New("permission denied")
	if err := NoSpace(other, "/x", 1, false); err != other {
		t.Errorf("another error became %v", err)
	}
	if err := NoSpace(nil, "/x", 1, false); err != nil {
		t.Errorf("no error became %v", err)
	}
}
