package node

import (
	"fmt"
	"runtime"

	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/internal/monotime"
	"github.com/seqbus/seqbus/internal/stagetrace"
)

// stageTrace records per-seq stage times for `seqbus bench` (Config.
// TraceStages): when a seq is sequenced (with its session and client
// order id), acknowledged as the gate needs, durable and released on a
// primary, applied on a standby. It is an Observer called under the
// node's lock, so it reads the role without racing; every record is an
// index store into preallocated columns on CLOCK_MONOTONIC (the clock of
// every process on the host), with no allocation or syscall.
type stageTrace struct {
	n                                                              *Node
	rec                                                            *stagetrace.Recorder
	next                                                           Observer // the configured Observer, if any
	nextStages                                                     StageObserver
	sequenced, session, orderID, acked, durable, released, applied int
	// mallocs0 is runtime.MemStats.Mallocs when the node started.
	mallocs0 uint64
	// window measures the bench's measured commands only (TraceWindow);
	// lastSeq is the seq of its last command once sequenced (primary).
	window  *stagetrace.Window
	lastSeq uint64
	// batchNs is the time Applied records: read once per COMMAND frame
	// (primary) or per applied run of entries (standby) by stampBatch,
	// not once per command (a clock read per command was 4 % of the
	// primary's CPU flat out); the commands of one frame are sequenced in
	// the same pass.
	batchNs int64
}

// stampBatch reads the clock for the commands about to be sequenced or
// applied (nil-safe: a node without the tracer does nothing).
func (t *stageTrace) stampBatch() {
	if t != nil {
		t.batchNs = monotime.Now()
	}
}

func newStageTrace(n *Node, rows int) (*stageTrace, error) {
	rec, err := stagetrace.NewRecorder(rows, stagetrace.ColSequenced, stagetrace.ColSession, stagetrace.ColOrderID,
		stagetrace.ColAcked, stagetrace.ColDurable, stagetrace.ColReleased, stagetrace.ColApplied)
	if err != nil {
		return nil, err
	}
	t := &stageTrace{n: n, rec: rec, next: n.cfg.Observer}
	t.nextStages, _ = n.cfg.Observer.(StageObserver)
	col := rec.Column
	t.sequenced, t.session, t.orderID = col(stagetrace.ColSequenced), col(stagetrace.ColSession), col(stagetrace.ColOrderID)
	t.acked, t.durable, t.released = col(stagetrace.ColAcked), col(stagetrace.ColDurable), col(stagetrace.ColReleased)
	t.applied = col(stagetrace.ColApplied)
	return t, nil
}

func (t *stageTrace) Applied(id uint32, epoch, seq uint64, cmd []byte) {
	now := t.batchNs
	h, herr := engine.ParseCommand(cmd)
	if t.n.tm.Primary() {
		t.rec.Set(t.sequenced, seq, now)
		if herr == nil {
			t.rec.Set(t.session, seq, int64(h.Session))
			t.rec.Set(t.orderID, seq, int64(h.ClientOrderID))
			t.primaryWindow(h.ClientOrderID, seq)
		}
	} else {
		t.rec.Set(t.applied, seq, now)
		if herr == nil {
			t.window.Handled(h.ClientOrderID)
		}
	}
	if t.next != nil {
		t.next.Applied(id, epoch, seq, cmd)
	}
}

func (t *stageTrace) Rebuilt(id uint32, from uint64) {
	if t.next != nil {
		t.next.Rebuilt(id, from)
	}
}

func (t *stageTrace) Installed(id uint32, seq uint64) {
	if t.next != nil {
		t.next.Installed(id, seq)
	}
}

// primaryWindow opens the window when the primary sequences the first
// measured command and remembers the last one's seq, for Released.
func (t *stageTrace) primaryWindow(orderID, seq uint64) {
	w := t.window
	if w == nil || orderID < w.From {
		return
	}
	w.Open()
	if orderID == w.To && t.lastSeq == 0 {
		t.lastSeq = seq
	}
}

func (t *stageTrace) Released(r ReleaseEvent) {
	t.rec.Stamp(t.released, r.Released, monotime.Now())
	if t.lastSeq != 0 && r.Released >= t.lastSeq {
		t.window.Close()
	}
	if t.next != nil {
		t.next.Released(r)
	}
}

// Acked stamps what the in-sync set has acknowledged as a whole (the
// gate's required ack), not any one standby's ack.
func (t *stageTrace) Acked(id, from uint32, ackSeq uint64, nowNs int64) {
	if ack, ok := t.n.ldr.Primary().Gate().RequiredAck(); ok && ack != ^uint64(0) {
		t.rec.Stamp(t.acked, ack, monotime.Now())
	}
	if t.nextStages != nil {
		t.nextStages.Acked(id, from, ackSeq, nowNs)
	}
}

func (t *stageTrace) Durable(id uint32, durable uint64, nowNs int64) {
	t.rec.Stamp(t.durable, durable, monotime.Now())
	if t.nextStages != nil {
		t.nextStages.Durable(id, durable, nowNs)
	}
}

var (
	_ Observer      = (*stageTrace)(nil)
	_ StageObserver = (*stageTrace)(nil)
)

// Syscalls is the number of send and receive calls that moved data on
// every socket of the node (sendmmsg and recvmmsg calls, from the bus
// counters); receive calls that found nothing are not counted.
func (s *Status) Syscalls() uint64 {
	var sum uint64
	sockets := []bus.Counters{s.Unicast.Counters, s.Multicast.Counters, s.MulticastSend.Counters}
	if s.MarketDataSend != nil {
		sockets = append(sockets, s.MarketDataSend.Counters)
	}
	for _, c := range sockets {
		for i := range c.SendBatches {
			sum += c.SendBatches[i] + c.ReceiveBatches[i]
		}
	}
	return sum
}

// TraceWindow makes the stage trace (Config.TraceStages) measure
// allocations and socket calls over the bench's measured commands, client
// order ids from..to (stagetrace.Window: the primary opens the window
// when it sequences the first and closes it when it releases the last; a
// standby opens and closes it as it applies them). Call it before the
// first measured command arrives. It is an error without TraceStages.
func (n *Node) TraceWindow(from, to uint64) error {
	if n.trace == nil {
		return ErrConfig
	}
	w, err := stagetrace.NewWindow(from, to, n.socketSyscalls)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	n.mu.Lock()
	n.trace.window = w
	n.mu.Unlock()
	return nil
}

// socketSyscalls is Status.Syscalls read straight from the sockets'
// atomic counters (no lock, no allocation), for the trace window, which
// samples it under the node's lock.
func (n *Node) socketSyscalls() uint64 {
	var sum uint64
	for _, s := range [...]Endpoint{n.uc, n.mcRecv, n.mcSend, n.mdSend} {
		if s == nil {
			continue
		}
		c := s.Counters()
		for i := range c.SendBatches {
			sum += c.SendBatches[i] + c.ReceiveBatches[i]
		}
	}
	return sum
}

// WriteTrace writes the stage trace (Config.TraceStages) to path with the
// node's role, pid, mallocs since New, syscalls and commands. Call it
// after Close. It is an error without TraceStages.
func (n *Node) WriteTrace(path string, pid int) error {
	if n.trace == nil {
		return ErrConfig
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	st := n.Status()
	role := stagetrace.RoleStandby
	commands := st.Applied
	if st.Role == RolePrimary.String() {
		role = stagetrace.RolePrimary
		commands = st.Node.Commands
	}
	h := stagetrace.Header{Role: role, ID: n.cfg.ID, Pid: uint32(pid),
		Mallocs: ms.Mallocs - n.trace.mallocs0, Syscalls: st.Syscalls(), Commands: commands, GOMAXPROCS: uint32(runtime.GOMAXPROCS(0))}
	n.mu.Lock()
	n.trace.window.Fill(&h)
	n.mu.Unlock()
	return n.trace.rec.WriteFile(path, h)
}
