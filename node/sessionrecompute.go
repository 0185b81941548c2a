package node

import (
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"

	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/wire"
)

// Replay past the history (issue 20, item 2): a REPLAY_REQUEST for outputs
// older than the in-memory history is answered by recomputing them from
// the journal, since outputs are deterministic. The primary starts one
// background recompute: it opens the journal read-only (journal.ReadOnly
// on the node's FS), restores a scratch state machine from the newest
// snapshot below the asked output (or starts empty when the journal still
// begins at seq 1), applies the records after it up to the released
// watermark the agent handed it, and collects the session's outputs from
// the asked output seq. The agent picks the result up on its next pass
// (doWork) and sends it as the in-memory path does: OUTPUT frames marked
// replay, then REPLAY_END Done. No snapshot and journal reach back far
// enough: TooOld, as before.
//
// Bounds: one recompute at a time per node (a request meanwhile is
// Refused, counted ReplayRecomputeBusy; the client retries), at most
// replayMaxOutputs outputs an answer, at most recomputeMaxRecords journal
// records read per recompute (reached before the asked output: TooOld).
// The recompute never runs on the agent nor holds n.mu; it reads only
// records at or below the released watermark, which the journal has
// written (released never passes durable).
//
// The simulator drives the node without an agent (drive.go): there the
// recompute runs synchronously inside the request's Deliver, on the
// simulator's one goroutine, so it stays deterministic.

// recomputeMaxRecords bounds the journal records one recompute reads:
// 1M, well under a second of applying.
const recomputeMaxRecords = 1 << 20

// replayRecompute is the node's one recompute slot. busy is the agent's
// (under n.mu); done is handed from the recompute goroutine to the agent.
type replayRecompute struct {
	busy bool
	done atomic.Pointer[recomputeResult]
	// hook, when set (tests only, before Start or under n.mu), runs on the
	// recompute goroutine before it reads anything.
	hook func()
}

// recomputeJob is what the agent hands the recompute: nothing of the
// node's mutable state.
type recomputeJob struct {
	fs       journal.FS
	dir      string
	newSM    func() (engine.StateMachine, error)
	session  uint64
	from     uint64 // first output seq asked
	upto     uint64 // released watermark: apply no record above it
	epoch    uint64 // the node's epoch when it started
	to       netip.AddrPort
	tooOld   replayPlan // the history's answer, sent when the journal cannot do better
	stop     <-chan struct{}
	hook     func()
	recorded []recomputedOutput
	applying uint64 // the seq being applied, for Emit
}

type recomputedOutput struct {
	seq, outSeq uint64
	payload     []byte
}

type recomputeResult struct {
	job     *recomputeJob
	outputs []recomputedOutput
	records uint64
	tooOld  bool // neither snapshot nor journal reaches back to from
	err     error
}

var errRecomputeStopped = errors.New("node: replay recompute stopped (closing)")

// startRecompute answers a request the history cannot (plan p says TooOld)
// by recomputing from the journal: in the background, or at once without
// an agent (the simulator). It sends Refused if a recompute already runs.
func (n *Node) startRecompute(session, from uint64, p replayPlan, to netip.AddrPort) {
	if n.recompute.busy {
		n.stats.ReplayRecomputeBusy++
		n.stats.ReplayRefused++
		end := wire.ReplayEnd{Origin: n.origin(), Session: session, From: from, Next: from, Status: wire.ReplayRefused}
		n.send(end.Append(n.frameBuf[:0]), to)
		return
	}
	job := &recomputeJob{
		fs: n.cfg.FS, dir: n.cfg.Dir, newSM: n.cfg.newScratch,
		session: session, from: from, upto: min(n.prim.Gate().Released(), n.j.Durable()), to: to,
		epoch: n.epoch, tooOld: p, stop: n.stop, hook: n.recompute.hook,
	}
	n.recompute.busy = true
	if n.agent == nil {
		n.finishRecompute(job.run())
		return
	}
	a := n.agent
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.recompute.done.Store(job.run())
		if a.parked.Load() && a.poller != nil {
			_ = a.poller.Wake()
		}
	}()
}

// recomputePass is the agent's check for a finished recompute: one atomic
// load a pass; false: the node closed.
func (n *Node) recomputePass(l *passLock) (int, bool) {
	if n.recompute.done.Load() == nil {
		return 0, true
	}
	if !l.lock() {
		return 0, false
	}
	n.finishRecompute(n.recompute.done.Swap(nil))
	return 1, true
}

// finishRecompute sends a recompute's answer (under n.mu, on the agent or
// the simulator's goroutine).
func (n *Node) finishRecompute(r *recomputeResult) {
	n.recompute.busy = false
	job := r.job
	end := wire.ReplayEnd{Origin: n.origin(), Session: job.session, From: job.from, Next: job.from}
	n.stats.ReplayRecomputeRecords += r.records
	switch {
	case r.err != nil || n.role != RolePrimary || n.epoch != job.epoch || !n.mayLeadNow(n.nowNs()):
		// A change of term meanwhile may have truncated what it read.
		if r.err != nil && !errors.Is(r.err, errRecomputeStopped) {
			n.stats.ReplayRecomputeFailed++
			n.cfg.Log.Warn("replay from the journal failed", "session", job.session, "from", job.from, "err", r.err)
		}
		n.stats.ReplayRefused++
		end.Status = wire.ReplayRefused
	case r.tooOld:
		n.stats.ReplayTooOld++
		end.Status, end.Next, end.Highest = wire.ReplayTooOld, job.tooOld.next, job.tooOld.highest
	default:
		n.stats.ReplayRecomputed++
		n.sendRecomputed(r.outputs, job.to)
		if k := len(r.outputs); k > 0 {
			end.Next = r.outputs[k-1].outSeq + 1
		}
		end.Highest = job.tooOld.highest
		if q, ok := n.eng.(sessionOutSeqer); ok {
			end.Highest = q.SessionOutSeq(job.session)
		}
	}
	n.send(end.Append(n.frameBuf[:0]), job.to)
}

// sendRecomputed packs recomputed outputs into OUTPUT frames marked
// replay, as sendReplay does for the history's.
func (n *Node) sendRecomputed(outs []recomputedOutput, to netip.AddrPort) {
	b := n.replayBatch
	flush := func() {
		if b.Count() == 0 {
			return
		}
		frame := b.Bytes()
		if err := wire.MarkReplay(frame); err == nil {
			n.send(frame, to)
		}
	}
	for _, o := range outs {
		if b.Count() == 0 || !b.Fits(len(o.payload)) {
			flush()
			b.Reset(wire.TypeOutput, n.origin(), o.seq)
		}
		b.Add(o.payload)
		n.stats.ReplayServed++
	}
	flush()
	b.Reset(wire.TypeOutput, n.origin(), 1)
}

// Emit collects the session's numbered outputs in [from, from+max).
func (j *recomputeJob) Emit(to uint64, payload []byte) {
	if to != j.session || to == engine.MarketData || len(j.recorded) >= replayMaxOutputs {
		return
	}
	out, ok := engine.SessionOutSeq(payload)
	if !ok || out < j.from || out >= j.from+replayMaxOutputs {
		return
	}
	j.recorded = append(j.recorded, recomputedOutput{seq: j.applying, outSeq: out, payload: append([]byte(nil), payload...)})
}

// run is the recompute itself; it touches only the job and the files.
func (j *recomputeJob) run() *recomputeResult {
	r := &recomputeResult{job: j}
	if j.hook != nil {
		j.hook()
	}
	sm, base, err := j.base()
	if err != nil {
		r.err = err
		return r
	}
	if base >= j.upto {
		return r // nothing released after the base: nothing to send
	}
	next := base + 1
	err = journal.Scan(j.fs, j.dir, journal.InspectOptions{}, func(rec journal.Record) bool {
		if rec.Seq > j.upto || len(j.recorded) >= replayMaxOutputs {
			return false
		}
		if r.records >= recomputeMaxRecords {
			return false
		}
		r.records++
		if r.records%1024 == 0 {
			select {
			case <-j.stop:
				r.err = errRecomputeStopped
				return false
			default:
			}
		}
		if rec.Seq < next {
			return true // at or below the base snapshot
		}
		if rec.Seq > next {
			r.tooOld = true // the journal no longer holds what follows the base
			return false
		}
		j.applying = rec.Seq
		sm.Apply(rec.Seq, rec.Payload, j)
		next++
		return true
	})
	if r.err == nil && err != nil {
		// Damage above what we applied is the live tail being written;
		// below it, an answer we cannot give.
		if next <= j.upto && len(j.recorded) < replayMaxOutputs {
			r.err = fmt.Errorf("node: replay from the journal: %w", err)
		}
	}
	if r.err == nil && !r.tooOld && len(j.recorded) == 0 && next <= j.upto {
		// The record cap, or a journal ending below the released watermark,
		// before the asked output: beyond what a recompute reaches.
		r.tooOld = true
	}
	r.outputs = j.recorded
	return r
}

// base returns a scratch state machine and the seq it stands at, below
// the asked output: the newest snapshot at or below the released watermark
// whose state has not yet produced output `from` to the session, or the
// empty state (seq 0). run checks the journal continues after it.
func (j *recomputeJob) base() (engine.StateMachine, uint64, error) {
	seqs, err := journal.SnapshotSeqs(j.fs, j.dir)
	if err != nil {
		return nil, 0, err
	}
	for _, s := range seqs {
		if s > j.upto {
			continue
		}
		sm, err := j.newSM()
		if err != nil {
			return nil, 0, err
		}
		q, ok := sm.(sessionOutSeqer)
		if !ok {
			break // cannot tell where the session stood: only the empty state
		}
		_, sr, err := journal.OpenSnapshotReadOnly(j.fs, j.dir, s)
		if err != nil {
			continue // damaged or pruned meanwhile: an older one may do
		}
		err = sm.Restore(sr)
		sr.Close()
		if err != nil {
			continue
		}
		if q.SessionOutSeq(j.session) < j.from {
			return sm, s, nil
		}
	}
	sm, err := j.newSM()
	if err != nil {
		return nil, 0, err
	}
	return sm, 0, nil // the journal must then start at seq 1 (run checks)
}
