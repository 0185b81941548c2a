package node

import (
	"log/slog"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/nodeconfig"
	"github.com/seqbus/seqbus/transport"
	"github.com/seqbus/seqbus/wire"
)

// grantArbiter grants node 1 every request, with the in-sync set it
// last proposed (first: members).
type grantArbiter struct {
	k        *arbiter.Keeper
	version  uint64
	members  []arbiter.NodeID
	proposed [][]arbiter.NodeID
}

func (a *grantArbiter) Tick(nowNs int64, deliver func(arbiter.Reply)) {
	req, ok := a.k.Tick(nowNs)
	if !ok {
		return
	}
	r := arbiter.Reply{Kind: arbiter.ReplyGrant, RequestID: req.ID, Epoch: 1, Holder: 1,
		DurationNs: arbiter.DefaultLeaseDurationNs, InSyncVersion: a.version}
	r.Members.N = copy(r.Members.Nodes[:], a.members)
	r.Deliver(a.k)
	deliver(r)
}

func (a *grantArbiter) ProposeInSync(base uint64, members []arbiter.NodeID) error {
	a.proposed = append(a.proposed, slices.Clone(members))
	a.version, a.members = base+1, slices.Clone(members)
	return nil
}
func (a *grantArbiter) Close() error            { return nil }
func (a *grantArbiter) Release(arbiter.Request) {}

// probeNetwork is nopNetwork with a prober the test answers for.
type probeNetwork struct {
	nopNetwork
	p *fakeProber
}

func (n probeNetwork) Prober() transport.Prober { return n.p }

type fakeProber struct {
	probes  []uint32
	frames  [][]byte
	refuse  []uint32
	refused []uint32
}

func (p *fakeProber) Probe(id uint32, _ netip.AddrPort, frame []byte, _ int64) error {
	p.probes, p.frames = append(p.probes, id), append(p.frames, slices.Clone(frame))
	return nil
}

func (p *fakeProber) Refused(int64) []uint32 {
	p.refused, p.refuse = append(p.refused[:0], p.refuse...), nil
	return p.refused
}

func (p *fakeProber) Close() error { return nil }

// TestProbeFindsADeadStandby: a leased primary whose only in-sync
// standby stops acking probes it (a HEARTBEAT of its own epoch) once an
// output has waited --probe-after for it, and no sooner; the probe's
// refusal marks the standby gone (status, counters, the log) and its
// removal goes to the arbiter at once, long before the in-sync timeout.
func TestProbeFindsADeadStandby(t *testing.T) {
	logs := &lockedLog{}
	arb := &grantArbiter{version: 1, members: []arbiter.NodeID{2}}
	pr := &fakeProber{}
	clk := &stepClock{ns: 1}
	cfg := nodeconfig.Config{
		ID: 1, Stream: 9, Dir: "/j", FS: journal.NewMemFS(), Network: probeNetwork{p: pr}, Clock: clk,
		Listen: netip.MustParseAddrPort("10.0.0.1:1"), Group: netip.MustParseAddrPort("239.1.1.1:2"),
		Peers:           map[uint32]netip.AddrPort{2: netip.MustParseAddrPort("10.0.0.3:1")},
		NewStateMachine: smallEngine, Log: slog.New(slog.NewTextHandler(logs, nil)),
		Role: nodeconfig.RoleStandby, Journal: journal.Options{Policy: journal.SyncNone, SegmentBytes: 1 << 16},
		PublisherCapacity: 256, MaxSessions: 4, InSyncTimeoutNs: int64(time.Second),
		NewArbiter: func(k *arbiter.Keeper) (arbiter.Backend, error) { arb.k = k; return arb, nil },
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	step := func(d time.Duration) {
		clk.ns += int64(d)
		n.Tick()
	}
	for range 100 {
		if n.Role() == nodeconfig.RolePrimary {
			break
		}
		step(10 * time.Millisecond)
	}
	if n.Role() != nodeconfig.RolePrimary {
		t.Fatal("no promotion under the grant")
	}
	n.Deliver(commandFrame(5, 1, 100), replayClient)
	step(time.Millisecond)
	if len(pr.probes) != 0 {
		t.Fatalf("probed %v 1 ms into the wait", pr.probes)
	}
	step(2 * time.Millisecond)
	if !slices.Equal(pr.probes, []uint32{2}) {
		t.Fatalf("probes %v after 3 ms of an output waiting, want [2]", pr.probes)
	}
	f, _, err := wire.Parse(pr.frames[0])
	if err != nil || f.Type != wire.TypeHeartbeat || f.Node != 1 || f.Epoch != n.Epoch() {
		t.Fatalf("the probe is not our HEARTBEAT: %+v, %v", f, err)
	}
	pr.refuse = []uint32{2}
	step(time.Millisecond)
	st := n.Status()
	if st.Node.StandbysUnreachable != 1 || st.Node.ProbesRefused != 1 || st.Node.ProbesSent != 1 {
		t.Fatalf("StandbysUnreachable %d, ProbesRefused %d, ProbesSent %d; want 1, 1, 1",
			st.Node.StandbysUnreachable, st.Node.ProbesRefused, st.Node.ProbesSent)
	}
	if len(st.Standbys) != 1 || !st.Standbys[0].Unreachable {
		t.Fatalf("status standbys %+v, want 2 unreachable", st.Standbys)
	}
	if len(arb.proposed) == 0 || len(arb.proposed[len(arb.proposed)-1]) != 0 {
		t.Fatalf("proposals %v, want the set without 2 proposed at once", arb.proposed)
	}
	if logs.count("in-sync standby gone") != 1 {
		t.Fatalf("log:\n%s", logs.String())
	}
	// The arbiter confirms: the output waits no more.
	for range 100 {
		if n.Status().Released > 0 {
			break
		}
		step(10 * time.Millisecond)
	}
	if st := n.Status(); st.Released == 0 || clk.ns > int64(time.Second) {
		t.Fatalf("released %d at %v: not released before the in-sync timeout", st.Released, time.Duration(clk.ns))
	}
}
