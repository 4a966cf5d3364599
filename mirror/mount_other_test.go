//go:build !linux

package mirror

import "errors"

func mountTmpfs(dir, size string) error { return errors.New("tmpfs is Linux only") }

func unmount(dir string) error { return nil }
