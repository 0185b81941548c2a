package witness

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// State file layout, 20 bytes, little-endian:
//
//	offset size field
//	0      4    magic    "SBWE"
//	4      4    version  1
//	8      8    epoch    the highest epoch ever granted
//	16     4    crc32c   over bytes 0..16
//
// It is rewritten whole (temp file, fsync, rename, directory fsync), so a
// crash leaves either the old record or the new one, never a mix.
const (
	// StateFileName is the epoch file's name inside the state directory.
	StateFileName = "witness.epoch"
	// stateTempName is where a new record is written before the rename. A
	// leftover one after a crash is harmless and is truncated by the next
	// write.
	stateTempName = StateFileName + ".tmp"

	stateMagic   = "SBWE"
	stateVersion = 1
	stateLen     = 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// epochStore persists the highest epoch. The file store is the real one;
// tests inject stores that fail or count.
type epochStore interface {
	// load returns the persisted epoch and found=true, or found=false when
	// nothing was ever persisted (a fresh directory).
	load() (epoch uint64, found bool, err error)
	// store durably records epoch; when it returns nil, a crash at any
	// later moment still loads epoch (or a later one).
	store(epoch uint64) error
}

// encodeState returns the state record for epoch.
func encodeState(epoch uint64) [stateLen]byte {
	var b [stateLen]byte
	copy(b[:4], stateMagic)
	binary.LittleEndian.PutUint32(b[4:], stateVersion)
	binary.LittleEndian.PutUint64(b[8:], epoch)
	binary.LittleEndian.PutUint32(b[16:], crc32.Checksum(b[:16], castagnoli))
	return b
}

// decodeState parses a state record; every failure wraps ErrCorruptState.
func decodeState(b []byte) (uint64, error) {
	switch {
	case len(b) != stateLen:
		return 0, fmt.Errorf("%w: %d bytes, want %d", ErrCorruptState, len(b), stateLen)
	case string(b[:4]) != stateMagic:
		return 0, fmt.Errorf("%w: bad magic %q", ErrCorruptState, b[:4])
	case binary.LittleEndian.Uint32(b[4:]) != stateVersion:
		return 0, fmt.Errorf("%w: unknown version %d", ErrCorruptState, binary.LittleEndian.Uint32(b[4:]))
	}
	if got, want := crc32.Checksum(b[:16], castagnoli), binary.LittleEndian.Uint32(b[16:]); got != want {
		return 0, fmt.Errorf("%w: checksum %#08x, record says %#08x", ErrCorruptState, got, want)
	}
	return binary.LittleEndian.Uint64(b[8:]), nil
}

// fileStore keeps the epoch in dir/StateFileName.
type fileStore struct {
	dir string
}

var _ epochStore = (*fileStore)(nil)

func (f *fileStore) load() (uint64, bool, error) {
	file, err := os.Open(filepath.Join(f.dir, StateFileName))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("witness: open state: %w", err)
	}
	defer file.Close()
	// Read one byte more than a record so an oversized file is caught
	// without reading an arbitrarily large one.
	b, err := io.ReadAll(io.LimitReader(file, stateLen+1))
	if err != nil {
		return 0, false, fmt.Errorf("witness: read state: %w", err)
	}
	epoch, err := decodeState(b)
	if err != nil {
		return 0, false, fmt.Errorf("%s: %w", filepath.Join(f.dir, StateFileName), err)
	}
	return epoch, true, nil
}

// store writes the record to a temp file, fsyncs it, renames it over the
// state file and fsyncs the directory, so the rename itself is durable.
// Skipping the directory fsync would let a power cut bring back the old
// record after the grant was sent.
func (f *fileStore) store(epoch uint64) error {
	tmp := filepath.Join(f.dir, stateTempName)
	file, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrPersist, err)
	}
	rec := encodeState(epoch)
	if _, err := file.Write(rec[:]); err != nil {
		file.Close()
		return fmt.Errorf("%w: write: %v", ErrPersist, err)
	}
	if err := file.Sync(); err != nil {
		file.Close()
		return fmt.Errorf("%w: fsync: %v", ErrPersist, err)
	}
	if err := file.Close(); err != nil {
		return fmt.Errorf("%w: close: %v", ErrPersist, err)
	}
	if err := os.Rename(tmp, filepath.Join(f.dir, StateFileName)); err != nil {
		return fmt.Errorf("%w: rename: %v", ErrPersist, err)
	}
	dir, err := os.Open(f.dir)
	if err != nil {
		return fmt.Errorf("%w: open dir: %v", ErrPersist, err)
	}
	defer dir.Close()
	if err := dir.Sync(); err != nil {
		return fmt.Errorf("%w: fsync dir: %v", ErrPersist, err)
	}
	return nil
}
