package node

import (
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/internal/syncbuf"
	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/nodeconfig"
	"github.com/seqbus/seqbus/wire"
)

// lockedLog is a log sink a test reads while the node may write.
type lockedLog struct{ syncbuf.Buffer }

func (l *lockedLog) count(s string) int { return strings.Count(l.String(), s) }

// muteArbiter runs the keeper and counts its requests; it answers
// nothing, or, while answer is set, denies every request: node 2 holds
// the lease for another remainingNs (0: 1 ns).
type muteArbiter struct {
	k           *arbiter.Keeper
	answer      bool
	remainingNs int64
	requests    int
}

func (a *muteArbiter) Tick(nowNs int64, deliver func(arbiter.Reply)) {
	req, ok := a.k.Tick(nowNs)
	if !ok {
		return
	}
	a.requests++
	if !a.answer {
		return
	}
	r := arbiter.Reply{Kind: arbiter.ReplyDeny, RequestID: req.ID, Epoch: 1, Holder: 2, RemainingNs: max(a.remainingNs, 1)}
	r.Deliver(a.k)
	deliver(r)
}

func (a *muteArbiter) ProposeInSync(uint64, []arbiter.NodeID) error { return nil }
func (a *muteArbiter) Close() error                                 { return nil }
func (a *muteArbiter) Release(arbiter.Request)                      {}

// leaseNode is a standby driven by hand under a lease: cfg.NewArbiter's
// (arb) or, with arb nil, the UDP witness at witnessAddr.
func leaseNode(t *testing.T, arb *muteArbiter, logs *lockedLog) (*Node, *stepClock) {
	t.Helper()
	clk := &stepClock{ns: 1}
	cfg := nodeconfig.Config{
		ID: 1, Stream: 9, Dir: "/j", FS: journal.NewMemFS(), Network: nopNetwork{}, Clock: clk,
		Listen: netip.MustParseAddrPort("10.0.0.1:1"), Group: netip.MustParseAddrPort("239.1.1.1:2"),
		Peers:           map[uint32]netip.AddrPort{2: netip.MustParseAddrPort("10.0.0.3:1")},
		NewStateMachine: smallEngine, Log: slog.New(slog.NewTextHandler(logs, nil)),
		Role: nodeconfig.RoleStandby, Journal: journal.Options{Policy: journal.SyncNone, SegmentBytes: 1 << 16},
		PublisherCapacity: 256, MaxSessions: 4,
	}
	if arb != nil {
		cfg.NewArbiter = func(k *arbiter.Keeper) (arbiter.Backend, error) { arb.k = k; return arb, nil }
	} else {
		cfg.Witness = witnessAddr
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n, clk
}

var witnessAddr = netip.MustParseAddrPort("10.0.0.9:7")

const (
	logArbiterSilent = "arbiter unreachable: no lease reply"
	logWitnessSilent = "witness unreachable: no reply"
	logAgain         = "arbiter answering again"
)

// An arbiter that does not answer for three lease durations is counted
// (WitnessSilent) and logged once per episode; its next reply is logged
// as answering again, and a later silence is a new episode. The log line
// names the backend: another backend's, then the UDP witness's (whose
// replies arrive as datagrams from the witness's address only).
func TestArbiterSilenceOncePerEpisode(t *testing.T) {
	const lease = arbiter.DefaultLeaseDurationNs
	t.Run("backend", func(t *testing.T) {
		logs := &lockedLog{}
		arb := &muteArbiter{}
		n, clk := leaseNode(t, arb, logs)
		n.Tick()
		clk.ns += 3*lease - 2
		n.Tick()
		if got := n.Status().Node.WitnessSilent; got != 0 || logs.count(logArbiterSilent) != 0 {
			t.Fatalf("silent before three lease durations: WitnessSilent %d", got)
		}
		clk.ns++
		n.Tick()
		clk.ns += lease
		n.Tick()
		if got := n.Status().Node.WitnessSilent; got != 1 || logs.count(logArbiterSilent) != 1 || logs.count(logWitnessSilent) != 0 {
			t.Fatalf("after three lease durations and one more: WitnessSilent %d, logged %d; want once", got, logs.count(logArbiterSilent))
		}
		arb.answer = true
		clk.ns += lease // the keeper's retry is due
		n.Tick()
		n.Tick()
		if logs.count(logAgain) != 1 {
			t.Fatalf("answering again logged %d times, want once", logs.count(logAgain))
		}
		arb.answer = false
		clk.ns += 3 * lease
		n.Tick()
		if got := n.Status().Node.WitnessSilent; got != 2 || logs.count(logArbiterSilent) != 2 {
			t.Fatalf("a second silence: WitnessSilent %d, logged %d; want 2, 2", got, logs.count(logArbiterSilent))
		}
	})
	t.Run("udp witness", func(t *testing.T) {
		logs := &lockedLog{}
		n, clk := leaseNode(t, nil, logs)
		n.Tick()
		clk.ns += 3 * lease
		n.Tick()
		if got := n.Status().Node.WitnessSilent; got != 1 || logs.count(logWitnessSilent) != 1 || !strings.Contains(logs.String(), "witness="+witnessAddr.String()) {
			t.Fatalf("UDP witness silent: WitnessSilent %d, log %q", got, logs.String())
		}
		deny := wire.Lease{Type: wire.TypeLeaseDeny, Origin: wire.Origin{Stream: 9, Node: 100, Epoch: 1}, RequestID: 1, Holder: 2}
		pkt := deny.Append(nil)
		n.Deliver(pkt, netip.MustParseAddrPort("10.0.0.8:7")) // not the witness
		if st := n.Status(); st.Node.DropUnexpected != 1 || logs.count(logAgain) != 0 {
			t.Fatalf("a lease reply from elsewhere: DropUnexpected %d, answering again logged %d", st.Node.DropUnexpected, logs.count(logAgain))
		}
		n.Deliver(pkt, witnessAddr) // a reply (to no request of ours) all the same
		if logs.count(logAgain) != 1 {
			t.Fatalf("the witness's reply: answering again logged %d times, want once", logs.count(logAgain))
		}
		clk.ns += 3*lease - 1
		n.Tick()
		if got := n.Status().Node.WitnessSilent; got != 1 {
			t.Fatalf("silent again too early: WitnessSilent %d", got)
		}
	})
}
