package journal

import (
	"os"
	"sort"
)

// OSFS is the real file system.
type OSFS struct{}

var _ FS = OSFS{}

// OpenFile implements FS.
func (OSFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &osFile{File: f}, nil
}

// Remove implements FS.
func (OSFS) Remove(name string) error { return os.Remove(name) }

// Rename implements FS.
func (OSFS) Rename(oldName, newName string) error { return os.Rename(oldName, newName) }

// MkdirAll implements FS.
func (OSFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }

// ReadDir implements FS.
func (OSFS) ReadDir(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names, nil
}

// SyncDir implements FS: fsync on the directory makes entry changes durable.
func (OSFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if closeErr := d.Close(); err == nil {
		err = closeErr
	}
	return err
}

type osFile struct {
	*os.File
}

var _ File = (*osFile)(nil)

func (f *osFile) Size() (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// Sync uses fdatasync where the platform has it (osfs_linux.go): the
// journal never depends on mtime, so flushing it would only add latency.
func (f *osFile) Sync() error { return datasync(f.File) }

func (f *osFile) Preallocate(sizeBytes int64) error { return preallocate(f.File, sizeBytes) }

// extendTo is the portable preallocation: a sparse extension that reads as
// zeros but reserves no blocks.
func extendTo(f *os.File, sizeBytes int64) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() >= sizeBytes {
		return nil
	}
	return f.Truncate(sizeBytes)
}
