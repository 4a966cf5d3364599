//go:build linux

package mirror

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/archive"
)

// TestRecordOnFullDisk: a workspace record that does not fit leaves the
// record it would replace as it was, no temporary file, and an error
// naming the record and the bytes it needs.
func TestRecordOnFullDisk(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ws")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("cannot mount a small tmpfs to fill up (%v): this test needs root (CAP_SYS_ADMIN)", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	ws := workspace{dir}
	rec := archiveRecord{Seq: 1, ID: "a"}
	if err := ws.saveArchive(rec); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(ws.path("archives", "a.json"))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2000; i++ { // a record of every blob of a big archive
		rec.Blobs = append(rec.Blobs, digest.FromString(strings.Repeat("x", i)))
	}
	err = ws.saveArchive(rec)
	var ns *archive.NoSpaceError
	if !errors.As(err, &ns) || ns.Path != ws.path("archives", "a.json") || ns.Need < 2000*71 {
		t.Fatalf("saving a record on a full disk: %v, want a NoSpaceError naming the record and its size", err)
	}
	if !strings.Contains(err.Error(), "a.json") || !strings.Contains(err.Error(), "KiB is still needed") {
		t.Errorf("error does not say where and how much: %v", err)
	}
	after, _ := os.ReadFile(ws.path("archives", "a.json"))
	if string(after) != string(before) {
		t.Error("the record was damaged by the failed write")
	}
	entries, _ := os.ReadDir(ws.path("archives"))
	if len(entries) != 1 {
		t.Errorf("files left beside the record: %v", entries)
	}
}
