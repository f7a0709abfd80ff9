package objstore

import (
	"os"
	"syscall"
)

// datasync makes f's data durable without its metadata (mtime), which is all
// a write into preallocated space needs.
func datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
