package witness

import (
	"bytes"
	"testing"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/wire"
)

// FuzzHandle feeds arbitrary datagrams to the frame handler of a witness
// whose node 1 holds epoch 1: a, then b, then a again (so a valid a is
// also a resend). It checks that nothing panics, that every datagram is
// either answered with a well-formed reply or counted as a drop, that no
// grant names an epoch or in-sync version that is not durable, that one
// epoch is only ever granted to one node, and that no set contains its
// holder. Seeds include renews carrying proposals.
func FuzzHandle(f *testing.F) {
	acq := func(node arbiter.NodeID, id uint64) []byte {
		b, _ := AppendRequest(nil, arbiter.Request{ID: id, Kind: arbiter.RequestAcquire, Node: node}, 0)
		return b
	}
	ren := func(node arbiter.NodeID, id, epoch uint64) []byte {
		b, _ := AppendRequest(nil, arbiter.Request{ID: id, Kind: arbiter.RequestRenew, Node: node, Epoch: epoch}, 0)
		return b
	}
	f.Add(acq(2, 1), acq(2, 1), uint32(0))
	f.Add(ren(1, 2, 1), acq(3, 4), uint32(1e6))
	f.Add(acq(1, 1), ren(1, 1, 1), uint32(3e8))
	f.Add(AppendQuery(nil, 0, 0, 9), []byte{}, uint32(5))
	f.Add(acq(2, 7), acq(2, 8), uint32(2e8))
	prop := func(node arbiter.NodeID, id, epoch, base uint64, members ...arbiter.NodeID) []byte {
		p := arbiter.InSyncProposal{BaseVersion: base, N: len(members)}
		copy(p.Members[:], members)
		b, _ := AppendRequestInSync(nil, arbiter.Request{ID: id, Kind: arbiter.RequestRenew, Node: node, Epoch: epoch}, 0, p)
		return b
	}
	f.Add(prop(1, 2, 1, 1, 2, 3), acq(2, 1), uint32(3e8))
	f.Add(prop(1, 2, 1, 1, 1), prop(1, 3, 1, 1, 4, 4), uint32(0))
	f.Add(prop(1, 2, 1, 1, 2, 3, 4, 5, 6, 7, 8, 9), acq(3, 1), uint32(2e8))
	f.Add((&wire.Lease{Type: wire.TypeLeaseGrant, Origin: wire.Origin{Epoch: 1}, DurationNs: 1}).Append(nil), []byte("SB"), uint32(0))
	declined, _ := AppendRequest(nil, arbiter.Request{ID: 5, Kind: arbiter.RequestRelease, Node: 1, Epoch: 1, Declined: true}, 0)
	f.Add(declined, acq(2, 1), uint32(0))
	f.Fuzz(func(t *testing.T, a, b []byte, dtNs uint32) {
		store := &memStore{}
		s, err := newTestCore(testConfig(), store)
		if err != nil {
			t.Fatal(err)
		}
		s.handle(acq(1, 1), nodeAddr, 0)
		holders := map[uint64]arbiter.NodeID{1: 1}
		nowNs := int64(dtNs)
		for i, pkt := range [][]byte{a, b, a} {
			in := bytes.Clone(pkt)
			before := s.Stats()
			reply := s.handle(pkt, nodeAddr, nowNs+int64(i))
			if !bytes.Equal(in, pkt) {
				t.Fatal("handle modified its input")
			}
			after := s.Stats()
			if reply == nil {
				// A LEASE_RELEASE is never answered (counted in Releases).
				if after.Dropped() != before.Dropped()+1 && after.Releases != before.Releases+1 {
					t.Fatalf("datagram %d neither answered nor counted as dropped or a release", i)
				}
				continue
			}
			if after.Dropped() != before.Dropped() {
				t.Fatalf("datagram %d answered and counted as dropped", i)
			}
			r, err := ParseReply(reply)
			if err != nil {
				t.Fatalf("malformed reply: %v", err)
			}
			if !r.Granted() {
				continue
			}
			if r.Epoch > store.epoch || r.InSyncVersion > store.state.InSyncVersion {
				t.Fatalf("granted epoch %d version %d, durable %+v", r.Epoch, r.InSyncVersion, store.state)
			}
			if r.Members.Contains(r.Holder) {
				t.Fatalf("grant %+v: holder in its own set", r)
			}
			if r.DurationNs > testLeaseNs {
				t.Fatalf("granted %d ns, lease is %d", r.DurationNs, testLeaseNs)
			}
			if h, ok := holders[r.Epoch]; ok && h != r.Holder {
				t.Fatalf("epoch %d granted to %d and %d", r.Epoch, h, r.Holder)
			}
			holders[r.Epoch] = r.Holder
		}
	})
}

// FuzzDecodeState: any bytes either decode to a valid state whose record
// (version 2, or version 1 for an epoch-only state) is exactly those
// bytes, or are refused as corrupt; never a panic.
func FuzzDecodeState(f *testing.F) {
	good := encodeState(arbiter.PersistentState{Epoch: 12, InSyncVersion: 3, LastHolder: 1, Members: arbiter.InSyncSet{N: 2, Nodes: [8]arbiter.NodeID{2, 5}}})
	f.Add(good[:])
	v1 := encodeStateV1(12)
	f.Add(v1[:])
	f.Add([]byte("SBWE"))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := decodeState(b)
		if err != nil {
			return
		}
		if err := st.Validate(); err != nil {
			t.Fatalf("accepted an invalid state %+v: %v", st, err)
		}
		rec := encodeState(st)
		if len(b) == stateLenV1 {
			old := encodeStateV1(st.Epoch)
			rec2 := old[:]
			if !bytes.Equal(rec2, b) {
				t.Fatalf("accepted v1 %x, which re-encodes as %x", b, rec2)
			}
			return
		}
		if !bytes.Equal(rec[:], b) {
			t.Fatalf("accepted %x, which re-encodes as %x", b, rec)
		}
	})
}

// FuzzClientReply: any datagram given to a client is either refused with
// an error or decoded and delivered; a delivered grant never gives the
// keeper a lease longer than configured.
func FuzzClientReply(f *testing.F) {
	f.Add((&wire.Lease{Type: wire.TypeLeaseGrant, Origin: wire.Origin{Epoch: 1}, RequestID: 1, DurationNs: 5}).Append(nil))
	f.Add((&wire.Lease{Type: wire.TypeLeaseDeny, Origin: wire.Origin{Epoch: 3}, RequestID: 1, Holder: 2, RemainingNs: 9}).Append(nil))
	f.Add((&wire.Lease{Type: wire.TypeLeaseInfo, RequestID: 1}).Append(nil))
	f.Fuzz(func(t *testing.T, pkt []byte) {
		k, err := arbiter.NewKeeper(4, testConfig().Arbiter)
		if err != nil {
			t.Fatal(err)
		}
		k.SetWantLead(true)
		c := NewClient(k, 0)
		c.Tick(0)
		r, used, err := c.OnDatagram(pkt)
		if err != nil && used {
			t.Fatal("an error reply was used")
		}
		if used && r.Granted() && k.View().DurationNs > testLeaseNs {
			t.Fatalf("view %+v longer than the lease", k.View())
		}
	})
}
