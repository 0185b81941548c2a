package node

import (
	"os"
	"time"

	"github.com/seqbus/seqbus/internal/monotime"
	"github.com/seqbus/seqbus/status"
)

// Status returns a snapshot of the node's state and counters.
func (n *Node) Status() status.Status {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.statusLocked()
}

func (n *Node) statusLocked() status.Status {
	st := status.Status{
		ID:            n.cfg.ID,
		Role:          n.role().String(),
		Epoch:         n.tm.Epoch(),
		Applied:       n.eng().AppliedSeq(),
		Durable:       n.j.Durable(),
		StateHash:     status.Hash64(n.eng().StateHash()),
		Refetching:    n.refetching(),
		DatagramBytes: n.cfg.DatagramBytes,
		Node:          n.stats,
		UptimeNs:      n.nowNs(),
		// Status is read every StatusIntervalNs or on demand, never per
		// command: the clock reads here cost nothing on the hot path.
		WrittenAt:       time.Now().UTC().Format(time.RFC3339Nano),
		WrittenAtMonoNs: monotime.Now(),
		PID:             os.Getpid(),
		StartedAt:       n.start.UTC().Format(time.RFC3339Nano),
		WriteIntervalNs: status.IntervalNs,
	}
	st.Node.Counters = n.replay.Counters()
	st.SetStorage(n.st.Counters(), n.snaps)
	st.Fsync = n.commit.Counters()
	st.MD = n.md.Stats()
	st.Lease.Held, st.Lease.RemainingNs, st.Lease.Epoch = n.leaseView(st.UptimeNs)
	st.SetInSync(&n.isr)
	st.Journal.FirstSeq = n.j.First()
	_, st.Journal.LastSeq = n.j.Last()
	st.SetSockets(n.tr)
	if n.tm.Primary() {
		st.Primary = n.cfg.ID
		st.SetLeader(n.ldr, n.cfg.Peers, n.isr.Members(), n.rel.hist, st.UptimeNs)
	} else {
		st.Primary = n.fol.Standby().Primary()
		st.SetFollower(n.fol)
	}
	return st
}

// publishStatus copies the status under the lock (values only: cheap)
// and marshals and writes it outside (the drivers' and tests' way; the
// agent publishes to its status.Publisher instead).
func (n *Node) publishStatus() {
	if n.cfg.StatusFile == "" {
		return
	}
	n.mu.Lock()
	st := n.statusLocked()
	n.mu.Unlock()
	n.writeStatus(&st)
}

// writeStatus marshals st and rewrites StatusFile atomically through
// n.statusWrite (nil: status.WriteFileAtomic). It takes no lock.
func (n *Node) writeStatus(st *status.Status) {
	if n.cfg.StatusFile != "" {
		_ = status.Write(n.cfg.StatusFile, st, n.statusWrite)
	}
}

// SocketSyscalls is Status.Syscalls read straight from the sockets'
// atomic counters (no lock, no allocation): a stage trace's window
// samples it from the node's agent, in an Observer call.
func (n *Node) SocketSyscalls() uint64 { return n.tr.Syscalls() }

// stageBatch tells a StageObserver that the commands about to be
// sequenced or applied are one pass's.
func (n *Node) stageBatch() {
	if n.stages != nil {
		n.stages.Batch(n.cfg.ID, n.tm.Primary())
	}
}
