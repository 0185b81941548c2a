// Package nodetrace records a node's per-seq stage times for `seqbus
// bench` (`seqbus node --trace-stages`): when a seq is sequenced (with its
// session and client order id), acknowledged as the gate needs, durable
// and released on a primary, applied on a standby. It is the node's
// Observer and StageObserver (nodeconfig/hooks.go), so the node package knows
// nothing of tracing: it reports its passes, acks and watermarks, and a
// Tracer stamps them.
//
// The node calls a Tracer under its lock, from its agent, so no record
// takes a lock of its own: every record is an index store into the
// preallocated columns of a stagetrace.Recorder on CLOCK_MONOTONIC (the
// clock of every process on the host), with no allocation or syscall. The
// clock is read once per pass (Batch), not per command (a clock read per
// command was 4 % of the primary's CPU flat out).
package nodetrace

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"

	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/internal/monotime"
	"github.com/seqbus/seqbus/internal/stagetrace"
	"github.com/seqbus/seqbus/nodeconfig"
	"github.com/seqbus/seqbus/status"
)

// ErrNoWindow: Window was called twice.
var ErrNoWindow = errors.New("nodetrace: the measured window is set once, before the node starts")

// Tracer is a node's stage trace: pass it as nodeconfig.Config.Observer.
type Tracer struct {
	rec                                                            *stagetrace.Recorder
	next                                                           nodeconfig.Observer // the Observer it wraps, if any
	nextStages                                                     nodeconfig.StageObserver
	sequenced, session, orderID, acked, durable, released, applied int
	mallocs0                                                       uint64 // runtime.MemStats.Mallocs at New

	// primary and batchNs are the role and the time of the pass whose
	// commands are being sequenced or applied (Batch).
	primary bool
	batchNs int64
	// window measures the bench's measured commands only (Window); set
	// once before the node starts, then read by the node's agent.
	// lastSeq is the seq of its last command once sequenced (primary).
	window  atomic.Pointer[stagetrace.Window]
	lastSeq uint64
}

// New returns a Tracer of the first rows seqs that passes every event on
// to next (nil for none; its StageObserver methods too, if it has them).
func New(rows int, next nodeconfig.Observer) (*Tracer, error) {
	rec, err := stagetrace.NewRecorder(rows, stagetrace.ColSequenced, stagetrace.ColSession, stagetrace.ColOrderID,
		stagetrace.ColAcked, stagetrace.ColDurable, stagetrace.ColReleased, stagetrace.ColApplied)
	if err != nil {
		return nil, err
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t := &Tracer{rec: rec, next: next, mallocs0: ms.Mallocs}
	t.nextStages, _ = next.(nodeconfig.StageObserver)
	col := rec.Column
	t.sequenced, t.session, t.orderID = col(stagetrace.ColSequenced), col(stagetrace.ColSession), col(stagetrace.ColOrderID)
	t.acked, t.durable, t.released = col(stagetrace.ColAcked), col(stagetrace.ColDurable), col(stagetrace.ColReleased)
	t.applied = col(stagetrace.ColApplied)
	return t, nil
}

// Window makes the trace measure allocations and socket calls (syscalls:
// node.Node.SocketSyscalls) over the bench's measured commands, client
// order ids from..to (stagetrace.Window: the primary opens the window
// when it sequences the first and closes it when it releases the last; a
// standby opens and closes it as it applies them). Call it once, before
// the node starts.
func (t *Tracer) Window(from, to uint64, syscalls func() uint64) error {
	w, err := stagetrace.NewWindow(from, to, syscalls)
	if err != nil {
		return err
	}
	if !t.window.CompareAndSwap(nil, w) {
		return ErrNoWindow
	}
	return nil
}

// Batch is nodeconfig.StageObserver's: the pass's role and time for the
// commands Applied reports next.
func (t *Tracer) Batch(id uint32, primary bool) {
	t.primary, t.batchNs = primary, monotime.Now()
	if t.nextStages != nil {
		t.nextStages.Batch(id, primary)
	}
}

// Applied stamps a seq sequenced (primary) or applied (standby).
func (t *Tracer) Applied(id uint32, epoch, seq uint64, cmd []byte) {
	now := t.batchNs
	var h engine.CommandHeader
	herr := h.Parse(cmd)
	w := t.window.Load()
	if t.primary {
		t.rec.Set(t.sequenced, seq, now)
		if herr == nil {
			t.rec.Set(t.session, seq, int64(h.Session))
			t.rec.Set(t.orderID, seq, int64(h.ClientOrderID))
			t.primaryWindow(w, h.ClientOrderID, seq)
		}
	} else {
		t.rec.Set(t.applied, seq, now)
		if herr == nil {
			w.Handled(h.ClientOrderID)
		}
	}
	if t.next != nil {
		t.next.Applied(id, epoch, seq, cmd)
	}
}

// primaryWindow opens the window when the primary sequences the first
// measured command and remembers the last one's seq, for Released.
func (t *Tracer) primaryWindow(w *stagetrace.Window, orderID, seq uint64) {
	if w == nil || orderID < w.From {
		return
	}
	w.Open()
	if orderID == w.To && t.lastSeq == 0 {
		t.lastSeq = seq
	}
}

// Rebuilt is nodeconfig.Observer's (passed on).
func (t *Tracer) Rebuilt(id uint32, from uint64) {
	if t.next != nil {
		t.next.Rebuilt(id, from)
	}
}

// Installed is nodeconfig.Observer's (passed on).
func (t *Tracer) Installed(id uint32, seq uint64) {
	if t.next != nil {
		t.next.Installed(id, seq)
	}
}

// Released stamps the seqs up to the released watermark.
func (t *Tracer) Released(r nodeconfig.ReleaseEvent) {
	t.rec.Stamp(t.released, r.Released, monotime.Now())
	if t.lastSeq != 0 && r.Released >= t.lastSeq {
		t.window.Load().Close()
	}
	if t.next != nil {
		t.next.Released(r)
	}
}

// Acked stamps what the in-sync set has acknowledged as a whole (the
// gate's required ack), not any one standby's ack.
func (t *Tracer) Acked(id, from uint32, ackSeq, requiredAck uint64, nowNs int64) {
	if requiredAck != ^uint64(0) {
		t.rec.Stamp(t.acked, requiredAck, monotime.Now())
	}
	if t.nextStages != nil {
		t.nextStages.Acked(id, from, ackSeq, requiredAck, nowNs)
	}
}

// Durable stamps the seqs up to the durable watermark.
func (t *Tracer) Durable(id uint32, durable uint64, nowNs int64) {
	t.rec.Stamp(t.durable, durable, monotime.Now())
	if t.nextStages != nil {
		t.nextStages.Durable(id, durable, nowNs)
	}
}

// WriteFile writes the trace to path with the node's role, pid, mallocs
// since New, syscalls and commands, from st (the node's Status after
// Close: nothing records any more).
func (t *Tracer) WriteFile(path string, pid int, id uint32, st status.Status) error {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	role := stagetrace.RoleStandby
	commands := st.Applied
	if st.Role == nodeconfig.RolePrimary.String() {
		role = stagetrace.RolePrimary
		commands = st.Node.Commands
	}
	h := stagetrace.Header{Role: role, ID: id, Pid: uint32(pid),
		Mallocs: ms.Mallocs - t.mallocs0, Syscalls: st.Syscalls(), Commands: commands, GOMAXPROCS: uint32(runtime.GOMAXPROCS(0))}
	t.window.Load().Fill(&h)
	if err := t.rec.WriteFile(path, h); err != nil {
		return fmt.Errorf("nodetrace: %w", err)
	}
	return nil
}

var (
	_ nodeconfig.Observer      = (*Tracer)(nil)
	_ nodeconfig.StageObserver = (*Tracer)(nil)
)
