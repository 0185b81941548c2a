// Package etcdarb is a seqbus lease arbiter on an etcd cluster: the
// alternative to the UDP witness for venues that already run etcd (or
// want the arbiter replicated). The node's arbiter.Keeper, fencing,
// gating and step-down code are unchanged; only the arbiter client
// differs. Client is an arbiter.Backend, like the UDP witness's: it takes
// the keeper's requests, runs them against etcd, and hands the keeper the
// same arbiter.Reply a witness would have sent. It imports arbiter only,
// never package witness.
//
// # Keys
//
// For stream S under prefix P (default "/seqbus"):
//
//	P/S/leader  the live holder's node ID (decimal), attached to its etcd
//	            lease: it disappears when the lease expires. Its
//	            CreateRevision is the holder's fencing epoch.
//	P/S/term    the last holder's node ID; its ModRevision is the epoch of
//	            the last new term. Never expires: it is the "previous
//	            holder" of the promotion rule and the highest epoch issued.
//	P/S/insync  {"version":V,"members":[...]}: the in-sync set, version V
//	            grown by one with every change and every new term.
//
// All three are written together by the transaction that starts a term;
// the in-sync set is then changed only by its holder.
//
// # Rules (the same as arbiter.Arbiter's)
//
//  1. Acquire: read the three keys in one linearizable transaction. If the
//     leader key is ours, extend it (as a renew, same epoch). If another
//     node's, refuse (holder and epoch in the deny). If absent, the node
//     may take the lease only in a fresh cluster (no term key), as the last
//     holder, or as a member of the set; otherwise it is refused (not in
//     sync). An eligible node grants an etcd lease with TTL = lease
//     rounded UP to whole seconds, then commits
//     If(leader CreateRevision = 0, term ModRevision = read, insync
//     ModRevision = read) Then(put leader with the lease, put term, put
//     insync with version+1 and without the new holder). The conditions
//     make the check against what was read atomic with the write. The
//     epoch is that transaction's revision = the leader key's
//     CreateRevision: etcd revisions only grow, so every new holder gets a
//     higher epoch than every earlier one (epochs are not consecutive; a
//     fence only needs them to grow).
//  2. Renew: one KeepAliveOnce on our etcd lease, then a transaction
//     checking that the leader key still has our epoch as CreateRevision
//     and our lease. A lease etcd no longer has (expired: it cannot be
//     revived) or a leader key that is not ours is refused. The grant's
//     duration is etcd's TTL capped at LeaseDurationNs; the keeper times
//     it from the request's send time (Tick's nowNs), which is before the
//     keep-alive reached etcd, so the node's view ends no later than etcd's
//     lease, minus the keeper's margin.
//  3. In-sync change (a proposal riding on a granted renew): judged like
//     RenewWithInSync against the set the renew read (stale base or
//     invalid set: refused, renew still granted, reply carries the set in
//     force), then written with If(leader CreateRevision = epoch, leader
//     lease = ours, insync ModRevision = read). A deposed holder can never
//     change the set.
//  4. An etcd error or timeout produces no reply at all, like a lost
//     datagram: the keeper retries after RetryNs and, if etcd stays
//     unreachable, its lease runs out on its own clock and the node stops
//     releasing. Failures are counted (Stats) and logged once per episode.
//
// A deny's RemainingNs is 0 (unknown): nodes act on its holder and epoch.
//
// # Timing and etcd configuration
//
// etcd counts lease TTLs in whole seconds and raises every TTL to its
// minimum, 1.5 election timeouts rounded up to a second (2 s with etcd's
// default 1 s election timeout). The keeper is told the SMALLER of
// LeaseDurationNs and etcd's TTL, which is the safe direction: etcd keeps
// the lease at least as long as the node believes it holds it. The cost is
// failover time: other nodes wait for etcd's TTL, plus up to 500 ms for
// etcd's expiry scan. So either run etcd with a short election timeout
// (--heartbeat-interval 50 --election-timeout 500 makes the minimum 1 s)
// or expect failover to take etcd's minimum TTL.
//
// While etcd elects a new raft leader (after its leader dies), it answers
// nothing for one to three election timeouts. A holder's lease survives
// that only if its view (lease - margin after its last renewal was SENT,
// which can be a whole renew interval before the outage) outlasts it.
// Measured here: etcd silent 0.7-1.9 s with a 500 ms election timeout,
// 0.5-0.9 s with 250 ms. A 1 s lease (view 850 ms) survives neither; a
// 2 s lease with --heartbeat-interval 25 --election-timeout 250 does
// (TestMemberFailures). With etcd, use a 2 s lease and a 250 ms election
// timeout, or a 3 s lease with etcd's defaults. Losing a follower costs
// nothing.
//
// Measured on the 2-core test machines (3-member etcd 3.4 on loopback):
// acquisition 9-20 ms (read, lease grant and transaction: two raft
// writes), renew round trip 2-7 ms (keep-alive and a linearizable read),
// holder death to new grant = the rest of the dead holder's etcd lease +
// up to 0.5 s (etcd scans for expired leases every 500 ms) + one retry:
// 1.0-1.3 s at a 1 s lease, 2.1-2.2 s at 2 s. The UDP witness answers in
// tens of microseconds; etcd buys a replicated arbiter, not speed.
//
// Caveats: the keys must belong to this package alone (a foreign value
// stops every grant, ErrCorruptValue; it never guesses); an operator who
// deletes the leader key lets another node acquire before the holder's
// view ends (do not); a cluster rebuilt from nothing restarts revisions,
// hence epochs, at 1, and fences then refuse the new primary (safe but
// stuck: restore etcd from a snapshot instead). etcd 3.4 before 3.4.28 and
// 3.5 before 3.5.11 let a partitioned etcd leader renew leases until it
// notices it lost quorum; the renew's second step (a linearizable read)
// fails there, so no grant results from it.
//
// # Usage contract
//
//  1. Build the node's arbiter.Keeper, then New(cfg, keeper) with the same
//     LeaseDurationNs. New checks the cluster answers within DialTimeoutNs
//     (ErrUnreachable names the endpoints otherwise) and starts one worker
//     goroutine.
//  2. In the node's loop, under the lock that guards the keeper, read the
//     monotonic clock and call Tick(nowNs, deliver) about every
//     millisecond. Tick never blocks on etcd: it hands a due request to the
//     worker (at most one operation runs, one waits; a newer request
//     replaces a waiting one) and delivers finished replies to the keeper
//     exactly as arbiter.Reply.Deliver does, then passes each to deliver
//     so the node can adopt the in-sync set it carries.
//  3. The primary calls ProposeInSync(baseVersion, members) (then
//     keeper.Hurry) under the same lock; the proposal rides on the next
//     renew.
//  4. Lead only while keeper.MayLead(nowNs); stamp frames with
//     keeper.Epoch(), as with the witness.
//  5. Query (any goroutine) tells tools and clients who leads.
//  6. Close stops the worker and the etcd connection. It revokes nothing:
//     the other nodes take over after the lease expires, exactly as after
//     a crash.
//
// A node loop:
//
//	k, _ := arbiter.NewKeeper(self, arbiter.DefaultConfig())
//	c, err := etcdarb.New(etcdarb.Config{Endpoints: eps, Node: self,
//		LeaseDurationNs: arbiter.DefaultLeaseDurationNs}, k)
//	k.SetWantLead(true)
//	for {
//		mu.Lock()
//		c.Tick(monotonicNs(), func(r arbiter.Reply) { adoptInSync(&r) })
//		if k.MayLead(monotonicNs()) {
//			releaseUpTo(released, k.Epoch())
//		}
//		mu.Unlock()
//	}
package etcdarb
