package engine

import (
	"bytes"
	"errors"
	"testing"

	"pgregory.net/rapid"
)

func snapshotBytes(tb fataler, e *Engine) []byte {
	var buf bytes.Buffer
	if err := e.Snapshot(&buf); err != nil {
		tb.Fatalf("snapshot: %v", err)
	}
	return buf.Bytes()
}

// TestSnapshotRestoreContinues: snapshot at a random point, restore into a
// fresh engine, and continue both: outputs and hashes stay identical, and
// the restored engine re-snapshots to the same bytes.
func TestSnapshotRestoreContinues(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := drawConfig(t)
		cmds := drawStream(t, cfg, rapid.IntRange(1, 120).Draw(t, "n"))
		cut := rapid.IntRange(0, len(cmds)).Draw(t, "cut")
		a, _ := New(cfg)
		for i, c := range cmds[:cut] {
			a.Apply(uint64(i+1), c, nil)
		}
		snap := snapshotBytes(t, a)
		b, _ := New(cfg)
		// Dirty b first: Restore must replace, not merge.
		b.Apply(1, limitCmd(1, 1, 0, Buy, 100, 1), nil)
		if err := b.Restore(bytes.NewReader(snap)); err != nil {
			t.Fatalf("restore: %v", err)
		}
		if b.StateHash() != a.StateHash() || b.AppliedSeq() != a.AppliedSeq() {
			t.Fatalf("hash or seq differs right after restore")
		}
		if again := snapshotBytes(t, b); !bytes.Equal(again, snap) {
			t.Fatalf("re-snapshot differs")
		}
		if err := checkInvariants(b); err != nil {
			t.Fatal(err)
		}
		var ra, rb recorder
		for i, c := range cmds[cut:] {
			seq := uint64(cut + i + 1)
			a.Apply(seq, c, &ra)
			b.Apply(seq, c, &rb)
			if !equalOutputs(ra.take(), rb.take()) || a.StateHash() != b.StateHash() {
				t.Fatalf("diverged at cmd %d after a snapshot at %d", cut+i, cut)
			}
		}
	})
}

// TestStateHashSeesState: different states hash differently (a sample of
// single-field differences), and the hash covers AppliedSeq.
func TestStateHashSeesState(t *testing.T) {
	base := [][]byte{limitCmd(1, 1, 0, Buy, 100, 5)}
	variants := [][][]byte{
		{limitCmd(1, 1, 0, Buy, 101, 5)},
		{limitCmd(1, 1, 0, Buy, 100, 4)},
		{limitCmd(1, 1, 0, Sell, 100, 5)},
		{limitCmd(1, 1, 1, Buy, 100, 5)},
		{limitCmd(2, 1, 0, Buy, 100, 5)},
		{limitCmd(1, 2, 0, Buy, 100, 5)},
	}
	hashOf := func(cmds [][]byte) uint64 {
		e := mustNew(t, testConfig())
		for i, c := range cmds {
			e.Apply(uint64(i+1), c, nil)
		}
		return e.StateHash()
	}
	h := hashOf(base)
	for i, v := range variants {
		if hashOf(v) == h {
			t.Errorf("variant %d hashes like the base", i)
		}
	}
	e := mustNew(t, testConfig())
	e.Apply(1, base[0], nil)
	e2 := mustNew(t, testConfig())
	e2.Apply(2, base[0], nil)
	if e.StateHash() == e2.StateHash() {
		t.Error("hash ignores AppliedSeq")
	}
}

func TestRestoreRejects(t *testing.T) {
	e := mustNew(t, testConfig())
	for i, c := range [][]byte{
		limitCmd(1, 1, 0, Buy, 100, 5), limitCmd(2, 1, 0, Sell, 101, 5), limitCmd(2, 2, 0, Sell, 101, 3),
	} {
		e.Apply(uint64(i+1), c, nil)
	}
	good := snapshotBytes(t, e)
	target := mustNew(t, testConfig())
	target.Apply(1, limitCmd(3, 1, 1, Buy, 7, 7), nil)
	before := snapshotBytes(t, target)

	other := testConfig()
	other.MaxOrders++
	otherSnap := snapshotBytes(t, mustNew(t, other))

	flip := func(i int) []byte { b := bytes.Clone(good); b[i] ^= 1; return b }
	// Offsets: magic 8, config 24, counters 32, order count 4, first order.
	const firstOrder = 8 + 24 + 32 + 4
	tests := []struct {
		name string
		snap []byte
		want error
	}{
		{"empty", nil, ErrSnapshotCorrupt},
		{"bad magic", flip(0), ErrSnapshotCorrupt},
		{"other config", otherSnap, ErrConfigMismatch},
		{"truncated", good[:len(good)-1], ErrSnapshotCorrupt},
		{"trailing byte", append(bytes.Clone(good), 0), ErrSnapshotCorrupt},
		{"applied seq changed (hash)", flip(8 + 24), ErrSnapshotCorrupt},
		{"order count too big", func() []byte { b := bytes.Clone(good); b[firstOrder-1] = 0xff; return b }(), ErrSnapshotCorrupt},
		{"order qty changed (hash)", flip(firstOrder + 8 + 8 + 8 + 4 + 1 + 8), ErrSnapshotCorrupt},
		{"order side invalid", func() []byte { b := bytes.Clone(good); b[firstOrder+28] = 3; return b }(), ErrSnapshotCorrupt},
		{"stored hash changed", flip(len(good) - 1), ErrSnapshotCorrupt},
		// The multiset hash cannot see order within a level; Restore's
		// id-order check must.
		{"time priority swapped", func() []byte {
			const rec = 8 + 8 + 8 + 4 + 1 + 8 + 8
			b := bytes.Clone(good)
			o2, o3 := b[firstOrder+rec:firstOrder+2*rec], b[firstOrder+2*rec:firstOrder+3*rec]
			tmp := bytes.Clone(o2)
			copy(o2, o3)
			copy(o3, tmp)
			return b
		}(), ErrSnapshotCorrupt},
	}
	for _, tc := range tests {
		err := target.Restore(bytes.NewReader(tc.snap))
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.want)
		}
		if !bytes.Equal(snapshotBytes(t, target), before) {
			t.Fatalf("%s: failed restore changed the engine", tc.name)
		}
	}
	if err := target.Restore(bytes.NewReader(good)); err != nil {
		t.Fatal(err)
	}
}

type failWriter struct{}

var errWrite = errors.New("write failed")

func (failWriter) Write([]byte) (int, error) { return 0, errWrite }

func TestSnapshotReportsWriteError(t *testing.T) {
	if err := mustNew(t, testConfig()).Snapshot(failWriter{}); !errors.Is(err, errWrite) {
		t.Errorf("err %v", err)
	}
}

func FuzzRestore(f *testing.F) {
	cfg := testConfig()
	e := mustNew(f, cfg)
	f.Add(snapshotBytes(f, e))
	for i, c := range [][]byte{
		limitCmd(1, 1, 0, Buy, 100, 5), limitCmd(2, 1, 0, Sell, 101, 5), limitCmd(2, 2, 1, Sell, 101, 3),
		limitCmd(3, 9, 0, Buy, 99, 1), cancelCmd(1, 2, 7), limitCmd(2, 3, 0, Sell, 99, 1),
	} {
		e.Apply(uint64(i+1), c, nil)
		f.Add(snapshotBytes(f, e))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		e := mustNew(t, cfg)
		if err := e.Restore(bytes.NewReader(data)); err != nil {
			return
		}
		if err := checkInvariants(e); err != nil {
			t.Fatalf("restored an inconsistent engine: %v", err)
		}
		e2 := mustNew(t, cfg)
		if err := e2.Restore(bytes.NewReader(snapshotBytes(t, e))); err != nil || e2.StateHash() != e.StateHash() {
			t.Fatalf("re-snapshot does not restore: %v", err)
		}
		// A restored engine keeps working.
		e.Apply(e.AppliedSeq()+1, limitCmd(1, 1<<40, 0, Sell, 1, 1000), &discard{})
		if err := checkInvariants(e); err != nil {
			t.Fatal(err)
		}
	})
}
