package auth

import (
	"bytes"
	"slices"
	"testing"

	"github.com/seqbus/seqbus/wire"
)

const (
	testStream = 9
	testNode   = 2
)

func framesMaster(t testing.TB, fill byte) *MasterKey {
	t.Helper()
	var k MasterKey
	for i := range k {
		k[i] = fill + byte(i)
	}
	return &k
}

// frameOf builds one unsealed frame of type typ under epoch.
func frameOf(t testing.TB, typ wire.Type, epoch, seq uint64) []byte {
	t.Helper()
	o := wire.Origin{Stream: testStream, Node: 1, Epoch: epoch}
	switch {
	case typ.Batched():
		b, err := wire.AppendData(nil, typ, o, seq, []byte("payload"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	case wire.IsLease(typ):
		l := wire.Lease{Type: typ, Origin: o, Seq: seq, RequestID: 77}
		return l.Append(nil)
	case typ == wire.TypeHeartbeat:
		h := wire.Heartbeat{Origin: o, HighestSeq: seq}
		return h.Append(nil)
	case typ == wire.TypeAck:
		a := wire.Ack{Origin: o, Seq: seq}
		return a.Append(nil)
	}
	t.Fatalf("no builder for %s", typ)
	return nil
}

func parse(t testing.TB, b []byte) wire.Frame {
	t.Helper()
	f, _, err := wire.Parse(b)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return f
}

// TestFramesKeyPerClass: each frame class is sealed with the key the
// package documentation names (checked against the derivation itself),
// verifies at a receiver holding the same master, and fails under the key
// of any other class, another node's lease key or another master; a frame
// without a tag is NoMAC and a changed tag BadMAC.
func TestFramesKeyPerClass(t *testing.T) {
	master := framesMaster(t, 1)
	const epoch = 3
	for _, tc := range []struct {
		typ wire.Type
		key Key
	}{
		{wire.TypeData, DataKey(master, testStream, epoch)},
		{wire.TypeRetransmit, DataKey(master, testStream, epoch)},
		{wire.TypeHeartbeat, DataKey(master, testStream, epoch)},
		{wire.TypeAck, DataKey(master, testStream, epoch)},
		{wire.TypeLeaseAcquire, LeaseKey(master, testStream, testNode)},
		{wire.TypeLeaseGrant, LeaseKey(master, testStream, testNode)},
		{wire.TypeCommand, ClientKey(master, testStream)},
		{wire.TypeOutput, ClientKey(master, testStream)},
		{wire.TypeMDReplay, ClientKey(master, testStream)},
	} {
		t.Run(tc.typ.String(), func(t *testing.T) {
			// A RETRANSMIT names no signing epoch, so a tag that fails
			// is an unknown key (Frames.Verify); every other type's is a
			// bad MAC.
			bad := BadMAC
			if tc.typ == wire.TypeRetransmit {
				bad = UnknownKey
			}
			plain := frameOf(t, tc.typ, epoch, 10)
			sealed := NewFrames(master, testStream, testNode).Seal(nil, plain)
			want := NewMAC(tc.key).Sign(wire.Seal(nil, plain), wire.Seal(nil, plain))
			if !bytes.Equal(sealed, want) {
				t.Fatalf("sealed with the wrong key:\n got %x\nwant %x", sealed, want)
			}
			f := parse(t, sealed)
			if v := NewFrames(master, testStream, testNode).Verify(&f, epoch-1, 0); !v.OK() {
				t.Fatalf("a good frame: verdict %d", v)
			}
			if v := NewFrames(framesMaster(t, 50), testStream, testNode).Verify(&f, epoch-1, 0); v != bad {
				t.Errorf("under another master: verdict %d, want %d", v, bad)
			}
			if wire.IsLease(tc.typ) {
				if v := NewFrames(master, testStream, testNode+1).Verify(&f, epoch-1, 0); v != BadMAC {
					t.Errorf("at another node: verdict %d, want BadMAC", v)
				}
			}
			for _, other := range []Key{DataKey(master, testStream, epoch), LeaseKey(master, testStream, testNode), ClientKey(master, testStream)} {
				if other == tc.key {
					continue
				}
				forged := NewMAC(other).Sign(wire.Seal(nil, plain), wire.Seal(nil, plain))
				g := parse(t, forged)
				if v := NewFrames(master, testStream, testNode).Verify(&g, epoch-1, 0); v != bad {
					t.Errorf("signed with another class's key: verdict %d, want %d", v, bad)
				}
			}
			changed := slices.Clone(sealed)
			changed[len(changed)-1] ^= 1
			g := parse(t, changed)
			if v := NewFrames(master, testStream, testNode).Verify(&g, epoch-1, 0); v != bad {
				t.Errorf("changed tag: verdict %d, want %d", v, bad)
			}
			u := parse(t, plain)
			if v := NewFrames(master, testStream, testNode).Verify(&u, epoch-1, 0); v != NoMAC {
				t.Errorf("no tag: verdict %d, want NoMAC", v)
			}
		})
	}
}

// TestFramesUnknownEpochRateLimit: a key is derived for an unheld epoch
// only at or above the highest epoch accepted and at most once per
// InstallEveryNs, forged frames included, so a flood of made-up epochs
// costs a lookup each; the key is installed only for a good tag.
func TestFramesUnknownEpochRateLimit(t *testing.T) {
	master := framesMaster(t, 1)
	sender := NewFrames(master, testStream, 1)
	forger := NewFrames(framesMaster(t, 50), testStream, 1)
	good := parse(t, sender.Seal(nil, frameOf(t, wire.TypeData, 5, 1)))
	forged := parse(t, forger.Seal(nil, frameOf(t, wire.TypeData, 5, 1)))
	r := NewFrames(master, testStream, testNode)
	checkVerdicts(t, r, []verifyStep{
		{&good, 6, 0, UnknownKey},                    // below the highest epoch accepted: never derived
		{&forged, 4, 0, BadMAC},                      // derived (the first may come at once), refused, not installed
		{&good, 4, InstallEveryNs - 1, UnknownKey},   // within a millisecond of the last derivation
		{&forged, 4, InstallEveryNs - 1, UnknownKey}, // the flood costs a lookup
		{&good, 4, InstallEveryNs, VerifiedNewEpoch},
		{&good, 4, InstallEveryNs, Verified}, // held now, no derivation, no limit
		{&forged, 5, InstallEveryNs + 1, BadMAC},
	})
	if got := r.Epochs(nil); !slices.Equal(got, []uint64{5}) {
		t.Fatalf("epochs held %v, want [5]: a forged frame installed a key", got)
	}
}

// TestFramesRederiveHighestEpoch: keys live in memory, so a node
// restarted while its epoch still leads (the journal's highest epoch is
// the frame's) derives that key again for a good tag, as Verified (not
// a new epoch), without retiring the previous epoch's key; a forged
// frame installs nothing.
func TestFramesRederiveHighestEpoch(t *testing.T) {
	master := framesMaster(t, 1)
	sender := NewFrames(master, testStream, 1)
	forger := NewFrames(framesMaster(t, 50), testStream, 1)
	prev := parse(t, sender.Seal(nil, frameOf(t, wire.TypeHeartbeat, 4, 1)))
	good := parse(t, sender.Seal(nil, frameOf(t, wire.TypeData, 5, 1)))
	forged := parse(t, forger.Seal(nil, frameOf(t, wire.TypeData, 5, 1)))
	r := NewFrames(master, testStream, testNode)
	checkVerdicts(t, r, []verifyStep{
		{&prev, 3, 0, VerifiedNewEpoch}, // epoch 4 is new
		{&forged, 5, 2 * InstallEveryNs, BadMAC},
		{&good, 5, 3 * InstallEveryNs, Verified},
		{&good, 5, 3 * InstallEveryNs, Verified},
		{&prev, 5, 3 * InstallEveryNs, Verified},
	})
	if got := r.Epochs(nil); !slices.Equal(slices.Sorted(slices.Values(got)), []uint64{4, 5}) {
		t.Fatalf("epochs held %v, want 4 and 5", got)
	}
}

// TestFramesRetransmitOfOlderEpoch: the primary resends history under
// the epoch each record was sequenced in, and signs it under its own
// current epoch, so a standby refetching it (an empty journal) verifies
// it under the key of the epoch it follows, deriving no old key; a
// RETRANSMIT captured while epoch 1 led (signed under 1) verifies under
// nothing once epoch 5 leads (counted as an unknown key: a RETRANSMIT
// names no signing epoch), and a DATA frame of an older epoch never
// derives a key.
func TestFramesRetransmitOfOlderEpoch(t *testing.T) {
	master := framesMaster(t, 1)
	then := NewFrames(master, testStream, 1)
	_ = then.Seal(nil, frameOf(t, wire.TypeHeartbeat, 1, 1))
	captured := parse(t, then.Seal(nil, frameOf(t, wire.TypeRetransmit, 1, 1)))
	sender := NewFrames(master, testStream, 1)
	current := parse(t, sender.Seal(nil, frameOf(t, wire.TypeHeartbeat, 5, 1)))
	old := parse(t, sender.Seal(nil, frameOf(t, wire.TypeRetransmit, 1, 1)))
	oldData := parse(t, sender.Seal(nil, frameOf(t, wire.TypeData, 2, 1)))
	forger := NewFrames(framesMaster(t, 50), testStream, 1)
	_ = forger.Seal(nil, frameOf(t, wire.TypeHeartbeat, 5, 1))
	forged := parse(t, forger.Seal(nil, frameOf(t, wire.TypeRetransmit, 3, 1)))
	r := NewFrames(master, testStream, testNode)
	checkVerdicts(t, r, []verifyStep{
		{&current, 4, 0, VerifiedNewEpoch}, // accepted at 4: new
		{&old, 5, 1, Verified},             // under epoch 5's key: nothing derived, no rate limit
		{&old, 5, 2, Verified},
		{&captured, 5, 3 * InstallEveryNs, UnknownKey}, // signed under epoch 1's key, not ours
		{&oldData, 5, 4 * InstallEveryNs, UnknownKey},
		{&forged, 5, 5 * InstallEveryNs, UnknownKey}, // a RETRANSMIT names no signing epoch
		{&current, 5, 5 * InstallEveryNs, Verified},
	})
	if got := r.Epochs(nil); !slices.Equal(got, []uint64{5}) {
		t.Fatalf("ring epochs %v, want [5]: history must derive no key", got)
	}
}

// TestFramesRetransmitPastAFullRing: a primary whose ring is full of
// newer epochs still seals RETRANSMITs of epochs older than all of them
// (under its current epoch's key, always held), and a refetching node
// that follows that epoch verifies every one; no live key is evicted.
func TestFramesRetransmitPastAFullRing(t *testing.T) {
	master := framesMaster(t, 1)
	sender := NewFrames(master, testStream, 1)
	for e := uint64(10); e < 10+KeyringEpochs; e++ {
		_ = sender.Seal(nil, frameOf(t, wire.TypeHeartbeat, e, 1)) // the ring holds 10..13
	}
	r := NewFrames(master, testStream, testNode)
	last := uint64(10 + KeyringEpochs - 1)
	hb := parse(t, sender.Seal(nil, frameOf(t, wire.TypeHeartbeat, last, 1)))
	if v := r.Verify(&hb, last-1, 0); v != VerifiedNewEpoch {
		t.Fatalf("heartbeat of epoch %d: verdict %d", last, v)
	}
	for e := uint64(1); e <= last; e++ {
		f := parse(t, sender.Seal(nil, frameOf(t, wire.TypeRetransmit, e, 1)))
		if v := r.Verify(&f, last, 1); v != Verified {
			t.Fatalf("RETRANSMIT of epoch %d: verdict %d, want Verified", e, v)
		}
	}
	if got := sender.Epochs(nil); len(got) != KeyringEpochs || slices.Min(got) != 10 {
		t.Fatalf("sender's ring %v: resending history evicted a live epoch", got)
	}
}

// TestFramesRetireOnNewEpoch: installing a new epoch's key retires every
// key more than one epoch below it, so frames of those epochs fail with
// UnknownKey while the previous epoch's still verify.
func TestFramesRetireOnNewEpoch(t *testing.T) {
	master := framesMaster(t, 1)
	sender := NewFrames(master, testStream, 1)
	r := NewFrames(master, testStream, testNode)
	var frames []wire.Frame
	for epoch := uint64(1); epoch <= 4; epoch++ {
		frames = append(frames, parse(t, sender.Seal(nil, frameOf(t, wire.TypeHeartbeat, epoch, 1))))
	}
	now := int64(0)
	for i := range 3 {
		if v := r.Verify(&frames[i], uint64(i), now); v != VerifiedNewEpoch {
			t.Fatalf("epoch %d: verdict %d, want VerifiedNewEpoch", i+1, v)
		}
		now += InstallEveryNs
	}
	got := r.Epochs(nil)
	slices.Sort(got)
	if !slices.Equal(got, []uint64{2, 3}) {
		t.Fatalf("after epoch 3: held %v, want [2 3]", got)
	}
	if v := r.Verify(&frames[0], 3, now); v != UnknownKey {
		t.Errorf("epoch 1 after epoch 3: verdict %d, want UnknownKey", v)
	}
	if v := r.Verify(&frames[1], 3, now); v != Verified {
		t.Errorf("epoch 2 after epoch 3: verdict %d, want Verified", v)
	}
	if v := r.Verify(&frames[3], 3, now); v != VerifiedNewEpoch {
		t.Fatalf("epoch 4: verdict %d", v)
	}
	if v := r.Verify(&frames[1], 4, now); v != UnknownKey {
		t.Errorf("epoch 2 after epoch 4: verdict %d, want UnknownKey", v)
	}
}

// TestFramesFresh: the DATA replay window accepts each (epoch, seq) once,
// refuses older epochs, restarts for a newer one; other types are always
// fresh.
func TestFramesFresh(t *testing.T) {
	r := NewFrames(framesMaster(t, 1), testStream, testNode)
	data := func(epoch, seq uint64) *wire.Frame {
		f := parse(t, frameOf(t, wire.TypeData, epoch, seq))
		return &f
	}
	steps := []struct {
		f    *wire.Frame
		want bool
	}{
		{data(2, 10), true},
		{data(2, 10), false},
		{data(2, 11), true},
		{data(2, 5), true},
		{data(1, 12), false},
		{data(3, 1), true},
		{data(2, 12), false},
	}
	for i, s := range steps {
		if got := r.Fresh(s.f); got != s.want {
			t.Fatalf("step %d (epoch %d seq %d): fresh %v, want %v", i, s.f.Epoch, s.f.Seq, got, s.want)
		}
	}
	hb := parse(t, frameOf(t, wire.TypeHeartbeat, 1, 1))
	for range 2 {
		if !r.Fresh(&hb) {
			t.Fatal("a HEARTBEAT went through the DATA replay window")
		}
	}
}

// TestFramesSteadyPathAllocatesNothing: once an epoch's key is held,
// Seal, Verify (good, bad, and the flood of unknown epochs held back by
// the rate limit) and Fresh allocate nothing.
func TestFramesSteadyPathAllocatesNothing(t *testing.T) {
	master := framesMaster(t, 1)
	a := NewFrames(master, testStream, testNode)
	r := NewFrames(master, testStream, testNode)
	dst := make([]byte, 0, wire.MaxFrameLen+wire.TagLen)
	var plain [][]byte
	for _, typ := range []wire.Type{wire.TypeData, wire.TypeLeaseRenew, wire.TypeCommand} {
		plain = append(plain, frameOf(t, typ, 4, 1))
	}
	data := parse(t, a.Seal(nil, plain[0])) // installs epoch 4 at both ends
	if v := r.Verify(&data, 3, 0); v != VerifiedNewEpoch {
		t.Fatal(v)
	}
	lease := parse(t, a.Seal(nil, plain[1]))
	unknown := parse(t, NewFrames(master, testStream, 1).Seal(nil, frameOf(t, wire.TypeData, 9, 1)))
	bad := parse(t, NewFrames(framesMaster(t, 50), testStream, testNode).Seal(nil, plain[2]))
	seq := uint64(1)
	allocs := testing.AllocsPerRun(200, func() {
		for _, p := range plain {
			dst = a.Seal(dst[:0], p)
		}
		if !r.Verify(&data, 4, 0).OK() || !r.Verify(&lease, 4, 0).OK() ||
			r.Verify(&bad, 4, 0) != BadMAC || r.Verify(&unknown, 4, 0) != UnknownKey {
			t.Fatal("wrong verdict")
		}
		data.Seq = seq
		seq++
		if !r.Fresh(&data) {
			t.Fatal("not fresh")
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per run, want 0", allocs)
	}
}

// verifyStep is one Verify call of a scripted sequence: the frame, the
// highest epoch accepted, the time and the verdict wanted.
type verifyStep struct {
	f       *wire.Frame
	highest uint64
	nowNs   int64
	want    Verdict
}

// checkVerdicts runs steps in order against r.
func checkVerdicts(t *testing.T, r *Frames, steps []verifyStep) {
	t.Helper()
	for i, s := range steps {
		if v := r.Verify(s.f, s.highest, s.nowNs); v != s.want {
			t.Fatalf("step %d: verdict %d, want %d", i, v, s.want)
		}
	}
}
