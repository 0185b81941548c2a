// Package mdfeed is the market-data ring every node keeps and the
// recovery service it answers from, as a pure core: no clock (time
// arrives as nowNs), no socket, file, lock or goroutine. It decides what
// to send and hands the frames back; the runtime (node/) sends them.
//
// Market data across failovers and lost datagrams (issue 20, items 3-5):
//
//   - Every node keeps a ring of the most recent market-data updates of the
//     commands it applied, by MD seq, contiguous, each with its command's
//     seq (a standby's too, and the journal replay at start-up refills it).
//     Released is the MD seq of the last update published on the
//     market-data group.
//   - The primary does not queue market data in the gate's publisher: it
//     publishes from the ring (Publish), in MD seq order, every update
//     whose command seq is at or below the gate's released watermark. So
//     an update is never dropped: a primary that loses its lease drops its
//     queued outputs (clients resend), and its market data waits in the
//     ring until it leads again; nothing is published past an update not
//     yet released. The ring applies back-pressure (Full): commands are
//     refused before its unpublished updates could be overwritten.
//   - The primary's HEARTBEAT carries the gate's released watermark and
//     Released (HeartbeatDue adds heartbeats while releases move); a
//     standby remembers the highest (OnHeartbeat). A standby promoted
//     after the primary died continues publishing from there (Promoted):
//     what the old primary applied but never released, and what it
//     released after its last heartbeat (exact duplicates, which consumers
//     drop by MD seq). The MD sequence continues; nothing is skipped.
//   - Both roles answer MD_REQUESTs (Request, then Next): a range from the
//     ring, never above Released (the gate's rule: nothing unreleased
//     leaves a node), or the books (engine.BookExporter) at an MD seq,
//     held back until that MD seq is released. A per-requester token
//     bucket bounds what a requester can make a node send; every refusal
//     is one MD_STATUS and a counter, never a panic.
//
// # Usage contract
//
// One goroutine owns a Feed (the node's agent, under its lock).
//
//  1. New(Config{RingUpdates: n, ...}) once; RingUpdates 0 is a disabled
//     feed (no market-data group) that refuses every request.
//  2. For every market-data payload the state machine emits while applying
//     command seq s (on any role, and during the journal replay): Add(s,
//     payload). A false return means the ring did not take it; a primary
//     then queues it in the gate as any other output.
//  3. Primary, before accepting a command: refuse it while Full().
//  4. Primary, after every release with watermark r: loop Publish(batch,
//     origin, r, stateMDSeq) until it returns 0, sending the batch on the
//     market-data group after each; then HeartbeatDue(r, nowNs) (send a
//     heartbeat carrying Released when true), then ServeSnapshot(nowNs).
//  5. Standby, on every HEARTBEAT accepted from the primary:
//     OnHeartbeat(frame, nowNs).
//  6. On an MD_REQUEST (type, stream and MAC checked): Request(from, req,
//     nowNs, books).
//  7. After 5, 6 and the ServeSnapshot of 4: loop Next(origin) until ok is
//     false, sending each frame by unicast to its addressee.
//  8. When this node starts to lead: Promoted(stateMDSeq) (log the range
//     it returns).
//
// Example loop:
//
//	feed, _ := mdfeed.New[netip.AddrPort](mdfeed.Config{RingUpdates: mdfeed.DefaultRingUpdates})
//	for ev := range events {
//		switch ev.kind {
//		case released:
//			for feed.Publish(batch, origin, ev.released, eng.MDSeq()) > 0 {
//				multicast(batch.Bytes())
//			}
//			if feed.HeartbeatDue(ev.released, ev.nowNs) {
//				heartbeat(ev.released, feed.Released())
//			}
//			feed.ServeSnapshot(ev.nowNs)
//		case mdRequest:
//			feed.Request(ev.from, ev.req, ev.nowNs, eng)
//		}
//		for frame, to, ok := feed.Next(origin); ok; frame, to, ok = feed.Next(origin) {
//			unicast(frame, to)
//		}
//	}
//
// Add, Full and Publish never allocate; Request allocates only when a new
// requester's entry grows the rate limiter's table.
package mdfeed
