package archive

import (
	"io"
	"os"
	"sync/atomic"
)

// A WriteFault decides whether a write of n bytes into the file at path
// fails, and with what error (syscall.ENOSPC for a full disk): it lets the
// tests fill the disk of a store, an archive or a workspace without
// mounting a small file system, which needs root. Normal runs have none.
type WriteFault func(path string, n int) error

var writeFault atomic.Pointer[WriteFault]

// SetWriteFault makes every write of a store blob, an archive chunk or a
// workspace record (each file gapmirror writes through FileWriter or
// writeAt) meet f first, until restore is called. For tests.
func SetWriteFault(f WriteFault) (restore func()) {
	writeFault.Store(&f)
	return func() { writeFault.Store(nil) }
}

// faulted is the installed WriteFault's error for a write of n bytes into
// f, as the *os.PathError a real write returns, or nil.
func faulted(f *os.File, n int) error {
	if fault := writeFault.Load(); fault != nil && *fault != nil {
		if err := (*fault)(f.Name(), n); err != nil {
			return &os.PathError{Op: "write", Path: f.Name(), Err: err}
		}
	}
	return nil
}

// FileWriter is f as an io.Writer whose writes meet an installed WriteFault.
func FileWriter(f *os.File) io.Writer { return fileWriter{f} }

type fileWriter struct{ f *os.File }

func (w fileWriter) Write(p []byte) (int, error) {
	if err := faulted(w.f, len(p)); err != nil {
		return 0, err
	}
	return w.f.Write(p)
}

// writeAt is f.WriteAt meeting an installed WriteFault first.
func writeAt(f *os.File, p []byte, off int64) (int, error) {
	if err := faulted(f, len(p)); err != nil {
		return 0, err
	}
	return f.WriteAt(p, off)
}
