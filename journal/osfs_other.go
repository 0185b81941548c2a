//go:build !linux

package journal

import "os"

func datasync(f *os.File) error { return f.Sync() }

func preallocate(f *os.File, sizeBytes int64) error { return extendTo(f, sizeBytes) }
