package witness

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestStateRoundTrip(t *testing.T) {
	for _, epoch := range []uint64{0, 1, 1 << 40, ^uint64(0)} {
		rec := encodeState(epoch)
		got, err := decodeState(rec[:])
		if err != nil || got != epoch {
			t.Fatalf("epoch %d: got %d, %v", epoch, got, err)
		}
	}
}

// TestDecodeStateRefusesCorruption: every corruption is ErrCorruptState.
func TestDecodeStateRefusesCorruption(t *testing.T) {
	good := encodeState(42)
	flip := func(off int) []byte {
		b := good
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
		{"checksum", flip(16)},
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
	if e, found, err := fs.load(); err != nil || found || e != 0 {
		t.Fatalf("fresh: %d %v %v", e, found, err)
	}
	if err := os.WriteFile(filepath.Join(dir, stateTempName), []byte("half-written"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, epoch := range []uint64{1, 2, 7} {
		if err := fs.store(epoch); err != nil {
			t.Fatal(err)
		}
		if e, found, err := fs.load(); err != nil || !found || e != epoch {
			t.Fatalf("after store(%d): %d %v %v", epoch, e, found, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, stateTempName)); !os.IsNotExist(err) {
		t.Fatalf("temp file left behind: %v", err)
	}
	bad := &fileStore{dir: filepath.Join(dir, "missing")}
	if err := bad.store(1); !errors.Is(err, ErrPersist) {
		t.Fatalf("store into missing dir: %v", err)
	}
}

// TestNewRestoresEpoch: New on a directory with epoch 9 restores it and
// starts quarantined.
func TestNewRestoresEpoch(t *testing.T) {
	dir := t.TempDir()
	if err := (&fileStore{dir: dir}).store(9); err != nil {
		t.Fatal(err)
	}
	s, err := New(testConfig(), newMemConn(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st := s.Status()
	if st.Epoch != 9 || st.QuarantineRemainingNs <= 0 || s.Stats().DurableEpoch != 9 {
		t.Fatalf("status %+v", st)
	}
}
