package node

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/nodeconfig"
	"github.com/seqbus/seqbus/replica"
	"github.com/seqbus/seqbus/status"
	"github.com/seqbus/seqbus/wire"
)

// becomePrimary makes this node lead at epoch: it sequences from applied+1
// and releases through the gate.
func (n *Node) becomePrimary(epoch uint64) error {
	if err := n.joined(); err != nil {
		return err
	}
	if err := n.ownHistory(); err != nil {
		return err
	}
	n.finishSnapshotWrite() // a promoted standby's last one, still valid
	// The fence is durable before anything is released under it.
	if err := n.st.RaiseFence(epoch); err != nil {
		return err
	}
	if err := n.rep.Roles().BecomePrimary(epoch); err != nil {
		return fmt.Errorf("node: cannot lead: %w", err)
	}
	n.j.RaiseEpoch(epoch)
	applied := n.eng().AppliedSeq()
	// Required acks: without a witness, every peer; with one, the in-sync
	// set the witness granted with our lease (replica.NewPrimary).
	var lease replica.Lease
	if n.lease.Keeper() != nil {
		lease = n.lease.Keeper()
	}
	prim, err := replica.NewPrimary(n.cfg.PrimaryConfig(epoch), n.rep.InSync(), lease, applied, n.j.Durable(), n.nowNs())
	if err != nil {
		return err
	}
	sc := n.cfg.SequencerConfig()
	sc.History = n.rep.Identity().ID()
	l, err := replica.NewLeader(replica.LeaderConfig{
		Sequencer: sc,
		Epoch:     epoch, Applied: applied, PublisherCapacity: n.cfg.PublisherCapacity,
		HashEvery: n.cfg.HashEvery, SnapshotEvery: n.cfg.SnapshotEvery, JournalBroken: n.st.Broken(),
		DatagramLen: n.tr.DatagramLen(), MarketData: n.tr.MarketData(), Track: n.rel.core, Memory: n.rep.Memory(),
	}, prim, n.eng(), n.j, n.rep.Sessions(), n.replay, n.md.Feed)
	if err != nil {
		return err
	}
	n.rep.Lead(l) // its memory is the term's now
	n.mdPromoted()
	if seq, ok := n.snaps.Latest(); ok {
		l.SnapshotWritten(seq)
	}
	n.tr.SetGroupMember(false) // our own DATA must not wake us
	n.cfg.Log.Info("leading", "epoch", epoch, "from", applied+1, "standbys", prim.Gate().InSync(nil))
	return nil
}

// leaderReady carries out the leader core's Ready: the sequencer's
// frames in the order it produced them, the counts, a lost output's log
// line, then a snapshot due. It runs right after every leader input that
// can produce frames (Next, Apply, Heartbeat, Announce, Nak; EndBatch and
// Tick through flushData), so each frame meets the node's send path (the
// pass's queue, transport.Transport) in the order the sequencer sealed it.
func (n *Node) leaderReady() {
	l := n.rep.Leader()
	if !l.HasReady() {
		return
	}
	rd := l.Ready()
	for _, o := range rd.Frames {
		if o.Group {
			n.tr.Multicast(o.Frame)
		} else if addr, ok := n.rep.Peer(o.Node); ok {
			n.tr.Send(o.Frame, addr)
		} else {
			n.stats.DropUnknownNode++
		}
	}
	n.stats.AddLeader(&rd.Counts)
	if rd.Lost != nil {
		n.cfg.Log.Error("engine output dropped", "dropped", rd.Counts.OutputsLost, "last", rd.Lost)
	}
	if rd.FirstRelease != 0 {
		n.cfg.Log.Info("first release after promotion", "after", time.Duration(rd.SincePromotionNs), "released", rd.FirstRelease)
	}
	snap := rd.Snapshot // the Leader's: Advance clears it
	l.Advance()
	if snap != 0 {
		n.tr.Flush() // the encoding must not hold back the frames sealed so far
		// A seq this term sequenced: a record of our epoch.
		n.periodicSnapshot(snap, n.rep.Roles().Epoch())
	}
}

func (n *Node) primaryFrame(f *wire.Frame, from netip.AddrPort, now int64) {
	switch f.Type {
	case wire.TypeCommand:
		n.onCommands(f, from, now)
	case wire.TypeAck: // f.Node is a peer: onDatagram checked every non-COMMAND frame
		if f.Flags&wire.FlagAskHistory != 0 {
			// It has not heard which history we lead: a HEARTBEAT says.
			n.frameBuf = n.rep.Leader().ProbeFrame(n.frameBuf[:0])
			n.tr.Send(n.frameBuf, n.cfg.Peers[f.Node])
		}
		a := n.rep.Ack(f, now)
		switch a.Verdict {
		case replica.AckOlderEpoch, replica.AckOtherEpoch:
			n.stats.DropStaleEpoch++
			if a.Announce {
				n.announce(now)
			}
			return
		case replica.AckAhead, replica.AckForeign:
			n.foreignAck(f, a.Verdict)
			return
		}
		n.stats.AcksReceived++
		if from != n.cfg.Peers[f.Node] {
			n.stats.AcksFromOtherAddr++ // the status writer warns (a wrong --peer)
		}
		if a.Leaving {
			n.standbyLeaving(f.Node, now)
		}
		if n.stages != nil {
			n.stages.Acked(n.cfg.ID, f.Node, f.Seq, n.rep.Leader().Primary().RequiredAck(), now)
		}
	case wire.TypeNak:
		nak, _ := wire.DecodeNak(f)
		n.rep.Leader().Nak(&nak, now)
		n.leaderReady()
	case wire.TypeSnapshotRequest:
		req, _ := wire.DecodeSnapshotRequest(f)
		n.serveSnapshot(&req, f.Node, n.cfg.Peers[f.Node])
	default:
		n.stats.DropUnexpected++
	}
}

// onCommands carries out the leader core's command path for a COMMAND
// frame (replica.Leader): each command it sequences leaves in the DATA
// frames sealed so far, is appended to the journal and only then applied;
// an append that fails stops the path before the apply.
func (n *Node) onCommands(f *wire.Frame, from netip.AddrPort, now int64) {
	l := n.rep.Leader()
	l.Commands(f, from, now)
	n.stageBatch()
	for {
		e, ok := l.Next()
		n.leaderReady() // a batch of earlier commands Submit sealed: journaled already
		if !ok {
			return
		}
		if err := n.j.Append(n.rep.Roles().Epoch(), e.Seq, e.Cmd, now); err != nil {
			n.journalFailed(err)
			return
		}
		l.Apply(e)
		if o := n.cfg.Observer; o != nil {
			o.Applied(n.cfg.ID, n.rep.Roles().Epoch(), e.Seq, e.Cmd)
		}
		n.leaderReady() // a HASH, a snapshot due
	}
}

// standbyLeaving acts on an in-sync standby's word that it is stopping
// (its last ack): it is proposed for removal now (the in-sync
// maintenance at once), so releases wait for the arbiter's round trip,
// not for --insync-timeout.
func (n *Node) standbyLeaving(id uint32, now int64) {
	n.stats.StandbysLeaving++
	n.cfg.Log.Info("in-sync standby stopping (planned): proposing its removal now", "standby", id)
	n.maintainInSync(now)
}

// journalFailed handles an append, a write or a promotion's drain that
// failed: the node must not release or acknowledge anything past what the
// journal holds, so a primary stops releasing and sequencing for the rest
// of this process's life, a standby's acks stop and it will not be
// promoted, and either gives up a lease it holds (a standby takes over).
// Logged once, counted every time.
func (n *Node) journalFailed(err error) {
	n.stats.JournalErrors++
	if !n.st.Break() {
		return
	}
	switch {
	case !n.rep.Roles().Primary():
		n.cfg.Log.Error("standby journal append failed; acks stop, will not lead: restart the node once the disk is fixed", "err", err)
	case errors.Is(err, journal.ErrStaleEpoch):
		n.cfg.Log.Error("journal refuses our epoch: a newer primary exists", "epoch", n.rep.Roles().Epoch(), "err", err)
	default:
		n.cfg.Log.Error("journal append failed: this process releases and sequences nothing more and gives up its lease; restart the node once the disk is fixed", "err", err)
	}
	if n.rep.Roles().Primary() {
		n.rep.Leader().JournalFailed()
	}
	n.giveUpLease("the journal failed") // a standby's, only a grant it holds (a promotion's drain)
}

// giveUpLease releases the lease of a node that will release nothing
// more under it (a primary whose journal failed or that is closing; a
// standby granted it that could not take over), so the arbiter grants the
// next epoch to a standby at once instead of when the lease runs out: a
// planned stop or a broken disk halts the market for a promotion, not a
// lease. The keeper is told first and MayLead is false from then on; the
// request leaves after (arbiter.Keeper.Release; nothing when the keeper
// holds no lease). A node whose directory is new never led and holds
// nothing: its release is a decline (declineLead), so the arbiter may
// undo the grant.
func (n *Node) giveUpLease(why string) {
	k, now := n.lease.Keeper(), n.nowNs()
	// A standby that holds no grant has nothing to give (and its keeper's
	// request under way is left alone).
	if k == nil || n.cfg.Unsafe.NoFencing || (!n.rep.Roles().Primary() && !k.MayLead(now)) || !n.lease.Release(now, n.rep.GiveBackDeclined(n.st.NewDirectory())) {
		return
	}
	n.stats.LeasesReleased++
	n.cfg.Log.Info("lease given up: "+why, "epoch", k.Epoch()) // Release keeps the view's epoch
	if n.rep.Roles().Primary() {
		// Tell the standbys, so one asks for the lease now rather than at
		// its next retry (up to --retry later), and the clients.
		n.rep.Leader().LeaseReleased(now)
		n.leaderReady()
		n.tellClients(n.rep.Roles().Epoch())
	}
}

// maxNotLeading bounds the NOT_LEADING notices of one step-down (one
// datagram each, sent on the agent): a few ms of sends. Past it (a
// --max-sessions above the default) the clients of the higher session
// ids find the next primary by their own timers, as without notices.
const maxNotLeading = nodeconfig.DefaultMaxSessions

// tellClients tells the address of every client session that this node
// leads epoch no more (wire.NotLeading), so each asks the arbiter who
// leads now instead of after its commands went unanswered: a planned
// handover costs the clients the promotion, not their outage timers.
func (n *Node) tellClients(epoch uint64) {
	nl := wire.NotLeading{Origin: wire.Origin{Stream: n.cfg.Stream, Node: n.cfg.ID, Epoch: epoch}}
	n.frameBuf = nl.Append(n.frameBuf[:0])
	for _, addr := range n.rep.Sessions().Addrs(nil, maxNotLeading) {
		n.tr.Send(n.frameBuf, addr)
		n.stats.NotLeadingSent++
	}
	n.tr.Flush()
}

func (n *Node) primaryAfterBatch(now int64) {
	n.rep.Leader().EndBatch(now)
	n.flushData()
	n.afterAppend(now)
	n.release(now)
	n.writePendingSnapshot() // after the pass's frames and releases, off the agent
}

// flushData sends the DATA (and HEARTBEAT, HASH) frames the pass has
// sealed so far, with one sendmmsg, and whatever the pass queued before
// them (smart batching, issue 18 item 7): everything that arrived in the
// pass went into the same frames, and they leave together, before the
// journal write and the releases. A pass of one command sends its one
// frame here at once; nothing waits for more work. It sends the
// leader's Ready first (what an EndBatch or Tick just produced).
func (n *Node) flushData() {
	n.leaderReady()
	n.tr.Flush()
}

// afterAppend lets durability follow the appends: with fsync none the
// journal calls them durable at once; otherwise they are synced inline
// (a fast disk) or the fsync thread is kicked (storage.Committer).
func (n *Node) afterAppend(now int64) {
	if err := n.j.Flush(); err != nil {
		n.journalFailed(err)
		return
	}
	n.kickSync()
	n.setDurable()
}

// kickSync has what was written synced (storage.Committer.Kick): at once,
// inline, or by the fsync thread later.
func (n *Node) kickSync() {
	if err := n.commit.Kick(); err != nil {
		n.syncFailedLocked(err)
	}
}

// setDurable tells the gate how far the journal is durable.
func (n *Node) setDurable() {
	d := n.j.Durable()
	if n.stages != nil && !n.cfg.Unsafe.NoGating && d > n.rep.Leader().Primary().Gate().Durable() {
		n.stages.Durable(n.cfg.ID, d, n.nowNs())
	}
	n.rep.Leader().Durable(d) // UNSAFE NoGating: the core counts applied as durable
}

func (n *Node) primaryTick(now int64) {
	if n.rep.Roles().History().AnnounceDue(now) {
		n.announce(now) // NEW_EPOCH's repeat
	}
	n.hearRefusals(now)
	n.maintainInSync(now)
	if !n.rep.Roles().Primary() {
		return // stepped down while releasing
	}
	n.rep.Leader().Tick(now)
	n.flushData()
	n.afterAppend(now)
	n.release(now)
	n.writePendingSnapshot()
}

// release carries out the leader core's release step (replica.Leader's
// Release): the in-sync set's news and proposal, then, when something
// may leave, the observer's event before any frame, every OUTPUT frame
// in the order the core hands them out, the counts and the first
// release after a promotion (leaderReady), the released watermark, and
// the market data.
func (n *Node) release(now int64) {
	// The moment of release is now by the clock, not the pass's time
	// (replica.Leader.Release checks the lease then): a process paused in
	// the middle of a pass (SIGSTOP, a descheduled VM) resumes with a pass
	// time from before the pause, and the acks that queued meanwhile must
	// not be released under the lease that ran out while it was stopped
	// (seqbus chaos, pause-primary: a deposed primary's output arrived
	// after the new primary's). What the pass queued before leaves first,
	// so the queue then holds this release's OUTPUT frames only, and
	// sendUnderLease checks the lease once more right before they
	// leave.
	n.tr.Flush()
	now = n.nowNs()
	l := n.rep.Leader()
	rr := l.Release(now, replica.ReleaseInput{
		Origin: n.origin(), Durable: n.j.Durable(),
		LeaseHeld: n.lease.Keeper() == nil || n.lease.Keeper().MayLead(now),
	})
	n.carryOutInSync(&rr, now)
	if rr.Released == 0 {
		return
	}
	if o := n.cfg.Observer; o != nil && rr.Report {
		e := &rr.Event
		o.Released(nodeconfig.ReleaseEvent{
			Node: n.cfg.ID, Epoch: e.Epoch, Released: e.Released, Applied: e.Applied, Durable: e.Durable,
			RequiredAck: e.RequiredAck, RequiredOK: e.RequiredOK, LeaseHeld: e.LeaseHeld,
		})
	}
	for fr, ok := l.NextFrame(); ok; fr, ok = l.NextFrame() {
		n.sendReleased(fr)
	}
	n.leaderReady() // OutputsReleased, the first release after a promotion
	n.stats.Released = rr.Released
	if !n.sendUnderLease() {
		return
	}
	n.mdAfterRelease(now)
}

// sendUnderLease sends the queued frames of released outputs (a
// release's, a replay's), after one more look at the lease by the clock:
// a stop between the caller's check and here (encoding and sealing the
// frames takes microseconds) would otherwise send them after the lease
// ran out. Only the instructions between this clock read and the sendmmsg
// are left unchecked: no sender can check past its own send, and the
// client's epoch fence refuses what a deposed primary sends on resuming.
// When the lease has run out the frames are dropped unsent (the clients
// resend, as for outputs dropped at the gate) and false is returned:
// nothing more of the release may leave.
func (n *Node) sendUnderLease() bool {
	if k := n.lease.Keeper(); k != nil && !n.cfg.Unsafe.NoFencing && !k.MayLead(n.nowNs()) {
		n.stats.ReleaseFramesUnsent += uint64(n.tr.Discard())
		return false
	}
	n.tr.Flush()
	return true
}

// carryOutInSync logs and counts what the core says of the in-sync set
// and hands its proposal to the arbiter.
func (n *Node) carryOutInSync(rd *replica.ReleaseReady, now int64) {
	if rd.RunningAlone {
		n.stats.RunningAlone++
		n.cfg.Log.Warn("RUNNING ALONE: the in-sync set is empty; releases are durable on this node's disk only until a standby catches up")
	}
	if rd.InSyncError != nil {
		n.cfg.Log.Error("gate in-sync set", "err", rd.InSyncError)
	}
	if rd.Propose != nil {
		n.proposeInSync(rd.ProposeBase, rd.Propose, rd.Lagging, now)
	}
	n.probe(rd.Probe, now)
}

// releaseTrack is the node's side of the release's bookkeeping: the
// assign -> release latency histogram (status and metrics read it, off
// the lock: status.Latency) and the core's ReleaseTrack that fills it,
// both kept across terms.
type releaseTrack struct {
	lat  *status.Latency
	core *replica.ReleaseTrack
}

func newReleaseTrack() releaseTrack {
	lat := status.NewLatency()
	core, err := replica.NewReleaseTrack(assignMask+1, lat)
	if err != nil {
		panic(err) // assignMask+1 is a power of two
	}
	return releaseTrack{lat: lat, core: core}
}

// sendReleased sends one released frame: to its client's address
// (dropped when the session has none) or to the market-data group.
func (n *Node) sendReleased(fr replica.Frame) {
	if fr.MarketData {
		n.tr.SendMarketData(fr.Bytes)
		return
	}
	if addr, ok := n.rep.Sessions().Addr(fr.Session); ok {
		n.tr.Send(fr.Bytes, addr)
	}
}
