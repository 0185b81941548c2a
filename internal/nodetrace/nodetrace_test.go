package nodetrace

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/internal/cluster"
	"github.com/seqbus/seqbus/internal/stagetrace"
	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/node"
	"github.com/seqbus/seqbus/nodeconfig"
)

// startPair starts a static primary (node 1) and standby (node 2) on
// loopback, each with a Tracer of 1,000 rows measuring client order ids
// 101..500.
func startPair(t *testing.T) (nodes [3]*node.Node, tracers [3]*Tracer, primary netip.AddrPort) {
	ports, err := cluster.FreeLoopbackPorts(3)
	if err != nil {
		t.Fatal(err)
	}
	lo := netip.MustParseAddr("127.0.0.1")
	addrs := map[uint32]netip.AddrPort{1: netip.AddrPortFrom(lo, ports[0]), 2: netip.AddrPortFrom(lo, ports[1])}
	group := netip.AddrPortFrom(netip.AddrFrom4([4]byte{239, 78, byte(rand.IntN(250)), byte(1 + rand.IntN(250))}), ports[2])
	for id := uint32(1); id <= 2; id++ {
		tr, err := New(1000, nil)
		if err != nil {
			t.Fatal(err)
		}
		cfg := nodeconfig.Config{
			ID: id, Stream: 9, Dir: t.TempDir(), Listen: addrs[id], Group: group, Interface: "lo",
			Peers:   map[uint32]netip.AddrPort{3 - id: addrs[3-id]},
			Journal: journal.Options{Policy: journal.SyncNone, SegmentBytes: 1 << 20},
			NewStateMachine: func() (engine.StateMachine, error) {
				return engine.New(engine.NodeConfig())
			},
			Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Idle: bus.Idle{Kind: bus.IdleBlock}, Observer: tr,
		}
		if id == 1 {
			cfg.Role, cfg.Epoch = nodeconfig.RolePrimary, 1
		}
		n, err := node.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.Window(101, 500, n.SocketSyscalls); err != nil {
			t.Fatal(err)
		}
		if err := tr.Window(1, 2, n.SocketSyscalls); err == nil {
			t.Fatal("a second window was taken")
		}
		if err := n.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		nodes[id], tracers[id] = n, tr
	}
	return nodes, tracers, addrs[1]
}

// TestTraceStages: a primary and a standby traced record every command's
// stages in path order, and the primary maps each seq to the client's
// (session, client order id).
func TestTraceStages(t *testing.T) {
	defer goleak.VerifyNone(t)
	nodes, tracers, primary := startPair(t)
	cl, err := client.Dial(client.Options{Core: client.Config{Session: 7, MaxInFlight: 1024}, Primary: primary, Idle: bus.Idle{Kind: bus.IdleBlock}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 500
	if _, err := cl.Load(context.Background(), client.LoadConfig{Rate: 5000, Count: n, Seed: 1}, nil); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	for deadline := time.Now().Add(10 * time.Second); nodes[2].Status().Applied != n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the standby applied %d of %d", nodes[2].Status().Applied, n)
		}
	}
	dir := t.TempDir()
	var traces [3]*stagetrace.Trace
	for id := uint32(1); id <= 2; id++ {
		nodes[id].Close()
		path := filepath.Join(dir, "t")
		if err := tracers[id].WriteFile(path, os.Getpid(), id, nodes[id].Status()); err != nil {
			t.Fatal(err)
		}
		tr, err := stagetrace.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		traces[id] = tr
	}
	p, s := traces[1], traces[2]
	if p.Role != stagetrace.RolePrimary || s.Role != stagetrace.RoleStandby || p.Commands != n || p.Syscalls == 0 || p.Pid != uint32(os.Getpid()) {
		t.Fatalf("headers %+v %+v", p.Header, s.Header)
	}
	// The measured window (client order ids 101..500) closed on both,
	// with the socket calls of 400 commands in it and fewer than the
	// whole life's, and the CPU time they took (getrusage, on Linux).
	for _, tr := range []*stagetrace.Trace{p, s} {
		h := tr.Header
		if !h.WindowClosed || h.WindowFrom != 101 || h.WindowTo != 500 || h.WindowSyscalls == 0 || h.WindowSyscalls >= h.Syscalls ||
			(runtime.GOOS == "linux" && h.WindowCPUNs == 0) {
			t.Fatalf("%s window %+v", h.Role, h)
		}
	}
	ids := map[int64]bool{}
	for seq := 1; seq <= n; seq++ {
		sq := p.Col(stagetrace.ColSequenced)[seq]
		if p.Col(stagetrace.ColSession)[seq] != 7 || sq == 0 {
			t.Fatalf("seq %d: session %d sequenced %d", seq, p.Col(stagetrace.ColSession)[seq], sq)
		}
		ids[p.Col(stagetrace.ColOrderID)[seq]] = true
		for _, col := range []string{stagetrace.ColAcked, stagetrace.ColDurable, stagetrace.ColReleased} {
			if v := p.Col(col)[seq]; v < sq {
				t.Fatalf("seq %d: %s at %d before sequenced at %d", seq, col, v, sq)
			}
		}
		if rel := p.Col(stagetrace.ColReleased)[seq]; rel < p.Col(stagetrace.ColAcked)[seq] || rel < p.Col(stagetrace.ColDurable)[seq] {
			t.Fatalf("seq %d released before acked or durable", seq)
		}
		if a := s.Col(stagetrace.ColApplied)[seq]; a < sq {
			t.Fatalf("seq %d applied at the standby (%d) before it was sequenced (%d)", seq, a, sq)
		}
	}
	if len(ids) != n {
		t.Fatalf("%d distinct client order ids over %d seqs", len(ids), n)
	}
}
