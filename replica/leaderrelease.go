package replica

import (
	"fmt"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/wire"
)

// LatencyRecorder takes the assign -> release latencies a release
// measures, in µs (an *hdrhistogram.Histogram is one; the runtime keeps
// it across terms and reads its percentiles for status).
type LatencyRecorder interface {
	RecordValue(v int64) error
}

// ReleaseTrack is what the release keeps across the terms of one
// process: the ring of assign times the assign -> release latency is
// measured from, the recorder it goes to, and the released watermark
// last reported to the observer (ReleaseReady.Report). The runtime makes
// it once (NewReleaseTrack) and hands it to each term's Leader
// (LeaderConfig.Track), so a promotion neither allocates the ring nor
// reports again what an earlier term reported.
//
// Why the Leader owns the ring and the runtime the histogram: the ring
// is the command path's (stamped at Apply, read at the release, both the
// Leader's inputs), while the histogram is status, read under the
// runtime's lock by scrapes; the Leader records into it through the
// one-method LatencyRecorder, so replica does not import hdrhistogram.
type ReleaseTrack struct {
	assignNs []int64 // assignNs[seq&mask]: when seq was appended and applied
	mask     uint64
	rec      LatencyRecorder
	reported uint64 // the released watermark last reported to the observer
}

// NewReleaseTrack makes the ring for ringLen seqs in flight (a power of
// two; 0: no latency measured) recording into rec (nil: none).
func NewReleaseTrack(ringLen int, rec LatencyRecorder) (*ReleaseTrack, error) {
	if ringLen < 0 || ringLen&(ringLen-1) != 0 {
		return nil, fmt.Errorf("replica: release track: ring length %d is not a power of two", ringLen)
	}
	t := &ReleaseTrack{rec: rec}
	if ringLen > 0 && rec != nil {
		t.assignNs, t.mask = make([]int64, ringLen), uint64(ringLen-1)
	}
	return t, nil
}

// ReleaseInput is what only the runtime knows at the moment of a
// release.
type ReleaseInput struct {
	// Origin stamps the release's OUTPUT frames (stream, node, epoch).
	Origin wire.Origin
	// Durable is the journal's durable watermark now, for the event (the
	// gate's own may lag it, or be the applied seq under UNSAFE
	// NoGating).
	Durable uint64
	// LeaseHeld is the lease keeper's MayLead now (true for a static
	// primary), for the event.
	LeaseHeld bool
}

// ReleaseEvent is the gate's state when a release raised the released
// watermark: what the observer is told (the runtime adds its node id).
type ReleaseEvent struct {
	Epoch    uint64
	Released uint64
	Applied  uint64 // the state machine's applied seq
	Durable  uint64 // ReleaseInput.Durable
	// RequiredAck is the ack the in-sync set requires (MaxUint64 for an
	// empty set); RequiredOK is false when the set is below MinInSync.
	RequiredAck uint64
	RequiredOK  bool
	LeaseHeld   bool // ReleaseInput.LeaseHeld
}

// ReleaseReady is what a release asks the runtime to do, in the order of
// its fields.
type ReleaseReady struct {
	// RunningAlone: the required set just became empty; releases are
	// durable on this node's disk only (log it, count it). First, before
	// anything leaves.
	RunningAlone bool
	// InSyncError: the gate refused the required set (it keeps the one
	// in force); log it.
	InSyncError error
	// Propose, when non-nil: hand the in-sync proposal (base version
	// ProposeBase) to the arbiter, then report it with Primary().Proposed;
	// Lagging are the members it removes for lagging (for the log). The
	// gate already requires any standby it adds, so it may go before the
	// outputs. The Primary's Ready that carried this news is advanced.
	Propose     []arbiter.NodeID
	ProposeBase uint64
	Lagging     []uint32
	// Probe: members to probe (Ready.Probe), at any time.
	Probe []uint32
	// Released: when not 0, the release happens; record it as the
	// released watermark once the frames below left. 0: nothing may
	// leave (the lease, the gate, or a failed journal: nothing is ever
	// released after JournalFailed or a term begun JournalBroken), and
	// the fields below are zero: do nothing more.
	Released uint64
	// Report, when true: hand Event to the observer before any frame
	// leaves (so the observer's time is never after a client's). Only
	// when the watermark rose above the last one reported
	// (ReleaseTrack).
	Report bool
	Event  ReleaseEvent
	// Then the frames: call NextFrame until it says no more, sending each
	// before the next call (every queued output with seq <= Released and
	// only those, in the framer's order), then take the LeaderReady: the
	// outputs counted, and FirstRelease.
}

// Promoted records that this term began with a promotion at nowNs: the
// first release that sends a frame is reported once in LeaderReady
// (FirstRelease). A term that began at start-up never reports one.
func (l *Leader[A]) Promoted(nowNs int64) { l.promoted, l.promotedNs, l.firstDone = true, nowNs, false }

// Release is the release step, at the moment of release nowNs (the lease
// is checked then: a primary resumed after a pause must not release the
// acks that queued while its lease ran out). It takes the Primary's
// Ready, advances it, and returns what to do: the in-sync news, then
// (when Released is not 0) the observer's event and the frames from
// NextFrame. The assign -> release latency of every seq released since
// the last release goes to the track's recorder.
func (l *Leader[A]) Release(nowNs int64, in ReleaseInput) ReleaseReady {
	prd := l.prim.Ready(nowNs)
	l.prim.Advance(prd)
	rr := ReleaseReady{
		RunningAlone: prd.RunningAlone, InSyncError: prd.InSyncError,
		Propose: prd.Propose, ProposeBase: prd.ProposeBase, Lagging: prd.Lagging, Probe: prd.Probe,
	}
	if prd.Release == 0 || l.broken {
		return rr
	}
	rr.Released = prd.Release
	if t := l.track; rr.Released > t.reported {
		t.reported = rr.Released
		ack, ok := l.prim.Gate().RequiredAck()
		rr.Report = true
		rr.Event = ReleaseEvent{
			Epoch: l.cfg.Epoch, Released: rr.Released, Applied: l.sm.AppliedSeq(), Durable: in.Durable,
			RequiredAck: ack, RequiredOK: ok, LeaseHeld: in.LeaseHeld,
		}
	}
	l.framer.Begin(in.Origin)
	l.releaseTo, l.releasing, l.flushed = rr.Released, true, nil
	l.releaseNowNs, l.releaseSent = nowNs, false
	l.recordLatency(rr.Released, nowNs)
	return rr
}

// recordLatency adds the assign -> release latency of every seq released
// since the last call (at most the ring's worth).
func (l *Leader[A]) recordLatency(released uint64, nowNs int64) {
	t := l.track
	if t.assignNs != nil {
		from := max(l.latencyLast+1, released-min(released, t.mask))
		for s := from; s <= released && s > l.latencyLast; s++ {
			if at := t.assignNs[s&t.mask]; at > 0 {
				_ = t.rec.RecordValue(max((nowNs-at)/1000, 1))
			}
		}
	}
	l.latencyLast = max(l.latencyLast, released)
}

// releaseDone ends the release NextFrame handed out: the first one after
// a promotion to send a frame is reported once.
func (l *Leader[A]) releaseDone() {
	if l.releaseSent && !l.firstDone && l.promoted {
		l.firstDone = true
		l.rd.FirstRelease, l.rd.SincePromotionNs = l.releaseTo, l.releaseNowNs-l.promotedNs
	}
	l.releaseSent = false
}
