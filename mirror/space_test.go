package mirror

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/archive"
	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/transfer"
	"github.com/gapmirror/gapmirror/workspace"
)

// TestRecordOnFullDisk: a workspace record that does not fit leaves the
// record it would replace as it was, no temporary file, and an error
// naming the record and the bytes it needs: on a real full disk (a small
// tmpfs, with root) and on an injected one (archive.SetWriteFault).
func TestRecordOnFullDisk(t *testing.T) {
	for _, disk := range []string{"tmpfs", "injected"} {
		t.Run(disk, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "ws")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			ws := workspace.Workspace{Dir: dir}
			rec := workspace.ArchiveRecord{Seq: 1, ID: "a"}
			var fill func()
			switch disk {
			case "tmpfs":
				if err := mountTmpfs(dir, "64k"); err != nil {
					t.Skipf("cannot mount a small tmpfs to fill up (%v): this case needs root (CAP_SYS_ADMIN)", err)
				}
				t.Cleanup(func() { _ = unmount(dir) })
				fill = func() {}
			case "injected":
				// Room for the first record, not for a big one.
				fill = func() {
					t.Cleanup(archive.SetWriteFault(func(path string, n int) error {
						if strings.HasPrefix(path, dir+string(filepath.Separator)) && n > 64<<10 {
							return syscall.ENOSPC
						}
						return nil
					}))
				}
			}
			if err := ws.SaveArchive(rec); err != nil {
				t.Fatal(err)
			}
			before, err := os.ReadFile(ws.Path("archives", "a.json"))
			if err != nil {
				t.Fatal(err)
			}
			fill()
			for i := 0; i < 2000; i++ { // a record of every blob of a big archive
				rec.Blobs = append(rec.Blobs, digest.FromString(strings.Repeat("x", i)))
			}
			err = ws.SaveArchive(rec)
			var ns *archive.NoSpaceError
			if !errors.As(err, &ns) || ns.Path != ws.Path("archives", "a.json") || ns.Need < 2000*71 {
				t.Fatalf("saving a record on a full disk: %v, want a NoSpaceError naming the record and its size", err)
			}
			if !strings.Contains(err.Error(), "a.json") || !strings.Contains(err.Error(), "KiB is still needed") {
				t.Errorf("error does not say where and how much: %v", err)
			}
			after, _ := os.ReadFile(ws.Path("archives", "a.json"))
			if string(after) != string(before) {
				t.Error("the record was damaged by the failed write")
			}
			entries, _ := os.ReadDir(ws.Path("archives"))
			if len(entries) != 1 {
				t.Errorf("files left beside the record: %v", entries)
			}
		})
	}
}

// TestNoSpaceNamesTheDiskThatFilled: the images that failed for want of
// space are summed up per disk, the archive directory's or the store's,
// each named with the bytes its blobs still need (a blob failing for two
// images counted once), in the order the disks filled.
func TestNoSpaceNamesTheDiskThatFilled(t *testing.T) {
	archiveDir, store := "/data/out", "/data/out/cache/store" // the store may lie inside the archive directory
	enospc := &os.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}
	fail := func(path string, need int64, what string) transfer.Failure {
		return transfer.Failure{Image: imageset.Image{Destination: what}, Err: fmt.Errorf("image %s: %w", what, archive.NoSpace(fmt.Errorf("writing blob %s: %w", what, enospc), path, need, true))}
	}
	res := &transfer.Result{Failed: []transfer.Failure{
		fail(store+"/blobs/sha256/aa", 2048, "manifest-a"),
		fail(archiveDir, 1<<20, "layer-b"),
		fail(archiveDir, 1<<20, "layer-b"), // the same blob, for another image
		fail(store+"/blobs/sha256/cc", 1024, "manifest-c"),
		{Image: imageset.Image{Destination: "d"}, Err: errors.New("manifest unknown")},
	}}
	err := transfer.NoSpace(res, archiveDir, store)
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 2 ||
		!strings.HasPrefix(lines[0], "no space left on the device of "+store+": at least 3 KiB is still needed there") ||
		!strings.HasPrefix(lines[1], "no space left on the device of "+archiveDir+": at least 1 MiB is still needed there") {
		t.Errorf("error:\n%v", err)
	}
	var ns *archive.NoSpaceError
	if !errors.As(err, &ns) || !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("the error is not a NoSpaceError wrapping ENOSPC: %#v", err)
	}
	if err := transfer.NoSpace(&transfer.Result{Failed: res.Failed[4:]}, archiveDir, store); err != nil {
		t.Errorf("no image failed for space, yet: %v", err)
	}
}
