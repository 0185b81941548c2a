package node

import (
	"bytes"
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/nodeconfig"
	"github.com/seqbus/seqbus/wire"
)

// A standby restarted on another cluster's directory whose history is
// SHORTER than its new primary's, with the same epochs (both clusters
// are static primaries of epoch 1), passes every epoch and seq check: it
// acknowledged seqs its new primary did sequence, counted as in sync, and
// could be promoted with the other history (replica.AckAhead catches only
// a longer one). With history ids the standby hears a primary of another
// history in its first HEARTBEAT and latches (no ack, no lease), and the
// primary refuses every ack stamped with the other id: nothing is
// released on it. The directory's own records stay as they were.
func TestForeignHistoryShorter(t *testing.T) {
	defer goleak.VerifyNone(t)
	load := func(c *cluster, count int) {
		cl := dialClient(t, c.addrs[1], 7)
		defer cl.Close()
		if rep, err := cl.Load(context.Background(), client.LoadConfig{Rate: 20_000, Count: uint64(count), Seed: 1, Drain: 10 * time.Second}, nil); err != nil || rep.Stats.Answered != uint64(count) {
			t.Fatalf("load: %v (%+v)", err, rep)
		}
	}
	// Cluster A: 300 commands, then stopped; its standby's directory is
	// the foreign one.
	a := newCluster(t, 2)
	a.start(1, nil)
	a.start(2, nil)
	load(a, 300)
	a.waitConverged(10 * time.Second)
	foreign := a.nodes[2].Status()
	a.closeAll()
	// Cluster B: 1,000 commands; its standby is restarted on A's standby's
	// directory.
	b := newCluster(t, 2)
	defer b.closeAll()
	b.start(1, nil)
	b.start(2, nil)
	load(b, 1000)
	b.waitConverged(10 * time.Second)
	p := b.nodes[1].Status()
	if p.History == 0 || foreign.History == 0 || p.History == foreign.History {
		t.Fatalf("history ids: cluster B %v, cluster A %v: want two, distinct", p.History, foreign.History)
	}
	if s := b.nodes[2].Status(); s.History != p.History || s.ForeignHistory {
		t.Fatalf("B's own standby: history %v foreign %v, want %v, false", s.History, s.ForeignHistory, p.History)
	}
	b.stop(2)
	b.dirs[2] = a.dirs[2]
	standby := b.start(2, nil)
	deadline := time.Now().Add(10 * time.Second)
	for !standby.Status().ForeignHistory {
		if time.Now().After(deadline) {
			t.Fatalf("the standby on A's directory never found its primary's history foreign: %+v", standby.Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A command now waits for standby 2's ack, which never counts.
	cl := dialClient(t, b.addrs[1], 8)
	defer cl.Close()
	rep, _ := cl.Load(context.Background(), client.LoadConfig{Rate: 1000, Count: 20, Seed: 2, Drain: 500 * time.Millisecond}, nil)
	if rep.Stats.Answered != 0 {
		t.Fatalf("%d commands answered on a foreign standby's acks", rep.Stats.Answered)
	}
	s, p := standby.Status(), b.nodes[1].Status()
	if s.Role != nodeconfig.RoleStandby.String() || s.History != foreign.History || s.Node.ForeignHistoryHeard == 0 {
		t.Fatalf("foreign standby: role %s history %v heard %d", s.Role, s.History, s.Node.ForeignHistoryHeard)
	}
	if s.Journal.LastSeq != foreign.Journal.LastSeq || s.Applied != foreign.Applied {
		t.Fatalf("foreign standby journal %d applied %d, was %d %d: it took the other history's records",
			s.Journal.LastSeq, s.Applied, foreign.Journal.LastSeq, foreign.Applied)
	}
	for _, sb := range p.Standbys {
		// B's own standby acknowledged 1,000 before it stopped.
		if sb.ID == 2 && sb.Acked > 1000+rep.Stats.Resent {
			t.Fatalf("the primary counts the foreign standby's acks: %+v", sb)
		}
	}
	// Its ask for the history (wire.Ack.AskHistory, stamped with A's id)
	// may reach the primary before the answer latches it: refused if so.
	if p.Released > 1000 {
		t.Fatalf("released %d, but B's own standby acked 1,000", p.Released)
	}
}

// testHistory is the history id the hand-driven tests' fake primary
// leads: a standby applies nothing before it heard one (replica.Identity).
const testHistory = 0x7e57

// TestForeignHistoryRefusedTheLease: the last holder of a witness-led
// cluster (a standby that took over when the primary stopped, then
// stopped itself) is restarted on another cluster's directory. The
// witness knows it by its node ID alone; without history ids it would
// grant it the free lease and it would lead the other history. The
// witness pinned the cluster's history id with its first primary's
// renew, refuses the foreign node, and the node latches (the refusal
// names the pinned id): it never leads nor acknowledges.
func TestForeignHistoryRefusedTheLease(t *testing.T) {
	defer goleak.VerifyNone(t)
	a := newCluster(t, 2)
	a.start(1, nil)
	a.start(2, nil)
	cl := dialClient(t, a.addrs[1], 7)
	if rep, err := cl.Load(context.Background(), client.LoadConfig{Rate: 20_000, Count: 300, Seed: 1, Drain: 10 * time.Second}, nil); err != nil || rep.Stats.Answered != 300 {
		t.Fatalf("cluster A load: %v (%+v)", err, rep)
	}
	cl.Close()
	a.waitConverged(10 * time.Second)
	foreign := a.nodes[2].Status().History
	a.closeAll()

	lease := arbiter.DefaultConfig()
	w, waddr := startWitness(t, lease)
	defer w.Close()
	b := newCluster(t, 2)
	defer b.closeAll()
	withWitness := func(cfg *nodeconfig.Config) {
		cfg.Role, cfg.Epoch = nodeconfig.RoleStandby, 0
		cfg.Witness, cfg.Lease, cfg.InSyncTimeoutNs = waddr, lease, int64(2*time.Second)
	}
	b.start(1, withWitness)
	b.start(2, withWitness)
	p := b.waitPrimary(5*time.Second, 0)
	s := 3 - p
	cl = dialClient(t, b.addrs[p], 8)
	if rep, err := cl.Load(context.Background(), client.LoadConfig{Rate: 20_000, Count: 500, Seed: 2, Drain: 10 * time.Second}, nil); err != nil || rep.Stats.Answered != 500 {
		t.Fatalf("cluster B load: %v (%+v)", err, rep)
	}
	cl.Close()
	b.waitInSync(p, 10*time.Second)
	ours := b.nodes[p].Status().History
	if ours == 0 || ours == foreign {
		t.Fatalf("history ids: B %v, A %v", ours, foreign)
	}
	b.stop(p)
	if got := b.waitPrimary(time.Duration(2*lease.LeaseDurationNs)+5*time.Second, p); got != s {
		t.Fatalf("node %d took over, want %d", got, s)
	}
	b.stop(s) // the last holder, with everything released
	b.dirs[s] = a.dirs[2]
	standby := b.start(s, withWitness)
	deadline := time.Now().Add(time.Duration(3*lease.LeaseDurationNs) + 5*time.Second)
	for !standby.Status().ForeignHistory {
		if standby.Role() == nodeconfig.RolePrimary {
			t.Fatalf("node %d led another cluster's history", s)
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d never learnt from the witness that its history is foreign: %+v", s, standby.Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// It asks no more: a lease later it still does not lead.
	time.Sleep(time.Duration(lease.LeaseDurationNs))
	if st := standby.Status(); st.Role == nodeconfig.RolePrimary.String() || st.History != foreign || st.Journal.LastSeq != 300 || st.Epoch != 1 {
		t.Fatalf("foreign node: role %s history %v journal %d epoch %d", st.Role, st.History, st.Journal.LastSeq, st.Epoch)
	}
	if ws := w.Stats(); ws.Denies[arbiter.ReasonForeignHistory] == 0 || ws.Grants == 0 {
		t.Fatalf("witness: denies %v, none as of another history", ws.Denies)
	}
}

// TestStandbyRestartUnderLoad: a standby stopped and restarted three
// times while the primary sequences at full rate (each time it hears DATA
// before it knows whose history its primary leads, and drops it until a
// HEARTBEAT says) ends with the primary's journal, command for command at
// the same seqs, and its state. TestUnconfirmedDataIsNotKept pins the
// receive-buffer case down deterministically.
func TestStandbyRestartUnderLoad(t *testing.T) {
	defer goleak.VerifyNone(t)
	c := newCluster(t, 2)
	defer c.closeAll()
	c.start(1, nil)
	c.start(2, nil)
	cl := dialClient(t, c.addrs[1], 7)
	defer cl.Close()
	done := make(chan error, 1)
	var rep client.LoadReport
	go func() {
		var err error
		rep, err = cl.Load(context.Background(), client.LoadConfig{Rate: 20_000, Count: 40_000, Seed: 5, Drain: 20 * time.Second}, nil)
		done <- err
	}()
	for i := range 3 {
		time.Sleep(300 * time.Millisecond)
		c.stop(2)
		time.Sleep(time.Duration(50*(i+1)) * time.Millisecond)
		c.start(2, nil)
	}
	if err := <-done; err != nil || rep.Stats.Answered != 40_000 {
		t.Fatalf("load: %v %+v", err, rep)
	}
	c.waitConverged(20 * time.Second)
	s := c.nodes[2].Status()
	if s.Node.HashMismatches != 0 {
		t.Fatalf("standby: %d hash mismatches", s.Node.HashMismatches)
	}
	c.closeAll()
	p, sb := journalCommands(t, c.dirs[1]), journalCommands(t, c.dirs[2])
	if len(p) != len(sb) {
		t.Fatalf("primary journal holds %d commands, standby %d", len(p), len(sb))
	}
	ps, _ := journalOrderSeqs(t, c.dirs[1])
	ss, _ := journalOrderSeqs(t, c.dirs[2])
	for k, seq := range ps {
		if ss[k] != seq {
			t.Fatalf("command %v at seq %d on the primary, %d on the standby", k, seq, ss[k])
		}
	}
}

// A restarted standby that receives DATA before it has heard its
// primary's history id must not keep that frame for later: the frame is
// the receive buffer's, which the next datagram overwrites. Before, the
// follower kept the frame's messages unapplied and took them when the
// HEARTBEAT arrived, reading whatever the buffer then held: CI's chaos
// run once journaled three other commands at a DATA frame's seqs. Now
// the frame is dropped (DropAwaitingHistory) and taken again when resent.
func TestUnconfirmedDataIsNotKept(t *testing.T) {
	clk := &stepClock{ns: 1}
	fs := joinedFS("/j")
	for _, err := range []error{journal.WriteHistoryID(fs, "/j", testHistory), journal.WriteFence(fs, "/j", 1)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	cfg := handStandbyConfig(clk, nil)
	cfg.FS = fs
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	from, o := cfg.Peers[2], wire.Origin{Stream: 9, Node: 2, Epoch: 1}
	buf := buyData(o, 1)
	n.Deliver(buf, from)
	copy(buf, otherData(o, 1)) // the receive buffer, reused for another datagram
	hb := wire.Heartbeat{Origin: o, HighestSeq: 1, History: testHistory}
	n.Deliver(hb.Append(nil), from)
	n.Deliver(buyData(o, 1), from) // resent after a NAK
	if st := n.Status(); st.Applied != 1 || st.Node.DropAwaitingHistory != 1 {
		t.Fatalf("applied %d, dropped awaiting history %d; want 1, 1", st.Applied, st.Node.DropAwaitingHistory)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	var got []byte
	if err := n.j.ReadFrom(1, func(_, _ uint64, p []byte) bool { got = bytes.Clone(p); return false }); err != nil {
		t.Fatal(err)
	}
	f, _, _ := wire.Parse(buyData(o, 1))
	msgs := f.Messages()
	_, want, _ := msgs.Next()
	if !bytes.Equal(got, want) {
		t.Fatalf("journal holds %x at seq 1, the primary sent %x", got, want)
	}
}

// otherData is a DATA frame at seq of the same length as buyData's with
// another command (a sell).
func otherData(o wire.Origin, seq uint64) []byte {
	b := wire.NewBatch(0)
	b.Reset(wire.TypeData, o, seq)
	b.Add(engine.AppendRequest(nil, 5, seq, &engine.Request{Op: engine.OpNewOrder, Instrument: 1, Side: engine.Sell, Type: engine.Limit, Price: 11, Qty: 2}))
	return bytes.Clone(b.Bytes())
}

// heldArbiter grants epoch 3 to the request its previous Tick took, so
// a grant arrives a tick after its request left: the node can learn in
// between that its directory holds another history.
type heldArbiter struct {
	scriptedArbiter
	held    *arbiter.Request
	deliver bool
}

func (a *heldArbiter) Tick(nowNs int64, deliver func(arbiter.Reply)) {
	if a.held != nil && a.deliver {
		r := arbiter.Reply{Kind: arbiter.ReplyGrant, RequestID: a.held.ID, Epoch: 3, DurationNs: arbiter.DefaultLeaseDurationNs, InSyncVersion: 3}
		r.Deliver(a.k)
		deliver(r)
		a.held = nil
	}
	if req, ok := a.k.Tick(nowNs); ok && a.held == nil {
		a.held = &req
	}
}

// A standby whose request for the lease left before it heard a primary
// of another history (it latched Foreign: it asks no more) may still be
// granted that request. It must not lead another cluster's history: it
// gives the grant back, declined, so the arbiter undoes it.
func TestForeignHistoryDeclinesAGrant(t *testing.T) {
	clk := &stepClock{ns: 1}
	arb := &heldArbiter{}
	cfg := handStandbyConfig(clk, func(k *arbiter.Keeper) (arbiter.Backend, error) { arb.k = k; return arb, nil })
	if err := journal.WriteHistoryID(cfg.FS, cfg.Dir, 0xaaaa); err != nil {
		t.Fatal(err)
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	n.Tick() // the acquire leaves; its grant is held
	if arb.held == nil {
		t.Fatal("the standby asked for no lease")
	}
	ne := wire.NewEpoch{Origin: wire.Origin{Stream: 9, Node: 2, Epoch: 1}, History: 0xbbbb}
	n.Deliver(ne.Append(nil), cfg.Peers[2])
	if !n.Status().ForeignHistory {
		t.Fatal("a primary of another history was not judged foreign")
	}
	arb.deliver = true
	clk.ns += 1000
	n.Tick() // the grant of epoch 3 arrives
	st := n.Status()
	if st.Role != nodeconfig.RoleStandby.String() || st.Node.Promotions != 0 {
		t.Fatalf("a foreign node granted the lease: role %s, promotions %d", st.Role, st.Node.Promotions)
	}
	if st.Node.LeadsDeclinedForeign != 1 || st.Node.LeasesReleased != 1 {
		t.Fatalf("declined %d, leases released %d; want 1, 1", st.Node.LeadsDeclinedForeign, st.Node.LeasesReleased)
	}
	arb.mu.Lock()
	defer arb.mu.Unlock()
	if len(arb.released) != 1 || !arb.released[0].Declined || arb.released[0].Epoch != 3 {
		t.Fatalf("released %+v, want epoch 3's grant declined", arb.released)
	}
}
