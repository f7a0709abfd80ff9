//go:build !linux

package objstore

import "os"

func datasync(f *os.File) error { return f.Sync() }
