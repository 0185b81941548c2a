package node

import (
	"os"
	"time"

	"github.com/seqbus/seqbus/internal/monotime"
	"github.com/seqbus/seqbus/nodeconfig"
	"github.com/seqbus/seqbus/status"
)

// Status returns a snapshot of the node's state and counters.
func (n *Node) Status() status.Status {
	n.mu.Lock()
	st := n.statusLocked()
	n.mu.Unlock()
	n.finishStatus(&st)
	return st
}

// statusLocked copies the node's state into a Status: values only, no
// walk of the latency histogram (its interval is handed over, which is
// a pointer swap) and no clock formatting, so the agent's copy at status
// cadence and an API call hold the lock for a few µs. finishStatus
// completes the copy off the lock.
func (n *Node) statusLocked() status.Status {
	st := status.Status{
		ID:            n.cfg.ID,
		Role:          n.role().String(),
		Applied:       n.eng().AppliedSeq(),
		Durable:       n.j.Durable(),
		StateHash:     status.Hash64(n.eng().StateHash()),
		Refetching:    n.st.Refetching(),
		NewDirectory:  n.st.NewDirectory(),
		DatagramBytes: n.cfg.DatagramBytes,
		Node:          n.stats,
		UptimeNs:      n.nowNs(),
	}
	st.Node.Counters = n.replay.Counters()
	st.SetStorage(n.st)
	st.SetReplica(n.rep, n.cfg.ID, n.cfg.Peers, n.cfg.DiskStallNs, st.UptimeNs)
	st.Fsync = n.commit.Counters()
	st.MD = n.md.Stats()
	st.Lease.Held, st.Lease.RemainingNs, st.Lease.Epoch = n.leaseView(st.UptimeNs)
	st.SetSockets(n.tr)
	if n.agent != nil {
		st.SetAgent(n.agent.runner)
	}
	n.rel.lat.Rotate()
	return st
}

// finishStatus completes a copy statusLocked made, off the node's lock
// (on the status writer's goroutine, a scrape's, an API caller's): a
// primary's assign -> release percentiles (status.Latency.Fill walks the
// histogram's buckets, ~15 µs) and who wrote it when.
func (n *Node) finishStatus(st *status.Status) {
	if st.Role == nodeconfig.RolePrimary.String() {
		n.rel.lat.Fill(st)
	}
	// Read every StatusIntervalNs or on demand, never per command.
	st.WrittenAt = time.Now().UTC().Format(time.RFC3339Nano)
	st.WrittenAtMonoNs = monotime.Now()
	st.PID = os.Getpid()
	st.StartedAt = n.start.UTC().Format(time.RFC3339Nano)
	st.WriteIntervalNs = status.IntervalNs
}

// writeStatus completes st (finishStatus), marshals it and rewrites
// StatusFile atomically through n.statusWrite (nil:
// status.WriteFileAtomic). It takes no lock of the node's.
func (n *Node) writeStatus(st *status.Status) {
	if n.cfg.StatusFile != "" {
		n.finishStatus(st)
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
		n.stages.Batch(n.cfg.ID, n.rep.Roles().Primary())
	}
}
