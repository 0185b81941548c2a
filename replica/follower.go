package replica

import (
	"errors"

	"github.com/seqbus/seqbus/standby"
	"github.com/seqbus/seqbus/wire"
)

// Follower is the standby's protocol as one pure core: it composes the
// receive window (standby.Window, pull mode), the NAK scheduler, the
// snapshot fetch, the hash check and the Standby (fence, primary, acks).
// The runtime feeds it what arrives and carries out what it returns; it
// never calls back.
//
// The inputs, and what the runtime does with each answer:
//
//   - Data(frame, nowNs) for an accepted DATA or RETRANSMIT frame, then
//     Next until it says no more: each entry is the next seq in order, to
//     append to the journal and apply to the engine before taking the
//     next one (its payload is valid until the following Next). A message
//     too far ahead starts a snapshot fetch, or, during a catch-up by
//     retransmit, only raises the tail NAKed.
//   - Heartbeat(lastSeq), NeedSnapshot(nowNs), PrimaryChanged(nowNs),
//     Chunk(c, nowNs) as those frames arrive; Install(seq) then Next, then
//     Installed() once a snapshot Ready.Install carried was restored.
//   - Durable(seq) whenever the journal's durable watermark is read.
//   - EndBatch(nowNs) after a pass of frames and Tick(nowNs) on the
//     ticker: they add the NAK and the ACK due to the Ready.
//
// Ready (after any input; HasReady says whether there is one) is carried
// out in the order of its fields, then Advance(rd).
type Follower struct {
	cfg        FollowerConfig
	win        *standby.Window
	nak        *standby.NakScheduler
	rejects    standby.Rejects
	gapBuf     [wire.MaxNakRanges]standby.Range
	dueBuf     [wire.MaxNakRanges]standby.Range
	fetch      *standby.Fetch
	hashes     standby.HashCheck
	st         Standby
	catchingUp bool
	// addressed: the runtime knows where the primary is (NAKs, acks and
	// snapshot requests can be sent).
	addressed bool
	// heard: the primary followed since the last Reset or PrimaryChanged
	// said how far its history reaches (a HEARTBEAT, or DATA).
	heard bool
	// holdAcks: no ack goes (HoldAcks).
	holdAcks bool
	// diverged: a state hash differed from the primary's since the
	// history last changed (Diverged): no ack goes.
	diverged bool
	durable  uint64
	// sink collects the snapshot being fetched; sinking says a transfer
	// from offset 0 started it.
	sink    []byte
	sinking bool
	// msgs is the frame Data feeds Next from; nowNs its arrival.
	msgs  wire.Messages
	nowNs int64
	rd    FollowerReady
	ready bool
}

// FollowerConfig configures a Follower.
type FollowerConfig struct {
	Window  standby.Config // Start is set by Reset
	Nak     standby.NakConfig
	Fetch   standby.FetchConfig
	Standby StandbyConfig
	// ChunkBurst and ChunkBytes: how many chunks of how many bytes the
	// primary sends per snapshot request (the next request goes when a
	// burst is consumed).
	ChunkBurst uint64
	ChunkBytes int
}

// FollowerReady is what the Follower asks the runtime to do, each field in
// the order it is listed. An input adds at most one snapshot request, so
// take the Ready after every input that can add one (a frame, a new
// primary, EndBatch, Tick).
type FollowerReady struct {
	// FetchStarted: a snapshot fetch began (count and log it); Request
	// below asks for it. FetchRestarted: a new primary during a fetch
	// restarted it from zero.
	FetchStarted, FetchRestarted bool
	// NotAhead: the offered or fetched snapshot is not ahead of what is
	// applied; the standby catches up by retransmit (count and log).
	NotAhead bool
	// FetchErr: the transfer failed (too large, checksum): log it.
	FetchErr error
	// CatchUpStarted / CaughtUp: the retransmit catch-up began (count) or
	// ended (log).
	CatchUpStarted, CaughtUp bool
	// Nak, when HasNak: send to the primary.
	HasNak bool
	Nak    wire.Nak
	// Request, when HasRequest: send the snapshot request to the primary.
	HasRequest bool
	Request    wire.SnapshotRequest
	// Ack, when HasAck: send ACK(Ack) to the primary. It never exceeds
	// the last Durable (durable before ack).
	HasAck bool
	Ack    uint64
	// Install, when not nil, last and after Advance: restore the engine
	// from it, store it as the snapshot at InstallSeq and reset the
	// journal to it, then call Install(InstallSeq), take every entry from
	// Next, and call Installed (whose Ready follows). The bytes are the
	// runtime's from then on.
	Install    []byte
	InstallSeq uint64
}

// NewFollower returns a Follower with nothing applied; call Reset before
// use.
func NewFollower(cfg FollowerConfig) *Follower {
	return &Follower{
		cfg:   cfg,
		nak:   standby.NewNakScheduler(cfg.Nak),
		fetch: standby.NewFetch(cfg.Fetch),
		st:    NewStandby(cfg.Standby),
	}
}

// Reset starts following anew from applied: a new window, no catch-up,
// the next ack goes whatever it says, no hash of another history kept.
// The primary known, the NAK timers and a fetch under way are kept.
func (f *Follower) Reset(applied uint64) error {
	wc := f.cfg.Window
	wc.Start = applied
	w, err := standby.NewPull(wc)
	if err != nil {
		return err
	}
	f.win = w
	f.msgs = wire.Messages{}
	f.catchingUp, f.heard = false, false
	f.st.Reset()
	f.hashes.Reset()
	return nil
}

// Standby is the fence, the primary followed and the ack state.
func (f *Follower) Standby() *Standby { return &f.st }

// Window is the receive window (read it; feed it only through the
// Follower).
func (f *Follower) Window() *standby.Window { return f.win }

// Applied is the highest seq handed out in order.
func (f *Follower) Applied() uint64 { return f.win.Applied() }

// Highest is the highest seq known to exist.
func (f *Follower) Highest() uint64 { return f.win.Highest() }

// Fetching reports whether a snapshot fetch is under way.
func (f *Follower) Fetching() bool { return f.fetch.Active() }

// CatchingUp reports whether a catch-up by retransmit is under way.
func (f *Follower) CatchingUp() bool { return f.catchingUp }

// Rejects counts the messages the window refused.
func (f *Follower) Rejects() standby.Rejects { return f.rejects }

// NakStats, FetchStats and HashStats are the composed cores' counters.
func (f *Follower) NakStats() standby.NakStats     { return f.nak.Stats() }
func (f *Follower) FetchStats() standby.FetchStats { return f.fetch.Stats() }
func (f *Follower) HashStats() standby.HashStats   { return f.hashes.Stats() }

// Addressed records that the runtime knows the primary's address.
func (f *Follower) Addressed() { f.addressed = true }

// Durable is the journal's durable watermark: no ack goes above it.
func (f *Follower) Durable(seq uint64) { f.durable = seq }

// DurableAck is Durable when the watermark rose on its own (the fsync
// thread): the ack goes if it moved.
func (f *Follower) DurableAck(seq uint64, nowNs int64) {
	f.durable = seq
	f.maybeAck(nowNs, false)
}

// Data takes an accepted DATA or RETRANSMIT frame; its messages come out
// of Next. fr's payload must stay valid until Next reports no more.
func (f *Follower) Data(fr *wire.Frame, nowNs int64) {
	if fr.Type == wire.TypeRetransmit {
		f.nak.OnRetransmit(fr.Seq, fr.LastSeq(), nowNs)
	}
	f.msgs = fr.Messages()
	f.nowNs = nowNs
	f.heard = true
}

// Next returns the next entry to append and apply, in seq order with no
// gap: the frame's in-order messages (payload in the frame) and what
// they make contiguous (payload in the window, valid until the following
// Next). ok is false when the frame is done.
func (f *Follower) Next() (seq uint64, payload []byte, ok bool) {
	for {
		if seq, payload, ok = f.win.Next(); ok {
			return seq, payload, true
		}
		s, msg, more := f.msgs.Next()
		if !more {
			return 0, nil, false
		}
		inOrder, err := f.win.Offer(s, msg)
		if inOrder {
			return s, msg, true
		}
		if err == nil {
			continue
		}
		f.rejects.Count(err)
		if errors.Is(err, standby.ErrNeedSnapshot) {
			if f.catchingUp {
				f.win.ObserveHighest(s) // NAKed as part of the tail
			} else {
				f.startFetch(f.nowNs)
			}
		}
	}
}

// LocalHash records this replica's state hash after applying seq; false
// is a divergence (count and log it).
func (f *Follower) LocalHash(seq, hash uint64) bool { return f.match(f.hashes.Local(seq, hash)) }

// RemoteHash records the primary's hash at seq (a HASH frame); false is a
// divergence.
func (f *Follower) RemoteHash(seq, hash uint64) bool { return f.match(f.hashes.Remote(seq, hash)) }

// match latches a divergence (Diverged).
func (f *Follower) match(ok bool) bool {
	f.diverged = f.diverged || !ok
	return ok
}

// Diverged reports a state hash that differed from the primary's since
// the history last changed (ResetHashes, an install): this state is not
// the primary's (another --engine, a non-deterministic state machine,
// memory corruption), so the follower acknowledges nothing more, which
// takes it out of the in-sync set, and its runtime must not lead on it
// (WantLead). A restart rebuilds the state from the journal.
func (f *Follower) Diverged() bool { return f.diverged }

// ResetHashes forgets the hashes waiting: our history changed under them.
func (f *Follower) ResetHashes() {
	f.hashes.Reset()
	f.diverged = false
}

// Heartbeat notes the primary's last seq, so a tail gap is NAKed.
func (f *Follower) Heartbeat(lastSeq uint64) {
	f.win.ObserveHighest(lastSeq)
	f.heard = true
}

// CaughtUp reports whether this follower holds everything its primary
// said exists: the primary told how far its history reaches since the
// last Reset or PrimaryChanged, every seq up to there is applied, and no
// snapshot fetch is under way. With an empty history (a heartbeat of seq
// 0) a follower with nothing applied has caught up.
func (f *Follower) CaughtUp() bool {
	return f.heard && !f.fetch.Active() && f.win.Applied() >= f.win.Highest()
}

// HoldAcks stops (hold) or lets go (not hold) the acks: a held follower
// sends none, and once let go sends the ack its state calls for at the
// next EndBatch, Tick or DurableAck. A node whose directory is new holds
// them until it has caught up, so it never joins the in-sync set before
// its directory holds the history (storage.Storage.NewDirectory).
func (f *Follower) HoldAcks(hold bool) { f.holdAcks = hold }

// NeedSnapshot: the primary no longer holds what we miss: fetch.
func (f *Follower) NeedSnapshot(nowNs int64) { f.startFetch(nowNs) }

// PrimaryChanged: a new primary leads; a fetch under way restarts from
// zero from it (it may hold another snapshot, or none at our offset).
func (f *Follower) PrimaryChanged(nowNs int64) {
	f.heard = false
	if !f.fetch.Active() {
		return
	}
	f.sink, f.sinking = nil, false
	f.setRequest(f.fetch.Restart(nowNs))
	f.set().FetchRestarted = true
}

func (f *Follower) startFetch(nowNs int64) {
	if f.fetch.Active() || !f.addressed {
		return
	}
	f.setRequest(f.fetch.StartAfter(f.win.Applied(), nowNs))
	f.set().FetchStarted = true
}

// Chunk takes a SNAPSHOT_CHUNK of the primary's.
func (f *Follower) Chunk(c *wire.SnapshotChunk, nowNs int64) {
	data, done, err := f.fetch.OnChunk(c, nowNs)
	if errors.Is(err, standby.ErrSnapshotNotAhead) {
		f.sink, f.sinking = nil, false
		f.set().NotAhead = true
		f.startCatchUp()
		return
	}
	if err != nil {
		f.sink, f.sinking = nil, false
		f.set().FetchErr = err
		return
	}
	if data == nil {
		return
	}
	if c.Offset == 0 {
		f.sink, f.sinking = make([]byte, 0, c.Total), true
	}
	if !f.sinking {
		return
	}
	f.sink = append(f.sink, data...)
	if !done {
		if req, ok := f.fetch.NeedsRequest(f.cfg.ChunkBurst, f.cfg.ChunkBytes, nowNs); ok {
			f.setRequest(req)
		}
		return
	}
	seq, snap := f.fetch.Seq(), f.sink
	f.sink, f.sinking = nil, false
	if seq <= f.win.Applied() {
		// We moved on while it was fetched: catch up by retransmit, not
		// with another fetch of the same snapshot.
		f.set().NotAhead = true
		f.startCatchUp()
		return
	}
	rd := f.set()
	rd.Install, rd.InstallSeq = snap, seq
}

// Install resumes the window after the snapshot at seq (restored by the
// runtime): what it buffered past seq and now contiguous comes out of
// Next; then call Installed.
func (f *Follower) Install(seq uint64) {
	f.win.ResetTo(seq)
	f.msgs = wire.Messages{}
}

// Installed ends an install: hashes of the replaced state are forgotten
// and the rest of the gap is repaired by retransmit.
func (f *Follower) Installed() {
	f.ResetHashes()
	f.startCatchUp()
}

// startCatchUp makes the standby repair the rest of its gap by NAK and
// retransmit: until it has applied everything it has seen, a message
// beyond its window only raises the tail it NAKs instead of starting a
// snapshot fetch. So a standby fetches at most one snapshot to rejoin
// (two if the primary fails over mid-transfer) instead of refetching on
// every live frame; a NEED_SNAPSHOT still starts a fetch.
func (f *Follower) startCatchUp() {
	if !f.catchingUp {
		f.catchingUp = true
		f.set().CatchUpStarted = true
	}
}

// EndBatch ends a pass of frames: the catch-up may be done, gaps due are
// NAKed, and the ack goes when it moved.
func (f *Follower) EndBatch(nowNs int64) {
	if f.catchingUp && f.win.Applied() >= f.win.Highest() {
		f.catchingUp = false
		f.set().CaughtUp = true
	}
	f.nakGaps(nowNs)
	f.maybeAck(nowNs, false)
}

// Tick runs on the ticker: gaps due are NAKed, a silent fetch re-asks,
// and the ack goes when it moved or the interval passed.
func (f *Follower) Tick(nowNs int64) {
	f.nakGaps(nowNs)
	if req, ok := f.fetch.Poll(nowNs); ok {
		f.setRequest(req)
	}
	f.maybeAck(nowNs, true)
}

func (f *Follower) nakGaps(nowNs int64) {
	if !f.addressed || f.fetch.Active() {
		return
	}
	gaps := f.win.Gaps(f.gapBuf[:0])
	due := f.nak.Poll(gaps, nowNs, f.dueBuf[:0])
	if len(due) == 0 {
		return
	}
	rd := f.set()
	rd.HasNak = true
	rd.Nak = wire.Nak{Ack: f.win.Ack()}
	for _, r := range due {
		rd.Nak.Add(wire.Range{From: r.From, To: r.To})
	}
}

// maybeAck adds ACK(min(applied, durable)) when it moved, or every
// AckIntervalNs when periodic is set (liveness for the primary).
func (f *Follower) maybeAck(nowNs int64, periodic bool) {
	if !f.addressed || f.holdAcks || f.diverged {
		return
	}
	ack := Ack(f.win.Ack(), f.durable) // durable before ack
	if !f.st.AckDue(ack, nowNs, periodic) {
		return
	}
	rd := f.set()
	rd.HasAck, rd.Ack = true, ack
	f.st.Acked(ack, nowNs)
}

func (f *Follower) setRequest(req wire.SnapshotRequest) {
	rd := f.set()
	rd.HasRequest, rd.Request = true, req
}

func (f *Follower) set() *FollowerReady {
	f.ready = true
	return &f.rd
}

// HasReady reports whether there is a Ready to carry out.
func (f *Follower) HasReady() bool { return f.ready }

// Ready returns what to do; carry it out in field order, then Advance.
func (f *Follower) Ready() FollowerReady { return f.rd }

// Advance says rd was carried out.
func (f *Follower) Advance() {
	f.rd = FollowerReady{}
	f.ready = false
}
