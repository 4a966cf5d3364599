package mirror

import "syscall"

func mountTmpfs(dir, size string) error {
	return syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size)
}

func unmount(dir string) error { return syscall.Unmount(dir, syscall.MNT_DETACH) }
