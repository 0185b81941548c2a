package arbiter

import (
	"math"
	"math/big"
	"testing"
)

// FuzzArbiter turns bytes into a sequence of operations (acquire, renew,
// time steps forwards and backwards, queries, restarts) and checks every
// decision against a small model of the lease: at most one live holder,
// epoch+1 for every new holder, persistence asked for exactly on new
// epochs, nothing granted during a restart quarantine, and a free lease is
// granted to the first asker that may be promoted (liveness): anyone in a
// fresh cluster, else a member of the in-sync set or the previous holder.
// Op 6 is a renew carrying a proposal (a bitmask of nodes 0-4, sometimes
// on a stale base), checked against the model's set and version.
func FuzzArbiter(f *testing.F) {
	f.Add([]byte{0, 1, 0, 2, 0, 20, 0, 2, 0, 2, 0, 70, 0, 2, 0})
	f.Add([]byte{0, 1, 0, 1, 1, 1, 2, 0, 64, 1, 1, 1, 0, 2, 0, 3, 0, 0})
	f.Add([]byte{0, 1, 0, 4, 0, 0, 0, 2, 0, 2, 0, 63, 0, 2, 0, 2, 0, 1, 0, 2, 0})
	f.Add([]byte{0, 3, 0, 2, 0, 10, 5, 0, 200, 0, 4, 0, 1, 3, 2, 0, 0, 0})
	f.Add([]byte{0, 1, 0, 6, 1, 4, 2, 0, 64, 0, 2, 0, 0, 1, 0, 6, 2, 0x2a, 4, 0, 0, 2, 0, 70, 0, 3, 0, 0, 1, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		const durationNs = 1000
		cfg := testConfig
		a, err := NewArbiter(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var (
			realNs            int64 // the caller's clock before any backwards reading
			arbiterLastNs     = int64(math.MinInt64)
			holder            NodeID
			epoch             uint64
			expiresAtNs       int64
			quarantineUntilNs int64
			quarantineSet     bool
			persisted         PersistentState
			lastHolder        NodeID
			members           uint8 // bit i: node i is in the set
			version           uint64
		)
		observe := func(readingNs int64) int64 {
			arbiterLastNs = max(arbiterLastNs, readingNs)
			return arbiterLastNs
		}
		readingNs := int64(0)
		for len(data) >= 3 {
			op, node, arg := data[0]%7, NodeID(data[1]%5), data[2]
			data = data[3:]
			switch op {
			case 2: // time forwards
				realNs += int64(arg) * durationNs / 64
				readingNs = realNs
				continue
			case 5: // a backwards reading (a caller bug the arbiter tolerates)
				readingNs = realNs - int64(arg)*durationNs/64
				continue
			case 4: // crash and restart, restoring the persisted epoch
				a, _ = NewArbiter(cfg)
				arbiterLastNs = math.MinInt64
				nowNs := observe(readingNs)
				if err := a.Restore(persisted, nowNs); err != nil {
					t.Fatal(err)
				}
				// Every change of the model's state is a Persist grant, so
				// the model's set, version and last holder are the
				// persisted ones.
				quarantineUntilNs, quarantineSet = nowNs+durationNs, true
				// The new arbiter's clock is a new frame: the old lease
				// cannot be compared with it. The quarantine check below
				// is what covers it (the simulation in property_test.go
				// checks the handover across restarts in real time).
				holder = NodeNone
				continue
			}
			nowNs := observe(readingNs)
			live := holder != NodeNone && nowNs < expiresAtNs
			quarantined := quarantineSet && nowNs < quarantineUntilNs
			if op == 3 {
				q := a.Query(readingNs)
				if q.Holder != NodeNone && (q.Holder != holder || !live || q.Epoch != epoch || q.ExpiresAtNs != expiresAtNs) {
					t.Fatalf("now %d: Query %+v, model holder %d epoch %d until %d", nowNs, q, holder, epoch, expiresAtNs)
				}
				if q.Holder == NodeNone && live && !quarantined {
					t.Fatalf("now %d: Query shows no holder, model has %d until %d", nowNs, holder, expiresAtNs)
				}
				continue
			}
			var d Decision
			presented := epoch + uint64(arg%3) - 1
			var proposal []NodeID
			proposedBits, base := arg&0x1f, version
			if arg&0x20 != 0 {
				base--
			}
			for n := range NodeID(5) {
				if proposedBits&(1<<n) != 0 {
					proposal = append(proposal, n)
				}
			}
			switch op {
			case 0:
				d = a.Acquire(node, readingNs)
			case 1:
				d = a.Renew(node, presented, readingNs)
			default:
				d = a.RenewWithInSync(node, presented, base, proposal, readingNs)
			}
			if d.RemainingNs < 0 || d.RemainingNs > durationNs {
				t.Fatalf("now %d: remaining %d out of range in %+v", nowNs, d.RemainingNs, d)
			}
			var wantGrant, rejoin bool
			switch {
			case node == NodeNone:
			case quarantined:
				// The persisted holder renewing its persisted epoch takes
				// the lease back through the restart's quarantine.
				rejoin = op != 0 && lastHolder != NodeNone && node == lastHolder && presented == epoch && epoch != 0
				wantGrant = rejoin
			case op == 0:
				eligible := epoch == 0 || node == lastHolder || members&(1<<node) != 0
				wantGrant = (!live && eligible) || (live && holder == node)
			default:
				wantGrant = live && holder == node && presented == epoch
			}
			if d.Granted != wantGrant {
				t.Fatalf("now %d: op %d node %d (epoch %d) got %+v; model holder %d epoch %d until %d live %v quarantined %v",
					nowNs, op, node, presented, d, holder, epoch, expiresAtNs, live, quarantined)
			}
			if !d.Granted {
				if d.InSyncVersion != version || d.Members != modelSet(members) {
					t.Fatalf("now %d: deny %+v, model set %05b version %d", nowNs, d, members, version)
				}
				if d.PersistEpoch || d.Persist || d.Reason == ReasonNone || d.InSyncReason != ReasonNone {
					t.Fatalf("malformed deny %+v", d)
				}
				if op == 0 && !live && !quarantined && node != NodeNone && d.Reason != ReasonNotInSync {
					t.Fatalf("now %d: free lease refused to node %d for %s", nowNs, node, d.Reason)
				}
				continue
			}
			if d.Holder != node || d.ExpiresAtNs != nowNs+durationNs || d.RemainingNs != durationNs {
				t.Fatalf("now %d: grant %+v to node %d", nowNs, d, node)
			}
			// An ACQUIRE, even from the live holder, starts a new term (a
			// restarted process must never lead an epoch it may have used:
			// sim bugs A and C); a renewal extends the live one.
			if rejoin {
				quarantineSet = false
			}
			if (live || rejoin) && op != 0 {
				if d.Epoch != epoch || d.PersistEpoch {
					t.Fatalf("now %d: extension %+v of epoch %d", nowNs, d, epoch)
				}
				if op == 6 {
					wantReason := ReasonNone
					switch {
					case base != version:
						wantReason = ReasonInSyncVersion
					case proposedBits&1 != 0 || proposedBits&(1<<node) != 0:
						wantReason = ReasonInSyncInvalid
					}
					if d.InSyncReason != wantReason {
						t.Fatalf("now %d: proposal %v on base %d (version %d) by %d: %+v, want %s", nowNs, proposal, base, version, node, d, wantReason)
					}
					if wantReason == ReasonNone && proposedBits != members {
						members, version = proposedBits, version+1
					}
				}
			} else {
				if d.Epoch != epoch+1 || !d.PersistEpoch {
					t.Fatalf("now %d: new grant %+v after epoch %d", nowNs, d, epoch)
				}
				members &^= 1 << node
				version++
				lastHolder = node
			}
			if d.InSyncVersion != version || d.Members != modelSet(members) {
				t.Fatalf("now %d: grant %+v, model set %05b version %d", nowNs, d, members, version)
			}
			if wantPersist := d.PersistEpoch || d.InSyncReason == ReasonNone && op == 6 && d.InSyncVersion != persisted.InSyncVersion; d.Persist != wantPersist {
				t.Fatalf("now %d: Persist %v in %+v", nowNs, d.Persist, d)
			}
			if d.Persist {
				persisted = d.PersistentState()
			}
			holder, epoch, expiresAtNs = node, d.Epoch, d.ExpiresAtNs
		}
	})
}

// modelSet turns the fuzz model's bitmask into the arbiter's set.
func modelSet(bits uint8) InSyncSet {
	var s InSyncSet
	for n := range NodeID(8) {
		if bits&(1<<n) != 0 {
			s.Nodes[s.N] = n
			s.N++
		}
	}
	return s
}

// FuzzKeeper feeds a keeper arbitrary ticks and arbitrary, possibly forged,
// late or duplicated replies, and checks that it never panics, numbers its
// requests 1, 2, 3, ..., times each view from the send of the request that
// was granted, never lowers its epoch, accepts each reply at most once and
// only for one of the last MaxOutstandingRequests requests, and only
// says MayLead inside its view.
func FuzzKeeper(f *testing.F) {
	f.Add([]byte{4, 0, 0, 0, 0, 1, 1, 3, 0, 0, 10, 2, 1, 2, 2, 0})
	f.Add([]byte{4, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 9, 9, 9, 2, 1, 1, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg := testConfig
		k, err := NewKeeper(1, cfg)
		if err != nil {
			t.Fatal(err)
		}
		var (
			nowNs     int64
			lastID    uint64
			sentAtNs  = map[uint64]int64{}
			answered  = map[uint64]bool{}
			lastEpoch uint64
			lastKind  RequestKind
		)
		for len(data) >= 4 {
			op, b1, b2, b3 := data[0]%5, data[1], data[2], data[3]
			data = data[4:]
			// Reply IDs: mostly recent requests, sometimes anything.
			id := lastID - uint64(b1%12)
			if b1 >= 240 {
				id = uint64(b1) << 40
			}
			switch op {
			case 0:
				nowNs += int64(b1) * 7
				if req, ok := k.Tick(nowNs); ok {
					// An unanswered acquire is resent under its ID while a
					// grant of it could still be used; its view is timed
					// from the first send, which the model keeps.
					retry := req.ID == lastID && req.Kind == RequestAcquire && lastKind == RequestAcquire &&
						!answered[req.ID] && nowNs < sentAtNs[req.ID]+cfg.LeaseDurationNs-cfg.MarginNs
					if (req.ID != lastID+1 && !retry) || req.SentAtNs != nowNs || req.Node != 1 {
						t.Fatalf("request %+v after ID %d (%s) at %d", req, lastID, lastKind, nowNs)
					}
					if req.Kind == RequestRenew && req.Epoch != k.Epoch() {
						t.Fatalf("renew %+v with keeper epoch %d", req, k.Epoch())
					}
					if !retry {
						lastID, lastKind = req.ID, req.Kind
						sentAtNs[req.ID] = nowNs
					}
				}
			case 1:
				epoch, durationNs := uint64(b2%8), int64(b3)*8-64
				if k.OnGrant(id, epoch, durationNs) {
					if answered[id] || id == 0 || id > lastID || lastID-id >= MaxOutstandingRequests {
						t.Fatalf("grant for request %d accepted (last %d, answered %v)", id, lastID, answered[id])
					}
					answered[id] = true
					want := LeaseView{Epoch: epoch, SentAtNs: sentAtNs[id], DurationNs: min(durationNs, cfg.LeaseDurationNs)}
					if k.View() != want {
						t.Fatalf("view %+v after grant of request %d, want %+v", k.View(), id, want)
					}
				}
			case 2:
				if k.OnDeny(id, NodeID(b2), uint64(b3%8), int64(b3)) {
					if answered[id] || id == 0 || id > lastID || lastID-id >= MaxOutstandingRequests {
						t.Fatalf("deny for request %d accepted (last %d)", id, lastID)
					}
					answered[id] = true
				}
			case 3:
				k.SetWantLead(b2%2 == 0)
			case 4:
				nowNs += int64(b1) * 1000
			}
			if k.Epoch() < lastEpoch {
				t.Fatalf("epoch went from %d to %d", lastEpoch, k.Epoch())
			}
			lastEpoch = k.Epoch()
			v := k.View()
			if k.MayLead(nowNs) && (v.Epoch == 0 || nowNs < v.SentAtNs || nowNs >= v.SentAtNs+v.DurationNs-cfg.MarginNs) {
				t.Fatalf("MayLead(%d) with view %+v", nowNs, v)
			}
		}
	})
}

// FuzzMayLead checks MayLead against exact big-integer arithmetic, over the
// whole int64 range.
func FuzzMayLead(f *testing.F) {
	f.Add(uint64(1), int64(0), int64(1000), int64(849), int64(150))
	f.Add(uint64(1), int64(math.MaxInt64-100), int64(1000), int64(math.MaxInt64-1), int64(150))
	f.Add(uint64(1), int64(math.MinInt64), int64(math.MaxInt64), int64(-2), int64(0))
	f.Add(uint64(1), int64(0), int64(100), int64(0), int64(math.MaxInt64))
	f.Fuzz(func(t *testing.T, epoch uint64, sentAtNs, durationNs, nowNs, marginNs int64) {
		got := MayLead(LeaseView{Epoch: epoch, SentAtNs: sentAtNs, DurationNs: durationNs}, nowNs, marginNs)
		deadline := new(big.Int).Add(big.NewInt(sentAtNs), big.NewInt(durationNs))
		deadline.Sub(deadline, big.NewInt(marginNs))
		if top := big.NewInt(math.MaxInt64); deadline.Cmp(top) > 0 {
			deadline = top // the documented saturation
		}
		want := epoch != 0 && marginNs >= 0 && durationNs > marginNs && nowNs >= sentAtNs &&
			big.NewInt(nowNs).Cmp(deadline) < 0
		if got != want {
			t.Fatalf("MayLead(epoch %d, sent %d, duration %d, now %d, margin %d) = %v, want %v",
				epoch, sentAtNs, durationNs, nowNs, marginNs, got, want)
		}
	})
}
