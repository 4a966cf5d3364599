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

// WriteFileAtomic replaces path with data, or leaves it as it was.
func WriteFileAtomic(path string, data []byte) error {
	return NoSpace(writeFile(path, data), path, int64(len(data)), false)
}

func writeFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := FileWriter(tmp).Write(data); err != nil {
		tmp.Close()
		return err
	}
	// Synced before and after the rename: a record or an archive's
	// signature is whole after a crash, or not there.
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
