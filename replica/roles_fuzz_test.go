package replica

import (
	"testing"

	"github.com/seqbus/seqbus/wire"
)

// rolesInvariants drives a Roles with the inputs ops encodes, carrying
// out each RolesReady as node does (the outcome of the I/O chosen by the
// next byte), and fails when it panics or breaks a rule of the term:
// the epoch and the fence never go back and the epoch never passes the
// fence; only a primary steps down, drops or keeps queued outputs; a
// node leads only after its drain and announces only as the primary of
// the epoch it built; a reconciliation cuts only above the fork; a node
// that followed a NEW_EPOCH verified its history against it; a primary
// that is not UNSAFE NoFencing never ignores a newer NEW_EPOCH.
func rolesInvariants(t *testing.T, ops []byte) {
	noFencing := len(ops) > 0 && ops[0]&0x80 != 0
	r := NewRoles(RolesConfig{NoFencing: noFencing})
	log := mapLog{}
	var applied uint64
	r.Recovered()
	i := 0
	next := func() byte {
		if i < len(ops) {
			i++
			return ops[i-1]
		}
		return 0
	}
	for i < len(ops) {
		epoch0, fence0, primary0 := r.Epoch(), r.Fence().Highest(), r.Primary()
		var rd RolesReady
		switch op := next() % 10; op {
		case 0: // a record applied and journaled under the epoch
			applied++
			log[applied] = r.Epoch()
		case 1, 2: // the lease's decision
			d := Decision{Do: Leadership(next() % 6), Epoch: r.Epoch() + uint64(next()%3)}
			rd = r.Lease(d)
		case 3:
			rd = r.Drained(applied, log)
			if rd.Lead {
				if rd.LeadFrom != applied+1 || rd.PrevEpoch >= rd.Epoch {
					t.Fatalf("lead %+v with applied %d", rd, applied)
				}
				if next()%4 == 0 {
					rd = r.LeadFailed()
				} else if err := r.BecomePrimary(rd.Epoch); err != nil {
					rd = r.LeadFailed()
				} else {
					rd = r.Led()
					if !rd.Announce || r.History().Start() != applied+1 || r.History().Verified() != r.Epoch() {
						t.Fatalf("led %+v: history start %d verified %d", rd, r.History().Start(), r.History().Verified())
					}
				}
			}
		case 4:
			r.DrainFailed()
		case 5, 6: // a NEW_EPOCH
			ne := wire.NewEpoch{PrevEpoch: uint64(next() % 4), LastSeq: uint64(next() % 16)}
			ne.Epoch = max(r.Epoch()+uint64(next()%3), 1) - 1
			known := next()%8 != 0
			rd = r.NewEpoch(&ne, 2, known, applied, log)
			if rd.Ignored && (!noFencing || !primary0) {
				t.Fatalf("NEW_EPOCH %d ignored by a node that is not an UNSAFE primary", ne.Epoch)
			}
			if rd.Reconciling {
				rolesReconcile(t, &r, &rd, &ne, &applied, log, next()%5 == 0)
			}
		case 7:
			_ = r.Fence().Accept(r.Fence().Highest() + uint64(next()%2))
		case 8:
			rd = r.Reconciled()
		case 9:
			r.ResetFailed()
			rd = r.Led()
		}
		if (rd.StepDown || rd.LeaseLost || rd.KeepQueued) && !primary0 {
			t.Fatalf("%+v on a standby", rd)
		}
		if rd.StepDown && r.Primary() {
			t.Fatalf("still primary after a step-down %+v", rd)
		}
		if r.Epoch() < epoch0 || r.Fence().Highest() < fence0 || r.Epoch() > r.Fence().Highest() {
			t.Fatalf("epoch %d -> %d, fence %d -> %d", epoch0, r.Epoch(), fence0, r.Fence().Highest())
		}
	}
}

// rolesReconcile carries out a reconciliation as node does (failed: the
// journal cut failed) and checks it.
func rolesReconcile(t *testing.T, r *Roles, rd *RolesReady, ne *wire.NewEpoch, applied *uint64, log mapLog, failed bool) {
	if r.Primary() {
		t.Fatalf("reconciling while primary: %+v", rd)
	}
	switch rd.Reconcile {
	case Truncate:
		if rd.CutAfter != ne.LastSeq || rd.CutAfter >= *applied {
			t.Fatalf("truncate after %d with applied %d, fork %d", rd.CutAfter, *applied, ne.LastSeq)
		}
		for s := rd.CutAfter + 1; s <= *applied; s++ {
			delete(log, s)
		}
		*applied = rd.CutAfter
	case Discard:
		clear(log)
		*applied = 0
	}
	if failed {
		r.ResetFailed()
		return
	}
	refused := r.Fence().Refuses(ne.Epoch)
	f := r.Reconciled()
	if !f.Follow || r.Primary() || r.History().Verified() != ne.Epoch || (!refused && r.Epoch() != ne.Epoch) {
		t.Fatalf("reconciled %+v: primary %v epoch %d verified %d", f, r.Primary(), r.Epoch(), r.History().Verified())
	}
}

func FuzzRoles(f *testing.F) {
	f.Add([]byte{0, 0, 1, 1, 1, 3, 1, 0, 5, 1, 3, 2, 1, 8})          // promote, lead, a newer NEW_EPOCH, follow
	f.Add([]byte{0, 0, 0, 1, 1, 1, 3, 1, 0, 2, 2, 1, 3, 1, 4})       // promote, then a new term
	f.Add([]byte{0x80, 0, 1, 1, 1, 3, 1, 5, 2, 3, 2, 1})             // UNSAFE NoFencing primary ignores NEW_EPOCH
	f.Add([]byte{0, 0, 0, 0, 5, 1, 2, 2, 1, 1, 5, 1, 3, 1, 1, 2, 3}) // truncate, step-down on lease
	f.Fuzz(func(t *testing.T, ops []byte) { rolesInvariants(t, ops) })
}

// A repeated NEW_EPOCH (every 100 ms from the primary) and a stale one
// allocate nothing; nor do the per-frame older-history query and
// following a new epoch.
func TestRolesNewEpochNoAllocations(t *testing.T) {
	r := NewRoles(RolesConfig{})
	log := mapLog{1: 1, 2: 1}
	_ = r.Fence().Accept(2)
	r.Recovered()
	repeat := wire.NewEpoch{PrevEpoch: 1, LastSeq: 2}
	repeat.Epoch = 2
	stale := repeat
	stale.Epoch = 1
	if n := testing.AllocsPerRun(1000, func() {
		if rd := r.NewEpoch(&repeat, 2, true, 2, log); !rd.Repeat {
			t.Fatalf("%+v", rd)
		}
		if rd := r.NewEpoch(&stale, 2, true, 2, log); rd.Drop != DropStale {
			t.Fatalf("%+v", rd)
		}
	}); n != 0 {
		t.Fatalf("%v allocations per repeated NEW_EPOCH", n)
	}
	older := wire.Frame{Header: wire.Header{Type: wire.TypeRetransmit, Epoch: 1, Node: 2, Seq: 1, Count: 1}}
	r.History().Follow(&repeat)
	if n := testing.AllocsPerRun(1000, func() {
		if !r.OlderHistory(&older, 2) {
			t.Fatal("a retransmit of epoch 1 below the fork is not older history")
		}
	}); n != 0 {
		t.Fatalf("%v allocations per older-history query", n)
	}
	newer := repeat
	if n := testing.AllocsPerRun(1000, func() {
		newer.Epoch++
		r.NewEpoch(&newer, 2, true, 2, log)
		if rd := r.Reconciled(); !rd.Follow {
			t.Fatalf("%+v", rd)
		}
	}); n != 0 {
		t.Fatalf("%v allocations per NEW_EPOCH followed", n)
	}
}
