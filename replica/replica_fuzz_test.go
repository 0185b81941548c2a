package replica

import (
	"net/netip"
	"testing"

	"github.com/seqbus/seqbus/wire"
)

// admitInvariants drives a standby's Replica with the frames, history
// ids, NEW_EPOCHs and clock steps ops encodes, carrying out each answer
// as node does, and fails when it panics or breaks a rule of what a
// standby takes: nothing of an epoch the fence refuses or older than the
// followed one (except a RETRANSMIT of records before the followed
// epoch's start, from the followed primary), nothing of a newer epoch;
// no DATA nor NEED_SNAPSHOT before its primary's history is confirmed
// (a node that latched another history after that acknowledges and
// leads nothing, but still journals what its primary sends: its
// operator empties the directory); a node not configured
// is never learnt; the ask for NEW_EPOCH and the ask for the history
// each leave at most once a millisecond, and the latter only to the
// followed primary's address, never while latched foreign.
func admitInvariants(t *testing.T, ops []byte) {
	noFencing := len(ops) > 0 && ops[0]&0x80 != 0
	peers := map[uint32]netip.AddrPort{2: netip.MustParseAddrPort("127.0.0.2:1"), 3: netip.MustParseAddrPort("127.0.0.3:1")}
	r := NewReplica(ReplicaConfig[netip.AddrPort]{Roles: RolesConfig{NoFencing: noFencing}, Follower: testFollowerConfig(8), MaxSessions: 2, Peers: peers})
	if len(ops) > 1 {
		_ = r.Roles().Fence().Accept(uint64(ops[1] % 4))
	}
	r.Roles().Recovered()
	r.Identity().Set(uint64(len(ops) % 3)) // 0: a new directory
	if err := r.Follower().Reset(0); err != nil {
		t.Fatal(err)
	}
	i := 2
	next := func() byte {
		if i < len(ops) {
			i++
			return ops[i-1]
		}
		return 0
	}
	now, lastEpochAsk, lastHistoryAsk := int64(1_000_000_000), int64(-1_000_000_000), int64(-1_000_000_000)
	types := [...]wire.Type{wire.TypeData, wire.TypeRetransmit, wire.TypeHeartbeat, wire.TypeHash, wire.TypeNeedSnapshot, wire.TypeSnapshotChunk}
	for i < len(ops) {
		switch op := next() % 8; op {
		case 0:
			now += int64(next()) * 50_000
		case 1: // a primary's history id (a HEARTBEAT's or NEW_EPOCH's)
			id := uint64(next() % 3)
			if _, adopt, _ := r.HeardHistory(id); adopt {
				r.Identity().Adopted(id) // recorded durably first
			}
		case 2: // a NEW_EPOCH followed (kept: nothing to cut)
			ne := wire.NewEpoch{PrevEpoch: r.Roles().Epoch(), LastSeq: uint64(next() % 8)}
			ne.Epoch = r.Roles().Epoch() + uint64(next()%3)
			from := uint32(next()%3) + 2
			rd := r.NewEpoch(&ne, from, 0, mapLog{})
			if rd.Reconciling {
				rd = r.Roles().Reconciled()
			}
			if rd.Primary != 0 {
				r.LearnPrimary(rd.Primary, now)
			}
		default:
			epoch0, fenced := r.Roles().Epoch(), r.Roles().Fence().Highest()
			prim0, confirmed0, foreign0 := r.Follower().Standby().Primary(), r.Identity().Confirmed(), r.Identity().Foreign()
			start := r.Roles().History().Start()
			f := wire.Frame{Header: wire.Header{Type: types[next()%byte(len(types))], Epoch: uint64(next() % 5),
				Node: uint32(next()%3) + 2, Seq: uint64(next() % 16)}}
			f.Count = uint16(next()%4) + 1
			a := r.Admit(&f, now)
			older := f.Type == wire.TypeRetransmit && f.Node == prim0 && prim0 != 0 && f.LastSeq() < start && f.Epoch < epoch0
			if a.Drop == AdmitTake && !noFencing && !older && (f.Epoch != epoch0 || f.Epoch < fenced) {
				t.Fatalf("took %v of epoch %d at epoch %d (fence %d)", f.Type, f.Epoch, epoch0, fenced)
			}
			if a.Drop == AdmitTake && (f.Type == wire.TypeData || f.Type == wire.TypeRetransmit || f.Type == wire.TypeNeedSnapshot) && !confirmed0 {
				t.Fatalf("took %v before the primary's history was confirmed", f.Type)
			}
			if p := r.Follower().Standby().Primary(); p == 4 || (a.NewPrimary && p != f.Node) {
				t.Fatalf("primary %d after %+v from %d", p, a, f.Node)
			}
			if a.AskNewEpoch {
				if now-lastEpochAsk < 1_000_000 {
					t.Fatalf("asked for NEW_EPOCH again after %d ns", now-lastEpochAsk)
				}
				lastEpochAsk = now
			}
			if a.AskHistory {
				to, ok := r.PrimaryAddr()
				if foreign0 || !ok || to != peers[r.Follower().Standby().Primary()] || now-lastHistoryAsk < 1_000_000 {
					t.Fatalf("asked %v (addressed %v) for the history: foreign %v, after %d ns", to, ok, foreign0, now-lastHistoryAsk)
				}
				lastHistoryAsk = now
			}
		}
	}
}

func FuzzReplicaAdmit(f *testing.F) {
	for _, seed := range [][]byte{
		{0, 1, 3, 0, 1, 0, 1, 1, 1, 3, 0, 1, 0, 1},
		{0x80, 2, 2, 1, 2, 3, 3, 1, 2, 0, 0, 200, 4, 4, 4, 1},
		{1, 0, 1, 1, 3, 2, 3, 1, 1, 0, 20, 3, 0, 0, 1, 2, 0},
	} {
		f.Add(seed)
	}
	f.Fuzz(admitInvariants)
}
