package witness

import (
	"bytes"
	"testing"

	"pgregory.net/rapid"

	"github.com/seqbus/seqbus/arbiter"
)

// TestPropertySafety runs random request streams (small node and request
// ID ranges, so resends and collisions are common), clock steps, failing
// writes and restarts against the server, and checks on every reply:
//
//   - a grant's epoch, in-sync version and set are durable when it is
//     sent (renews carry random proposals);
//   - an epoch is only ever granted to one node;
//   - a grant of a new epoch is never sent while an earlier grant of
//     another epoch could still be live (sent at t with duration D: live
//     until t+D on the witness's clock), across restarts too;
//   - an immediate resend of a request gets the same bytes back;
//   - the reply cache never holds more than NodeTableMax nodes.
func TestPropertySafety(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		store := &memStore{}
		s := mustServer(rt, store)
		// globalNs is the test's clock; a restarted server's own clock
		// starts at its restore time, offsetNs later on the global one.
		var globalNs, offsetNs int64
		offsetNs = -s.lastNowNs
		holders := map[uint64]arbiter.NodeID{}
		var liveUntilNs int64 // latest end of any grant sent, global clock
		var liveEpoch uint64
		var liveHolder arbiter.NodeID
		steps := rapid.IntRange(1, 80).Draw(rt, "steps")
		for i := 0; i < steps; i++ {
			switch rapid.IntRange(0, 9).Draw(rt, "op") {
			case 0, 1:
				globalNs += rapid.Int64Range(0, testLeaseNs).Draw(rt, "dtNs")
			case 2:
				store.fail = rapid.Bool().Draw(rt, "fail")
			case 3:
				if rapid.IntRange(0, 3).Draw(rt, "restart") == 0 {
					s = mustServer(rt, store)
					offsetNs = globalNs - s.lastNowNs
				}
			default:
				node := arbiter.NodeID(rapid.IntRange(1, 3).Draw(rt, "node"))
				id := rapid.Uint64Range(1, 3).Draw(rt, "id")
				req := arbiter.Request{ID: id, Node: node, Kind: arbiter.RequestAcquire}
				if rapid.Bool().Draw(rt, "renew") {
					req.Kind = arbiter.RequestRenew
					req.Epoch = rapid.Uint64Range(0, 4).Draw(rt, "epoch")
				}
				var p arbiter.InSyncProposal
				if req.Kind == arbiter.RequestRenew && rapid.Bool().Draw(rt, "propose") {
					p.BaseVersion = rapid.Uint64Range(1, 4).Draw(rt, "base")
					for n := arbiter.NodeID(1); n <= 3; n++ {
						if rapid.Bool().Draw(rt, "member") {
							p.Members[p.N] = n
							p.N++
						}
					}
				}
				pkt, err := AppendRequestInSync(nil, req, 0, p)
				if err != nil {
					rt.Fatal(err)
				}
				localNs := globalNs - offsetNs
				reply := bytes.Clone(s.handle(pkt, nodeAddr, localNs))
				if reply == nil {
					continue
				}
				again := s.handle(pkt, nodeAddr, localNs)
				if !bytes.Equal(reply, again) {
					rt.Fatalf("immediate resend answered differently")
				}
				r, err := ParseReply(reply)
				if err != nil {
					rt.Fatalf("bad reply: %v", err)
				}
				if r.Kind != arbiter.ReplyGrant {
					continue
				}
				if r.Epoch > store.epoch || !store.found {
					rt.Fatalf("granted epoch %d, durable %d", r.Epoch, store.epoch)
				}
				if r.InSyncVersion > store.state.InSyncVersion ||
					(r.InSyncVersion == store.state.InSyncVersion && r.Members != store.state.Members) {
					rt.Fatalf("granted set v%d %v, durable v%d %v", r.InSyncVersion, r.Members.Slice(), store.state.InSyncVersion, store.state.Members.Slice())
				}
				if h, ok := holders[r.Epoch]; ok && h != r.Holder {
					rt.Fatalf("epoch %d granted to nodes %d and %d", r.Epoch, h, r.Holder)
				}
				holders[r.Epoch] = r.Holder
				// A new term by the live holder itself is allowed (an
				// acquire from the holder starts one); another node never.
				if r.Epoch != liveEpoch && globalNs < liveUntilNs && r.Holder != liveHolder {
					rt.Fatalf("epoch %d granted at %d while epoch %d may live until %d",
						r.Epoch, globalNs, liveEpoch, liveUntilNs)
				}
				if r.Epoch < liveEpoch {
					rt.Fatalf("epoch went back from %d to %d", liveEpoch, r.Epoch)
				}
				if r.Epoch != liveEpoch {
					liveEpoch, liveUntilNs, liveHolder = r.Epoch, 0, r.Holder
				}
				liveUntilNs = max(liveUntilNs, globalNs+r.DurationNs)
			}
			if n := s.Stats().CacheNodes; n > NodeTableMax {
				rt.Fatalf("cache holds %d nodes", n)
			}
		}
	})
}

// mustServer is newTestServer for rapid, whose T is not a testing.TB.
func mustServer(rt *rapid.T, store Store) *testCore {
	s, err := newTestCore(testConfig(), store)
	if err != nil {
		rt.Fatal(err)
	}
	return s
}

// TestPropertySafetySlowWrites is TestPropertySafety with the Core driven
// as Server drives it: a write the Core asks for completes (or fails) only
// some steps later, with requests, clock steps and restarts in between (a
// restart with a write under way is a crash before it completed: the grant
// is never sent). On every reply, from Step while the write runs or from
// Persisted when it ends:
//
//   - the Core never asks for a second write while one is under way;
//   - a grant's epoch, in-sync version and set are durable when it is
//     produced;
//   - an epoch is only ever granted to one node, and never goes back;
//   - no other node is granted a new epoch while an earlier grant could
//     still be live (timed, as a keeper does, from its request's send).
func TestPropertySafetySlowWrites(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		store := &memStore{}
		s := mustServer(rt, store)
		var globalNs, offsetNs int64
		offsetNs = -s.lastNowNs
		holders := map[uint64]arbiter.NodeID{}
		var liveUntilNs int64
		var liveEpoch uint64
		var liveHolder arbiter.NodeID
		var writing *arbiter.PersistentState // the write under way
		var writingSentNs int64              // when its request was sent
		// check verifies a reply to a request sent at sentNs (global
		// clock): a keeper times its lease from its request's send time,
		// so a grant held back by a write lives no longer than one sent
		// at once.
		check := func(reply []byte, sentNs int64) {
			if reply == nil {
				return
			}
			r, err := ParseReply(reply)
			if err != nil {
				rt.Fatalf("bad reply: %v", err)
			}
			if r.Kind != arbiter.ReplyGrant {
				return
			}
			if r.Epoch > store.epoch || !store.found {
				rt.Fatalf("granted epoch %d, durable %d", r.Epoch, store.epoch)
			}
			if r.InSyncVersion > store.state.InSyncVersion ||
				(r.InSyncVersion == store.state.InSyncVersion && r.Members != store.state.Members) {
				rt.Fatalf("granted set v%d %v, durable v%d %v", r.InSyncVersion, r.Members.Slice(), store.state.InSyncVersion, store.state.Members.Slice())
			}
			if h, ok := holders[r.Epoch]; ok && h != r.Holder {
				rt.Fatalf("epoch %d granted to nodes %d and %d", r.Epoch, h, r.Holder)
			}
			holders[r.Epoch] = r.Holder
			if r.Epoch != liveEpoch && globalNs < liveUntilNs && r.Holder != liveHolder {
				rt.Fatalf("epoch %d granted at %d while epoch %d may live until %d", r.Epoch, globalNs, liveEpoch, liveUntilNs)
			}
			if r.Epoch < liveEpoch {
				rt.Fatalf("epoch went back from %d to %d", liveEpoch, r.Epoch)
			}
			if r.Epoch != liveEpoch {
				liveEpoch, liveUntilNs, liveHolder = r.Epoch, 0, r.Holder
			}
			liveUntilNs = max(liveUntilNs, sentNs+r.DurationNs)
		}
		steps := rapid.IntRange(1, 100).Draw(rt, "steps")
		for i := 0; i < steps; i++ {
			switch rapid.IntRange(0, 10).Draw(rt, "op") {
			case 0, 1:
				globalNs += rapid.Int64Range(0, testLeaseNs).Draw(rt, "dtNs")
			case 2:
				store.fail = rapid.Bool().Draw(rt, "fail")
			case 3:
				if rapid.IntRange(0, 3).Draw(rt, "restart") == 0 {
					writing = nil // a crash: the write never completed
					s = mustServer(rt, store)
					offsetNs = globalNs - s.lastNowNs
				}
			case 4, 5:
				if writing != nil {
					err := store.Save(*writing)
					writing = nil
					check(bytes.Clone(s.Persisted(err)), writingSentNs)
				}
			default:
				pkt := randomRequest(rt)
				rd := s.Step(pkt, nodeAddr, globalNs-offsetNs)
				if rd.MustPersist {
					if writing != nil {
						rt.Fatalf("a second write asked for while one is under way")
					}
					st := rd.State
					writing, writingSentNs = &st, globalNs
					continue
				}
				check(bytes.Clone(rd.Reply), globalNs)
			}
			if n := s.Stats().CacheNodes; n > NodeTableMax {
				rt.Fatalf("cache holds %d nodes", n)
			}
		}
	})
}

// randomRequest draws an acquire or a renew (with a random proposal or
// none) from small node, request ID and epoch ranges.
func randomRequest(rt *rapid.T) []byte {
	node := arbiter.NodeID(rapid.IntRange(1, 3).Draw(rt, "node"))
	id := rapid.Uint64Range(1, 3).Draw(rt, "id")
	req := arbiter.Request{ID: id, Node: node, Kind: arbiter.RequestAcquire}
	if rapid.Bool().Draw(rt, "renew") {
		req.Kind = arbiter.RequestRenew
		req.Epoch = rapid.Uint64Range(0, 4).Draw(rt, "epoch")
	}
	var p arbiter.InSyncProposal
	if req.Kind == arbiter.RequestRenew && rapid.Bool().Draw(rt, "propose") {
		p.BaseVersion = rapid.Uint64Range(1, 4).Draw(rt, "base")
		for n := arbiter.NodeID(1); n <= 3; n++ {
			if rapid.Bool().Draw(rt, "member") {
				p.Members[p.N] = n
				p.N++
			}
		}
	}
	pkt, err := AppendRequestInSync(nil, req, 0, p)
	if err != nil {
		rt.Fatal(err)
	}
	return pkt
}
