package journal

import (
	"io"
	"os"
)

// FS is the file system the journal runs on. OSFS is the real one; MemFS
// models a disk that loses unsynced writes, so that tests and the simulator
// can crash it deterministically. Implementations must be safe for use by
// two goroutines at once (the appender and the syncer).
type FS interface {
	// OpenFile opens name with os.O_* flags, like os.OpenFile.
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	Remove(name string) error
	// Rename replaces newName atomically; both names are in the same directory.
	Rename(oldName, newName string) error
	// ReadDir returns the base names of the entries of dir, sorted.
	ReadDir(dir string) ([]string, error)
	MkdirAll(dir string, perm os.FileMode) error
	// SyncDir makes the creations, removals and renames in dir durable.
	SyncDir(dir string) error
}

// File is an open file of an FS.
type File interface {
	io.Writer
	io.WriterAt
	io.ReaderAt
	// Sync makes the file's data durable (fdatasync where available).
	Sync() error
	Truncate(sizeBytes int64) error
	// Preallocate makes the file at least sizeBytes long, zero-filled, with
	// the blocks reserved where the platform allows it. It never shrinks.
	Preallocate(sizeBytes int64) error
	Size() (int64, error)
	Close() error
}
