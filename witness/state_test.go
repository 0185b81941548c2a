package witness

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/seqbus/seqbus/arbiter"
)

func stateOf(epoch, version uint64, last arbiter.NodeID, members ...arbiter.NodeID) arbiter.PersistentState {
	set, ok := arbiter.MakeInSyncSet(members, last)
	if !ok {
		panic("bad test set")
	}
	return arbiter.PersistentState{Epoch: epoch, InSyncVersion: version, LastHolder: last, Members: set}
}

func TestStateRoundTrip(t *testing.T) {
	for _, st := range []arbiter.PersistentState{
		{}, stateOf(1, 1, 1), stateOf(1<<40, 7, 3, 1, 2), stateOf(^uint64(0), ^uint64(0), ^arbiter.NodeID(0), 1, 2, 3, 4, 5, 6, 7, 8),
	} {
		rec := encodeState(st)
		got, err := decodeState(rec[:])
		if err != nil || got != st {
			t.Fatalf("state %+v: got %+v, %v", st, got, err)
		}
		// With a pinned history id; a version 2 record (before history
		// ids) reads with none.
		st.History = 0xfeedface12345678
		rec = encodeState(st)
		if got, err := decodeState(rec[:]); err != nil || got != st {
			t.Fatalf("state %+v: got %+v, %v", st, got, err)
		}
		v2 := encodeStateV2(st)
		st.History = 0
		if got, err := decodeState(v2[:]); err != nil || got != st {
			t.Fatalf("v2 state %+v: got %+v, %v", st, got, err)
		}
	}
	// A version 1 record (before the in-sync set) reads as its epoch alone.
	for _, epoch := range []uint64{0, 1, 1 << 40, ^uint64(0)} {
		rec := encodeStateV1(epoch)
		got, err := decodeState(rec[:])
		if err != nil || got != (arbiter.PersistentState{Epoch: epoch}) {
			t.Fatalf("v1 epoch %d: got %+v, %v", epoch, got, err)
		}
	}
}

// resealed returns rec with field off set to v and the checksum fixed, so
// only the field validation can refuse it.
func resealed(rec [stateLen]byte, off int, v uint32) []byte {
	binary.LittleEndian.PutUint32(rec[off:], v)
	binary.LittleEndian.PutUint32(rec[72:], crc32.Checksum(rec[:72], castagnoli))
	return rec[:]
}

// TestDecodeStateRefusesCorruption: every corruption is ErrCorruptState.
func TestDecodeStateRefusesCorruption(t *testing.T) {
	good := encodeState(stateOf(42, 5, 1, 2, 3))
	flip := func(off int) []byte {
		b := good
		b[off] ^= 1
		return b[:]
	}
	goodV1 := encodeStateV1(42)
	flipV1 := func(off int) []byte {
		b := goodV1
		b[off] ^= 1
		return b[:]
	}
	tests := []struct {
		name string
		rec  []byte
	}{
		{"empty", nil},
		{"short", good[:stateLen-1]},
		{"long", append(good[:], 0)},
		{"magic", flip(0)},
		{"version", flip(4)},
		{"epoch bit flipped", flip(8)},
		{"version bit flipped", flip(16)},
		{"holder bit flipped", flip(24)},
		{"member bit flipped", flip(32)},
		{"checksum", flip(64)},
		{"v1 short", goodV1[:stateLenV1-1]},
		{"v1 long", append(goodV1[:], 0)},
		{"v1 epoch bit flipped", flipV1(8)},
		{"v1 checksum", flipV1(16)},
		{"v1 length with version 2", append(append([]byte(nil), good[:8]...), goodV1[8:]...)},
		{"nine members", resealed(good, 28, 9)},
		{"count beyond members", resealed(good, 28, 3)},
		{"holder is a member", resealed(good, 24, 2)},
		{"unsorted", resealed([stateLen]byte(resealed(good, 32, 3)), 36, 2)},
		{"member 0", resealed(good, 32, 0)},
	}
	for _, tc := range tests {
		if _, err := decodeState(tc.rec); !errors.Is(err, ErrCorruptState) {
			t.Errorf("%s: err %v", tc.name, err)
		}
	}
}

// TestNewRefusesCorruptState: a corrupt file stops New; the file is left
// for an operator.
func TestNewRefusesCorruptState(t *testing.T) {
	for _, content := range [][]byte{{}, []byte("garbage"), make([]byte, stateLen)} {
		dir := t.TempDir()
		path := filepath.Join(dir, StateFileName)
		if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
		conn := newMemConn(t)
		if s, err := New(testConfig(), conn, dir); !errors.Is(err, ErrCorruptState) {
			if s != nil {
				s.Close()
			}
			t.Fatalf("content %q: err %v", content, err)
		}
		if b, _ := os.ReadFile(path); string(b) != string(content) {
			t.Fatal("New changed the corrupt file")
		}
	}
}

// TestNewRefusesUnreadableState: a state path that cannot be read (here a
// directory) is an error, not a fresh start.
func TestNewRefusesUnreadableState(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, StateFileName), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := New(testConfig(), newMemConn(t), dir); err == nil {
		t.Fatal("unreadable state accepted")
	}
}

// TestFileStore: missing is fresh, a write is read back, a rewrite
// replaces it, a leftover temp file is harmless, and a store into a
// missing directory fails with ErrPersist.
func TestFileStore(t *testing.T) {
	dir := t.TempDir()
	fs := &fileStore{dir: dir}
	if e, found, err := fs.Load(); err != nil || found || e != (arbiter.PersistentState{}) {
		t.Fatalf("fresh: %+v %v %v", e, found, err)
	}
	if err := os.WriteFile(filepath.Join(dir, stateTempName), []byte("half-written"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, st := range []arbiter.PersistentState{stateOf(1, 1, 1), stateOf(2, 3, 2, 1), stateOf(7, 9, 1, 2, 3)} {
		if err := fs.Save(st); err != nil {
			t.Fatal(err)
		}
		if e, found, err := fs.Load(); err != nil || !found || e != st {
			t.Fatalf("after store(%+v): %+v %v %v", st, e, found, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, stateTempName)); !os.IsNotExist(err) {
		t.Fatalf("temp file left behind: %v", err)
	}
	bad := &fileStore{dir: filepath.Join(dir, "missing")}
	if err := bad.Save(stateOf(1, 1, 1)); !errors.Is(err, ErrPersist) {
		t.Fatalf("store into missing dir: %v", err)
	}
}

// TestNewRestoresEpoch: New on a directory with epoch 9 restores it (with
// its in-sync set and last holder) and starts quarantined.
func TestNewRestoresEpoch(t *testing.T) {
	dir := t.TempDir()
	if err := (&fileStore{dir: dir}).Save(stateOf(9, 4, 2, 3)); err != nil {
		t.Fatal(err)
	}
	s, err := New(testConfig(), newMemConn(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st := s.Status()
	if st.Epoch != 9 || st.QuarantineRemainingNs <= 0 || s.Stats().DurableEpoch != 9 ||
		st.LastHolder != 2 || st.InSyncVersion != 4 || st.Members != stateOf(0, 0, 0, 3).Members || s.Stats().DurableInSyncVersion != 4 {
		t.Fatalf("status %+v", st)
	}
}

// TestNewUpgradesV1State: a directory written before the in-sync set (a
// 20-byte version 1 record) starts at its epoch, quarantined, and the next
// write is a version 2 record.
func TestNewUpgradesV1State(t *testing.T) {
	dir := t.TempDir()
	v1 := encodeStateV1(9)
	if err := os.WriteFile(filepath.Join(dir, StateFileName), v1[:], 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := New(testConfig(), newMemConn(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if st := s.Status(); st.Epoch != 9 || st.QuarantineRemainingNs <= 0 || st.LastHolder != arbiter.NodeNone {
		t.Fatalf("status %+v", st)
	}
	// After the quarantine anyone may acquire (no last holder is known).
	r := mustReply(t, s.handle(acquireFrame(t, 3, 1), nodeAddr, s.nowNs()+testLeaseNs))
	if !r.Granted() || r.Epoch != 10 || r.InSyncVersion != 1 {
		t.Fatalf("after quarantine: %+v", r)
	}
	b, err := os.ReadFile(filepath.Join(dir, StateFileName))
	if err != nil || len(b) != stateLen {
		t.Fatalf("rewritten state %d bytes, %v", len(b), err)
	}
	if got, err := decodeState(b); err != nil || got != stateOf(10, 1, 3) {
		t.Fatalf("rewritten state %+v, %v", got, err)
	}
}
