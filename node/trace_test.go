package node

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/internal/stagetrace"
)

// TestTraceStages: a primary and a standby with TraceStages record every
// command's stages in path order, and the primary maps each seq to the
// client's (session, client order id).
func TestTraceStages(t *testing.T) {
	c := newCluster(t, 2)
	defer c.closeAll()
	for id := uint32(1); id <= 2; id++ {
		c.start(id, func(cfg *Config) { cfg.TraceStages = 1000 })
		if err := c.nodes[id].TraceWindow(101, 500); err != nil {
			t.Fatal(err)
		}
	}
	cl := dialClient(t, c.addrs[1], 7)
	defer cl.Close()
	const n = 500
	if _, err := cl.Load(context.Background(), client.LoadConfig{Rate: 5000, Count: n, Seed: 1}, nil); err != nil {
		t.Fatal(err)
	}
	c.waitConverged(10 * time.Second)
	dir := t.TempDir()
	var traces [3]*stagetrace.Trace
	for id := uint32(1); id <= 2; id++ {
		nd := c.nodes[id]
		c.stop(id)
		path := filepath.Join(dir, "t")
		if err := nd.WriteTrace(path, os.Getpid()); err != nil {
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
	// whole life's.
	for _, tr := range []*stagetrace.Trace{p, s} {
		h := tr.Header
		if !h.WindowClosed || h.WindowFrom != 101 || h.WindowTo != 500 || h.WindowSyscalls == 0 || h.WindowSyscalls >= h.Syscalls {
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
