// Package witness is the lease witness that a third box runs so that
// exactly one node leads at a time, and the socket-free Client a node uses
// to talk to it. The witness is two types:
//
//   - Core: its logic, pure like the cores in package arbiter (no socket,
//     file, clock or goroutine): it takes a datagram and nowNs and returns
//     the reply, or the state to make durable before the reply (Step,
//     then Persisted), using the arbiter.Arbiter, the authentication
//     checks, the reply cache and the counters. The simulator drives it.
//   - Server: the runtime around a Core: a socket (any bus.Conn), the
//     state file (written and fsynced when the Core asks, before the
//     reply), the status file writer, one receive goroutine and the
//     monotonic clock.
//
// The server answers three requests, one frame per datagram:
//
//   - LEASE_ACQUIRE / LEASE_RENEW → LEASE_GRANT (epoch in the header,
//     DurationNs, the echoed RequestID) or LEASE_DENY (Holder, the highest
//     epoch in the header, RemainingNs, the echoed RequestID). A renew with
//     InSyncVersion != 0 carries a proposal for the in-sync set
//     (InSyncVersion = base version, Members = proposed set), decided by
//     arbiter.Arbiter.RenewWithInSync.
//   - LEASE_QUERY → LEASE_INFO (Holder or 0, highest epoch, RemainingNs of
//     the live lease or, with no holder, of the restart quarantine).
//
// Every reply carries the in-sync set (InSyncVersion, Members): the one in
// force for a grant, the durable one for a deny or an info.
//
// Anything else is dropped and counted by reason (Stats.Drops), never a
// panic.
//
// Rules the witness keeps (the Core decides; the Server, or any caller of
// the Core, carries out the writes it asks for before replying):
//
//  1. Persist before grant. A grant of an epoch or in-sync set newer than
//     the one on disk is sent only after the state (epoch, in-sync version
//     and set, last holder) is durable (temp file, fsync, rename,
//     directory fsync). If the write fails the grant is not sent and not
//     cached, and no later grant of that state is sent until a write
//     succeeds. The Server writes on a goroutine of its own and goes on
//     answering meanwhile: an extension of a durable epoch (the holder's
//     renew, decided without the proposal it may carry) is granted at
//     once with the durable in-sync set, a query is
//     answered, and a request that may need another write (an acquire, a
//     resend of the one being written) waits (dropped as
//     DropPersistPending; its sender retries), so a slow disk delays a
//     new epoch or set, never the lease of the holder.
//  2. Restart quarantine. New reads the persisted state (format 2, or the
//     epoch-only format 1 of older witnesses) and builds the Core from it
//     (NewCore takes what a caller's own store loaded); if there is one, the
//     arbiter grants nothing for one lease duration (but the last
//     holder's renew of the persisted epoch, granted at once) and then grants
//     persisted+1 to the last holder or an in-sync member (to anyone for a
//     format 1 record). A missing file means a fresh witness (epoch 0, no
//     quarantine); a corrupt one stops New with ErrCorruptState.
//  3. Idempotence per (node, request ID). The last request and decision of
//     each node (at most NodeTableMax nodes) are cached; a resend of the
//     same request is answered from the cache, with the time left
//     recomputed, without asking the arbiter again. So a lost reply and a
//     resend never grant twice.
//  4. Time is time.Since of one time.Now taken in New: Go's monotonic
//     clock, never wall-clock arithmetic. The Core only ever sees it as
//     nowNs.
//
// Usage contract:
//
//  1. Open a unicast socket (bus.ListenUnicast) on the witness's address.
//  2. New(cfg, conn, dir) with the cluster's arbiter.Config and a state
//     directory on a local disk that only this witness uses. On error, fix
//     the cause; never delete a corrupt state file to make it start.
//  3. Start() runs the loop; Close() stops it and closes the socket.
//     Stats() and Status() may be called from any goroutine.
//  4. Nodes: wrap the keeper in NewClient; send what Tick returns to the
//     witness, pass every datagram from it to OnDatagram, lead while
//     Keeper().MayLead(nowNs). The primary proposes in-sync sets with
//     ProposeInSync (sent with the next renew) and adopts the set of each
//     arbiter.Reply whose InSyncVersion is above the one it has. A node
//     that drives its lease through arbiter.Backend (the seam etcdarb
//     implements too) wraps the Client in NewBackend with its send.
package witness
