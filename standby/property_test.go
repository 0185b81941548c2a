package standby

import (
	"errors"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

func drawConfig(t *rapid.T) Config {
	cfg := Config{
		// Up to 70 so that some windows need a ring of 128 slots.
		MaxPending:      rapid.IntRange(1, 70).Draw(t, "maxPending"),
		MaxMessageBytes: rapid.IntRange(1, 24).Draw(t, "maxMessageBytes"),
	}
	switch rapid.IntRange(0, 2).Draw(t, "startKind") {
	case 1:
		cfg.Start = rapid.Uint64Range(1, 1000).Draw(t, "start")
	case 2: // exercise arithmetic at the top of the sequence space
		cfg.Start = ^uint64(0) - rapid.Uint64Range(0, 200).Draw(t, "startFromTop")
	}
	return cfg
}

// TestPropertyMatchesModel drives a Window and the map-based model with the
// same random operations and requires every observable, every result and
// the applied log (payloads included) to agree after each step. It also
// checks that a rejected call changes nothing and Ack never goes backwards
// except by a rewinding ResetTo.
func TestPropertyMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := drawConfig(t)
		h := mustHarness(cfg)
		m := newModel(cfg)
		maxPending := uint64(cfg.MaxPending)
		lastAck := h.w.Ack()
		near := func(label string) uint64 { // around the window, wrapping at the top
			return m.applied + rapid.Uint64Range(0, maxPending+3).Draw(t, label)
		}
		deliver := func(seq uint64, payload []byte) {
			before := observe(h.w, len(h.log))
			gap, hasGap, err := h.deliver(seq, payload)
			wantGap, wantHasGap, wantErr := m.onMessage(seq, payload)
			if err != wantErr || gap != wantGap || hasGap != wantHasGap {
				t.Fatalf("OnMessage(%d, %d bytes) = (%v, %v, %v), model (%v, %v, %v)",
					seq, len(payload), gap, hasGap, err, wantGap, wantHasGap, wantErr)
			}
			if err != nil {
				if after := observe(h.w, len(h.log)); !after.equal(before) {
					t.Fatalf("rejected OnMessage(%d) changed observables\nbefore %+v\nafter  %+v", seq, before, after)
				}
			}
		}
		t.Repeat(map[string]func(*rapid.T){
			"deliver": func(t *rapid.T) {
				seq := near("seq")
				deliver(seq, payloadFor(seq, m.maxBytes))
			},
			"deliverOld": func(t *rapid.T) {
				seq := rapid.Uint64Range(0, m.applied).Draw(t, "old")
				deliver(seq, payloadFor(seq, m.maxBytes))
			},
			"deliverFar": func(t *rapid.T) {
				seq := rapid.Uint64().Draw(t, "far")
				deliver(seq, payloadFor(seq, m.maxBytes))
			},
			"deliverTooLarge": func(t *rapid.T) {
				seq := near("seq")
				deliver(seq, make([]byte, m.maxBytes+rapid.IntRange(1, 4).Draw(t, "extra")))
			},
			"heartbeat": func(t *rapid.T) {
				seq := m.applied + rapid.Uint64Range(0, 3*maxPending).Draw(t, "highest")
				if rapid.IntRange(0, 9).Draw(t, "any") == 0 {
					seq = rapid.Uint64().Draw(t, "anyHighest")
				}
				h.w.ObserveHighest(seq)
				m.observeHighest(seq)
			},
			"reset": func(t *rapid.T) {
				s := m.applied + rapid.Uint64Range(0, maxPending+5).Draw(t, "ahead")
				if rapid.IntRange(0, 4).Draw(t, "rewind") == 0 {
					s = m.applied - rapid.Uint64Range(0, min(m.applied, 5)).Draw(t, "behind")
				}
				gap, hasGap := h.w.ResetTo(s)
				wantGap, wantHasGap := m.resetTo(s)
				if gap != wantGap || hasGap != wantHasGap {
					t.Fatalf("ResetTo(%d) = (%v, %v), model (%v, %v)", s, gap, hasGap, wantGap, wantHasGap)
				}
				lastAck = min(lastAck, h.w.Ack()) // a rewind may lower it
			},
			"gaps": func(t *rapid.T) {
				n := rapid.IntRange(0, 6).Draw(t, "cap")
				got := h.w.Gaps(make([]Range, 0, n))
				if want := m.gaps(n); !slices.Equal(got, want) {
					t.Fatalf("Gaps(cap %d) = %v, model %v", n, got, want)
				}
			},
			"": func(t *rapid.T) {
				if diff := compare(h, m); diff != "" {
					t.Fatal(diff)
				}
				if h.w.Ack() < lastAck {
					t.Fatalf("Ack went back from %d to %d", lastAck, h.w.Ack())
				}
				lastAck = h.w.Ack()
			},
		})
	})
}

// TestPropertyDeliveryConverges checks the end-to-end promise without the
// model: whatever mix of duplicates, reorders and drops of 1..N arrives,
// retransmitting the reported gaps leads to exactly 1..N applied once each,
// in order, with the right payloads; Ack always equals the last seq handed
// to ApplyFunc and never decreases. Optionally a snapshot covering 1..k is
// installed at a random point, after which the log must continue at k+1.
func TestPropertyDeliveryConverges(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := Config{
			MaxPending:      rapid.IntRange(1, 80).Draw(t, "maxPending"),
			MaxMessageBytes: rapid.IntRange(1, 16).Draw(t, "maxMessageBytes"),
		}
		n := rapid.Uint64Range(1, 300).Draw(t, "n")
		arrivals := rapid.SliceOfN(rapid.Uint64Range(1, n), 0, int(3*n)).Draw(t, "arrivals")
		snapshotAt := rapid.IntRange(-1, len(arrivals)).Draw(t, "snapshotAt") // -1: none
		h := mustHarness(cfg)
		var snapshotFrom, snapshotTo uint64 // log gap covered by the snapshot
		ack := uint64(0)
		check := func(seq uint64, err error, before observables) {
			if errors.Is(err, ErrNeedSnapshot) {
				if after := observe(h.w, len(h.log)); !after.equal(before) {
					t.Fatalf("ErrNeedSnapshot for %d changed observables", seq)
				}
			} else if err != nil {
				t.Fatalf("OnMessage(%d): %v", seq, err)
			}
			last := uint64(0)
			if len(h.log) > 0 {
				last = h.log[len(h.log)-1].seq
			}
			if h.w.Ack() < ack || (h.w.Ack() != last && h.w.Ack() != snapshotTo) {
				t.Fatalf("Ack %d, previous %d, last applied %d", h.w.Ack(), ack, last)
			}
			ack = h.w.Ack()
		}
		deliver := func(seq uint64) {
			before := observe(h.w, len(h.log))
			_, _, err := h.deliver(seq, payloadFor(seq, h.maxBytes))
			check(seq, err, before)
		}
		for i, seq := range arrivals {
			if i == snapshotAt {
				k := rapid.Uint64Range(h.w.Applied(), n).Draw(t, "snapshotSeq")
				snapshotFrom, snapshotTo = h.w.Applied()+1, k
				h.w.ResetTo(k)
				ack = h.w.Applied() // a snapshot may also drain buffered messages
			}
			deliver(seq)
		}
		// Retransmit loop: the primary announces n and resends every gap
		// the window reports, 16 ranges per NAK.
		var nak [16]Range
		for round := 0; h.w.Applied() < n; round++ {
			if round > int(n)+2 {
				t.Fatalf("no progress: applied %d of %d, gaps %v", h.w.Applied(), n, h.w.Gaps(nak[:0]))
			}
			h.w.ObserveHighest(n)
			for _, r := range h.w.Gaps(nak[:0]) {
				for seq := r.From; seq <= r.To; seq++ {
					deliver(seq)
				}
			}
		}
		var want []uint64
		for seq := uint64(1); seq <= n; seq++ {
			if snapshotFrom == 0 || seq < snapshotFrom || seq > snapshotTo {
				want = append(want, seq)
			}
		}
		var got []uint64
		for _, e := range h.log {
			got = append(got, e.seq)
			if e.payload != string(payloadFor(e.seq, h.maxBytes)) {
				t.Fatalf("seq %d applied with a wrong payload", e.seq)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("applied %v\nwant    %v", got, want)
		}
		if h.w.Pending() != 0 || len(h.w.Gaps(nak[:0])) != 0 {
			t.Fatalf("after convergence: pending %d gaps %v", h.w.Pending(), h.w.Gaps(nak[:0]))
		}
	})
}
