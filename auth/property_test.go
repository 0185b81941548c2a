package auth

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// drawRing returns a keyring of stream with the given epochs installed.
func newRingWith(t *rapid.T, m *MasterKey, stream uint16, epochs ...uint64) *Keyring {
	r := NewKeyring(m, stream)
	for _, e := range epochs {
		if err := r.Install(e); err != nil {
			t.Fatalf("Install(%d): %v", e, err)
		}
	}
	return r
}

// TestPropSignVerifyRoundTrip: every message signed under an epoch
// verifies under that epoch in another ring of the same stream and master.
func TestPropSignVerifyRoundTrip(t *testing.T) {
	m := testMaster()
	rapid.Check(t, func(t *rapid.T) {
		epoch := rapid.Uint64().Draw(t, "epoch")
		stream := rapid.Uint16().Draw(t, "stream")
		msg := rapid.SliceOfN(rapid.Byte(), 0, 1500).Draw(t, "msg")
		prefix := rapid.SliceOfN(rapid.Byte(), 0, 8).Draw(t, "dst")
		send := newRingWith(t, &m, stream, epoch)
		recv := newRingWith(t, &m, stream, epoch)
		out, err := send.Sign(slices.Clone(prefix), msg, epoch)
		if err != nil || len(out) != len(prefix)+TagLen || !bytes.Equal(out[:len(prefix)], prefix) {
			t.Fatalf("Sign = %d bytes, %v", len(out), err)
		}
		if err := recv.Verify(msg, out[len(prefix):], epoch); err != nil {
			t.Fatalf("Verify: %v", err)
		}
	})
}

// TestPropBitFlipFails: any single bit flipped in the message or the tag
// makes Verify fail.
func TestPropBitFlipFails(t *testing.T) {
	m := testMaster()
	r := NewKeyring(&m, 1)
	if err := r.Install(3); err != nil {
		t.Fatal(err)
	}
	rapid.Check(t, func(t *rapid.T) {
		msg := rapid.SliceOfN(rapid.Byte(), 1, 1500).Draw(t, "msg")
		tag, _ := r.Sign(nil, msg, 3)
		inTag := rapid.Bool().Draw(t, "inTag")
		target := msg
		if inTag {
			target = tag
		}
		bit := rapid.IntRange(0, 8*len(target)-1).Draw(t, "bit")
		target[bit/8] ^= 1 << (bit % 8)
		if err := r.Verify(msg, tag, 3); !errors.Is(err, ErrBadMAC) {
			t.Fatalf("flipped bit %d (in tag: %v) verified: %v", bit, inTag, err)
		}
	})
}

// TestPropEpochBinding: a tag made under epoch e fails under any e' != e,
// even with both keys held.
func TestPropEpochBinding(t *testing.T) {
	m := testMaster()
	rapid.Check(t, func(t *rapid.T) {
		e := rapid.Uint64().Draw(t, "e")
		e2 := rapid.Uint64().Filter(func(v uint64) bool { return v != e }).Draw(t, "e2")
		msg := rapid.SliceOfN(rapid.Byte(), 0, 300).Draw(t, "msg")
		r := newRingWith(t, &m, 9, e, e2)
		tag, _ := r.Sign(nil, msg, e)
		if err := r.Verify(msg, tag, e2); !errors.Is(err, ErrBadMAC) {
			t.Fatalf("tag of epoch %d verified under %d: %v", e, e2, err)
		}
		if err := r.Verify(msg, tag, e); err != nil {
			t.Fatalf("tag of epoch %d fails under itself: %v", e, err)
		}
	})
}

// TestPropKeyringModel: after any sequence of Install, RetireBelow and
// VerifyInstall, the ring holds what a simple set model says, never more
// than KeyringEpochs, and Verify succeeds exactly for held epochs.
func TestPropKeyringModel(t *testing.T) {
	m := testMaster()
	signer := NewKeyring(&m, 5)
	msg := []byte("probe")
	rapid.Check(t, func(t *rapid.T) {
		r := NewKeyring(&m, 5)
		model := map[uint64]bool{}
		modelAdmits := func(e uint64) bool {
			if model[e] || len(model) < KeyringEpochs {
				return true
			}
			for held := range model {
				if e > held {
					return true
				}
			}
			return false
		}
		modelInsert := func(e uint64) {
			if model[e] {
				return
			}
			if len(model) == KeyringEpochs {
				low := uint64(math.MaxUint64)
				for held := range model {
					low = min(low, held)
				}
				delete(model, low)
			}
			model[e] = true
		}
		for i := range rapid.IntRange(1, 30).Draw(t, "ops") {
			e := rapid.Uint64Range(0, 12).Draw(t, "epoch")
			switch rapid.IntRange(0, 3).Draw(t, "op") {
			case 0:
				err := r.Install(e)
				if ok := modelAdmits(e); ok != (err == nil) {
					t.Fatalf("op %d: Install(%d) = %v, model admits %v", i, e, err, ok)
				}
				if err == nil {
					modelInsert(e)
				}
			case 1:
				dropped := 0
				for held := range model {
					if held < e {
						delete(model, held)
						dropped++
					}
				}
				if n := r.RetireBelow(e); n != dropped {
					t.Fatalf("op %d: RetireBelow(%d) = %d, model %d", i, e, n, dropped)
				}
			case 2, 3:
				if err := signer.Install(e); err != nil {
					signer = NewKeyring(&m, 5) // keep the signer able to sign any epoch
					_ = signer.Install(e)
				}
				tag, _ := signer.Sign(nil, msg, e)
				good := rapid.Bool().Draw(t, "good")
				if !good {
					tag[0] ^= 1
				}
				err := r.VerifyInstall(msg, tag, e)
				switch {
				case !modelAdmits(e):
					if !errors.Is(err, ErrUnknownKey) {
						t.Fatalf("op %d: VerifyInstall(%d) = %v, want ErrUnknownKey", i, e, err)
					}
				case good:
					if err != nil {
						t.Fatalf("op %d: genuine VerifyInstall(%d) = %v", i, e, err)
					}
					modelInsert(e)
				default:
					if !errors.Is(err, ErrBadMAC) {
						t.Fatalf("op %d: forged VerifyInstall(%d) = %v, want ErrBadMAC", i, e, err)
					}
				}
			}
			got := r.Epochs(nil)
			slices.Sort(got)
			var want []uint64
			for held := range model {
				want = append(want, held)
			}
			slices.Sort(want)
			if !slices.Equal(got, want) || r.Len() > KeyringEpochs {
				t.Fatalf("op %d: ring %v, model %v", i, got, want)
			}
		}
		for e := uint64(0); e <= 12; e++ {
			if err := signer.Install(e); err != nil {
				signer = NewKeyring(&m, 5)
				_ = signer.Install(e)
			}
			tag, _ := signer.Sign(nil, msg, e)
			if err := r.Verify(msg, tag, e); (err == nil) != model[e] {
				t.Fatalf("Verify under epoch %d = %v, model holds it: %v", e, err, model[e])
			}
		}
	})
}

// replayModel is the specification of Filter as a map: accept a counter
// below the limit that was never accepted and is not more than ReplayWindow
// behind the highest accepted counter (0 before any).
type replayModel struct {
	seen    map[uint64]bool
	highest uint64
}

func (m *replayModel) validate(counter, limit uint64) bool {
	if counter >= limit || m.seen[counter] {
		return false
	}
	if counter <= m.highest && m.highest-counter > ReplayWindow {
		return false
	}
	m.seen[counter] = true
	m.highest = max(m.highest, counter)
	return true
}

// drawCounters draws counters that mostly stay near a moving front (so the
// window edges are exercised), with duplicates and occasional far jumps.
func drawCounter(t *rapid.T, front *uint64) uint64 {
	switch rapid.IntRange(0, 9).Draw(t, "kind") {
	case 0: // a jump ahead, sometimes beyond the whole ring
		*front += rapid.Uint64Range(1, 64*replayRingBlocks*2).Draw(t, "jump")
		return *front
	case 1: // the window's edge
		edge := *front - min(*front, ReplayWindow)
		return edge + rapid.Uint64Range(0, 2).Draw(t, "edge") - min(edge, 1)
	default: // near the front, behind or ahead
		c := *front + rapid.Uint64Range(0, 80).Draw(t, "ahead")
		c -= min(c, rapid.Uint64Range(0, ReplayWindow+70).Draw(t, "behind"))
		*front = max(*front, c)
		return c
	}
}

// TestPropFilterModel: the filter agrees with the map model on every
// counter, so it never accepts a counter twice and accepts everything
// within the window exactly once.
func TestPropFilterModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var f Filter
		model := replayModel{seen: map[uint64]bool{}}
		limit := uint64(math.MaxUint64)
		if rapid.Bool().Draw(t, "limited") {
			limit = rapid.Uint64Range(1, 20000).Draw(t, "limit")
		}
		front := rapid.Uint64Range(0, 5000).Draw(t, "start")
		for i := range rapid.IntRange(1, 400).Draw(t, "n") {
			c := drawCounter(t, &front)
			if got, want := f.ValidateCounter(c, limit), model.validate(c, limit); got != want {
				t.Fatalf("step %d: ValidateCounter(%d) = %v, model %v (highest %d)", i, c, got, want, model.highest)
			}
		}
	})
}

// TestPropFilterExactlyOnce: any permutation of a block of counters that
// fits in the window, each delivered several times, is accepted exactly
// once per counter.
func TestPropFilterExactlyOnce(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		base := rapid.Uint64Range(0, 1<<40).Draw(t, "base")
		n := rapid.IntRange(1, ReplayWindow+1).Draw(t, "n")
		var deliveries []uint64
		for i := range n {
			for range rapid.IntRange(1, 3).Draw(t, "copies") {
				deliveries = append(deliveries, base+uint64(i))
			}
		}
		perm := rapid.Permutation(deliveries).Draw(t, "order")
		var f Filter
		accepted := map[uint64]int{}
		for _, c := range perm {
			if f.ValidateCounter(c, CounterLimit) {
				accepted[c]++
			}
		}
		if len(accepted) != n {
			t.Fatalf("accepted %d distinct counters of %d", len(accepted), n)
		}
		for c, k := range accepted {
			if k != 1 {
				t.Fatalf("counter %d accepted %d times", c, k)
			}
		}
	})
}

// TestPropEpochFilterModel: EpochFilter accepts (epoch, counter) exactly
// when the per-epoch model does and never accepts an older epoch.
func TestPropEpochFilterModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var f EpochFilter
		var epoch uint64
		model := replayModel{seen: map[uint64]bool{}}
		front := uint64(0)
		for i := range rapid.IntRange(1, 200).Draw(t, "n") {
			e := epoch
			switch rapid.IntRange(0, 9).Draw(t, "epochKind") {
			case 0:
				e = epoch + rapid.Uint64Range(1, 3).Draw(t, "newer")
			case 1:
				e = epoch - min(epoch, rapid.Uint64Range(1, 2).Draw(t, "older"))
			}
			c := drawCounter(t, &front)
			var want bool
			switch {
			case e < epoch:
				want = false
			case e > epoch:
				epoch, model, front = e, replayModel{seen: map[uint64]bool{}}, c
				want = model.validate(c, CounterLimit)
			default:
				want = model.validate(c, CounterLimit)
			}
			if err := f.Accept(e, c); (err == nil) != want || (err != nil && !errors.Is(err, ErrReplay)) {
				t.Fatalf("step %d: Accept(%d, %d) = %v, model accepts %v", i, e, c, err, want)
			}
		}
	})
}
