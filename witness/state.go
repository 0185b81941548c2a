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

	"github.com/seqbus/seqbus/arbiter"
)

// State file layout, version 3, 76 bytes, little-endian:
//
//	offset size field
//	0      4    magic          "SBWE"
//	4      4    version        3
//	8      8    epoch          the highest epoch ever granted
//	16     8    inSyncVersion  the in-sync set's version
//	24     4    lastHolder     the holder of epoch (0: none known)
//	28     4    nMembers       0..8
//	32     32   members        8 x uint32, sorted, the first nMembers used,
//	                           the rest 0
//	64     8    history        the cluster's pinned history id (0: none yet)
//	72     4    crc32c         over bytes 0..72
//
// Version 2 (68 bytes: the same up to the members, crc32c at 64 over
// 0..64) is read with no history pinned: the next granted request that
// names one pins it. Version 1 (20 bytes: magic, version 1, epoch, crc32c
// over 0..16) is still read, as an epoch with no in-sync set and no last
// holder, so a witness directory written before the in-sync set upgrades
// in place: after the restart quarantine anyone may acquire, as before.
// Only version 3 is written.
//
// It is rewritten whole (temp file, fsync, rename, directory fsync), so a
// crash leaves either the old record or the new one, never a mix.
const (
	// StateFileName is the state file's name inside the state directory.
	// The name predates the in-sync set and is kept so old directories
	// upgrade in place.
	StateFileName = "witness.epoch"
	// stateTempName is where a new record is written before the rename. A
	// leftover one after a crash is harmless and is truncated by the next
	// write.
	stateTempName = StateFileName + ".tmp"

	stateMagic     = "SBWE"
	stateVersionV1 = 1
	stateLenV1     = 20
	stateVersionV2 = 2
	stateLenV2     = 68
	stateVersion   = 3
	stateLen       = 76
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Store persists the arbiter's PersistentState. The file store is the
// real one; tests inject stores that fail or count.
type Store interface {
	// Load returns the persisted state and found=true, or found=false when
	// nothing was ever persisted (a fresh directory).
	Load() (state arbiter.PersistentState, found bool, err error)
	// Save durably records state; when it returns nil, a crash at any
	// later moment still loads state (or a later one).
	Save(state arbiter.PersistentState) error
}

// encodeState returns the version 3 record for state.
func encodeState(state arbiter.PersistentState) [stateLen]byte {
	var b [stateLen]byte
	copy(b[:4], stateMagic)
	binary.LittleEndian.PutUint32(b[4:], stateVersion)
	binary.LittleEndian.PutUint64(b[8:], state.Epoch)
	binary.LittleEndian.PutUint64(b[16:], state.InSyncVersion)
	binary.LittleEndian.PutUint32(b[24:], uint32(state.LastHolder))
	binary.LittleEndian.PutUint32(b[28:], uint32(state.Members.N))
	for i, m := range state.Members.Nodes {
		binary.LittleEndian.PutUint32(b[32+4*i:], uint32(m))
	}
	binary.LittleEndian.PutUint64(b[64:], state.History)
	binary.LittleEndian.PutUint32(b[72:], crc32.Checksum(b[:72], castagnoli))
	return b
}

// encodeStateV2 returns a version 2 record (no history). Only tests use
// it, to prove such directories still load.
func encodeStateV2(state arbiter.PersistentState) [stateLenV2]byte {
	var b [stateLenV2]byte
	v3 := encodeState(state)
	copy(b[:64], v3[:64])
	binary.LittleEndian.PutUint32(b[4:], stateVersionV2)
	binary.LittleEndian.PutUint32(b[64:], crc32.Checksum(b[:64], castagnoli))
	return b
}

// encodeStateV1 returns a version 1 record (epoch only). Only tests use
// it, to prove old directories still load.
func encodeStateV1(epoch uint64) [stateLenV1]byte {
	var b [stateLenV1]byte
	copy(b[:4], stateMagic)
	binary.LittleEndian.PutUint32(b[4:], stateVersionV1)
	binary.LittleEndian.PutUint64(b[8:], epoch)
	binary.LittleEndian.PutUint32(b[16:], crc32.Checksum(b[:16], castagnoli))
	return b
}

// decodeState parses a version 1, 2 or 3 state record; every failure wraps
// ErrCorruptState.
func decodeState(b []byte) (arbiter.PersistentState, error) {
	if len(b) < 8 {
		return arbiter.PersistentState{}, fmt.Errorf("%w: %d bytes", ErrCorruptState, len(b))
	}
	if string(b[:4]) != stateMagic {
		return arbiter.PersistentState{}, fmt.Errorf("%w: bad magic %q", ErrCorruptState, b[:4])
	}
	version := binary.LittleEndian.Uint32(b[4:])
	want := 0
	switch version {
	case stateVersionV1:
		want = stateLenV1
	case stateVersionV2:
		want = stateLenV2
	case stateVersion:
		want = stateLen
	default:
		return arbiter.PersistentState{}, fmt.Errorf("%w: unknown version %d", ErrCorruptState, version)
	}
	if len(b) != want {
		return arbiter.PersistentState{}, fmt.Errorf("%w: %d bytes, want %d for version %d", ErrCorruptState, len(b), want, version)
	}
	if got, want := crc32.Checksum(b[:len(b)-4], castagnoli), binary.LittleEndian.Uint32(b[len(b)-4:]); got != want {
		return arbiter.PersistentState{}, fmt.Errorf("%w: checksum %#08x, record says %#08x", ErrCorruptState, got, want)
	}
	state := arbiter.PersistentState{Epoch: binary.LittleEndian.Uint64(b[8:])}
	if version == stateVersionV1 {
		return state, nil
	}
	state.InSyncVersion = binary.LittleEndian.Uint64(b[16:])
	state.LastHolder = arbiter.NodeID(binary.LittleEndian.Uint32(b[24:]))
	n := binary.LittleEndian.Uint32(b[28:])
	if n > arbiter.MaxInSyncMembers {
		return arbiter.PersistentState{}, fmt.Errorf("%w: %d in-sync members", ErrCorruptState, n)
	}
	state.Members.N = int(n)
	for i := range state.Members.Nodes {
		state.Members.Nodes[i] = arbiter.NodeID(binary.LittleEndian.Uint32(b[32+4*i:]))
	}
	if version == stateVersion {
		state.History = binary.LittleEndian.Uint64(b[64:])
	}
	if err := state.Validate(); err != nil {
		return arbiter.PersistentState{}, fmt.Errorf("%w: %v", ErrCorruptState, err)
	}
	return state, nil
}

// fileStore keeps the state in dir/StateFileName.
type fileStore struct {
	dir string
}

var _ Store = (*fileStore)(nil)

func (f *fileStore) Load() (arbiter.PersistentState, bool, error) {
	file, err := os.Open(filepath.Join(f.dir, StateFileName))
	if errors.Is(err, fs.ErrNotExist) {
		return arbiter.PersistentState{}, false, nil
	}
	if err != nil {
		return arbiter.PersistentState{}, false, fmt.Errorf("witness: open state: %w", err)
	}
	defer file.Close()
	// Read one byte more than a record so an oversized file is caught
	// without reading an arbitrarily large one.
	b, err := io.ReadAll(io.LimitReader(file, stateLen+1))
	if err != nil {
		return arbiter.PersistentState{}, false, fmt.Errorf("witness: read state: %w", err)
	}
	state, err := decodeState(b)
	if err != nil {
		return arbiter.PersistentState{}, false, fmt.Errorf("%s: %w", filepath.Join(f.dir, StateFileName), err)
	}
	return state, true, nil
}

// store writes the record to a temp file, fsyncs it, renames it over the
// state file and fsyncs the directory, so the rename itself is durable.
// Skipping the directory fsync would let a power cut bring back the old
// record after the grant was sent.
func (f *fileStore) Save(state arbiter.PersistentState) error {
	tmp := filepath.Join(f.dir, stateTempName)
	file, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrPersist, err)
	}
	rec := encodeState(state)
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
