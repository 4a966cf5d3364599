package archive

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// NoSpaceError says that a file system filled up: where, and how many more
// bytes the write needed. Whatever was half-written has been removed, so
// the next run after freeing space starts that write again.
type NoSpaceError struct {
	// Path is the file or directory being written.
	Path string
	// Need is how many more bytes the write needs (0: unknown); AtLeast
	// says it is a lower bound.
	Need    int64
	AtLeast bool
	Err     error
}

func (e *NoSpaceError) Error() string {
	need := "more space"
	if e.Need > 0 {
		need = humanSize(e.Need)
		if e.AtLeast {
			need = "at least " + need
		}
	}
	return fmt.Sprintf("no space left on the device of %s: %s is still needed there; free that much (or choose a directory with room) and run again: the partly written files were removed and what was complete is reused",
		e.Path, need)
}

func (e *NoSpaceError) Unwrap() error { return e.Err }

// NoSpace returns err as a *NoSpaceError naming path and need when it is a
// full-disk or over-quota error, else err unchanged.
func NoSpace(err error, path string, need int64, atLeast bool) error {
	var ns *NoSpaceError
	if err == nil || errors.As(err, &ns) || !(errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)) {
		return err
	}
	return &NoSpaceError{Path: path, Need: need, AtLeast: atLeast, Err: err}
}

// WriteFileAtomic replaces path with data, or leaves it as it was, and
// syncs it before and after the rename: a record or an archive's
// signature is whole after a crash, or not there.
func WriteFileAtomic(path string, data []byte) error {
	return NoSpace(writeFile(path, data, true), path, int64(len(data)), false)
}

// ReplaceFile replaces path with data through a rename, without the
// fsyncs: for a file a crash may leave empty or cut short because its
// reader checks it (the store's links to archived blobs, one per blob a
// mirror-to-disk moves, where the fsyncs took 3 s of a 23 s run).
func ReplaceFile(path string, data []byte) error {
	return NoSpace(writeFile(path, data, false), path, int64(len(data)), false)
}

func writeFile(path string, data []byte, durable bool) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := FileWriter(tmp).Write(data); err != nil {
		tmp.Close()
		return err
	}
	if durable {
		if err := tmp.Sync(); err != nil {
			tmp.Close()
			return err
		}
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil || !durable {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
