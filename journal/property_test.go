package journal

import (
	"errors"
	"testing"

	"pgregory.net/rapid"
)

// TestPropertyAppendSyncCrash drives a journal on MemFS with random
// appends, syncs, truncations, resets, clean reopens and crashes, against a
// model. After every crash: nothing Durable() reported is lost, every
// recovered record is exactly a model record, and the log is a prefix.
func TestPropertyAppendSyncCrash(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		fsys := NewMemFS()
		opts := Options{
			SegmentBytes: MinSegmentBytes, MaxPayloadBytes: 300, IndexIntervalBytes: 200,
			Policy:       rapid.SampledFrom([]SyncPolicy{SyncGroup, SyncAlways, SyncNone}).Draw(t, "policy"),
			GroupRecords: 4, GroupWindowNs: 100,
			// Write batching on in some runs: durability must still never
			// count a record that was not written.
			WriteBufferBytes: rapid.SampledFrom([]int{0, 0, 512, 4096}).Draw(t, "writeBuffer"),
			// The next segment prepared ahead in some runs: a roll then
			// renames it, and a crash must lose nothing durable either way.
			PrepareAhead: rapid.Bool().Draw(t, "prepareAhead"),
		}
		j, _ := mustOpen(t, fsys, testDir, opts)
		var model []record
		var base uint64 // seq before model[0]
		epoch := uint64(1)
		nowNs := int64(0)
		lastSeq := func() uint64 { return base + uint64(len(model)) }
		reopen := func(crash bool, seed uint64) {
			durable := j.Durable()
			if crash {
				if j.spareDone != nil {
					<-j.spareDone // a crash ends the preparer too
				}
				fsys.Crash(seed)
			} else if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			var rec Recovery
			var err error
			j, rec, err = Open(fsys, testDir, opts)
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			got := readAll(t, j)
			if len(got) > 0 && got[0].seq != base+1 {
				t.Fatalf("recovered log starts at %d, want %d", got[0].seq, base+1)
			}
			if err := diffRecords(got, model[:min(len(got), len(model))]); err != nil {
				t.Fatal(err)
			}
			kept := base + uint64(len(got))
			if opts.Policy != SyncNone || !crash {
				if kept < durable {
					t.Fatalf("lost durable records: recovered to %d, durable was %d", kept, durable)
				}
			}
			if !crash && len(got) != len(model) {
				t.Fatalf("clean reopen lost records")
			}
			model = model[:len(got)]
			if len(got) == 0 && base > 0 {
				// The node reinstalls its snapshot.
				if err := j.ResetTo(base); err != nil {
					t.Fatal(err)
				}
			}
			epoch = max(epoch, rec.HighestEpoch)
		}
		t.Repeat(map[string]func(*rapid.T){
			"append": func(t *rapid.T) {
				if rapid.IntRange(0, 9).Draw(t, "bump") == 0 {
					epoch++
				}
				p := payloadFor(lastSeq()+1, rapid.IntRange(0, 300).Draw(t, "size"))
				nowNs += int64(rapid.IntRange(0, 60).Draw(t, "dt"))
				if err := j.Append(epoch, lastSeq()+1, p, nowNs); err != nil {
					t.Fatal(err)
				}
				model = append(model, record{epoch, lastSeq() + 1, p})
			},
			"refused": func(t *rapid.T) {
				if lastSeq() == 0 {
					t.Skip("an empty journal accepts any first seq")
				}
				err := j.Append(epoch, lastSeq()+2, nil, nowNs)
				if !errors.Is(err, ErrSeqGap) {
					t.Fatalf("gap accepted: %v", err)
				}
			},
			"flush": func(t *rapid.T) {
				if err := j.Flush(); err != nil {
					t.Fatal(err)
				}
				if opts.Policy == SyncNone && j.Durable() != lastSeq() {
					t.Fatalf("Durable %d after Flush under none, last %d", j.Durable(), lastSeq())
				}
			},
			"syncIfDue": func(t *rapid.T) {
				if err := j.Flush(); err != nil { // as the node does before a sync
					t.Fatal(err)
				}
				if j.SyncDue(nowNs) {
					if err := j.Sync(); err != nil {
						t.Fatal(err)
					}
					if j.Durable() != lastSeq() {
						t.Fatalf("Durable %d after Sync, last %d", j.Durable(), lastSeq())
					}
				}
			},
			"sync": func(t *rapid.T) {
				if err := j.Sync(); err != nil {
					t.Fatal(err)
				}
			},
			"truncate": func(t *rapid.T) {
				if len(model) == 0 {
					t.Skip("empty")
				}
				keep := rapid.IntRange(0, len(model)).Draw(t, "keep")
				if err := j.TruncateAfter(base + uint64(keep)); err != nil {
					t.Fatal(err)
				}
				model = model[:keep]
			},
			"reset": func(t *rapid.T) {
				to := lastSeq() + uint64(rapid.IntRange(0, 5).Draw(t, "ahead"))
				if err := j.ResetTo(to); err != nil {
					t.Fatal(err)
				}
				model, base = nil, to
			},
			"readFrom": func(t *rapid.T) {
				if len(model) == 0 {
					t.Skip("empty")
				}
				i := rapid.IntRange(0, len(model)-1).Draw(t, "from")
				var got []record
				if err := j.ReadFrom(model[i].seq, func(e, s uint64, p []byte) bool {
					got = append(got, record{e, s, append([]byte(nil), p...)})
					return true
				}); err != nil {
					t.Fatal(err)
				}
				if err := diffRecords(got, model[i:]); err != nil {
					t.Fatal(err)
				}
			},
			"crash":  func(t *rapid.T) { reopen(true, rapid.Uint64().Draw(t, "seed")) },
			"reopen": func(t *rapid.T) { reopen(false, 0) },
			"": func(t *rapid.T) {
				if d := j.Durable(); d > lastSeq() {
					t.Fatalf("Durable %d beyond last %d", d, lastSeq())
				}
				if _, s := j.Last(); s != lastSeq() {
					t.Fatalf("Last %d, model %d", s, lastSeq())
				}
			},
		})
		_ = j.Close()
	})
}
