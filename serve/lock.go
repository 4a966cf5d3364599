//go:build unix

package serve

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockRoot takes the root's lock or says who holds it.
func lockRoot(root string) (unlock func(), err error) {
	path := filepath.Join(root, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s is in use by another gapmirror serve or serve gc (it holds %s): stop it first, or use another --root", root, path)
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return func() { _ = f.Close() }, nil
}
