package archive

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to start writing a staged blob to disk now,
// without waiting, so that the sync at Commit finds little left to flush:
// the disk works while the next blobs download.
func (s *Staging) startWriteback(f *os.File, off, n int64) {
	_ = unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE) // advice only: Commit syncs
}
