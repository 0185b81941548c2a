package main

import (
	"context"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/witness"
)

// TestWitnessOverride is the operator's way out, as run: node 1 takes
// the lease of a real `seqbus witness` alone and is gone, so node 2 is
// refused as not in sync. `seqbus witness override` and a second witness
// are refused while the witness runs on the directory; once it is killed
// (SIGKILL: the kernel drops its lock), the override allows node 2, and
// the restarted witness grants node 2 epoch 2 after its quarantine
// (witness.TestOverrideOnStoppedWitnessOnly checks that a node not named
// is still refused).
func TestWitnessOverride(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	addr := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), freeUDPPort(t))
	w, logs := startWitnessBin(ctx, t, bin, addr, dir)
	defer func() { w.Process.Kill(); w.Wait() }()
	conn, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	reqID := uint64(0)
	// acquire asks for the lease for node until the reply is the wanted
	// one (granted or not), bounded: the witness may still be starting,
	// or in its quarantine.
	acquire := func(node arbiter.NodeID, granted bool, epoch uint64) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			reqID++
			pkt, err := witness.AppendRequest(nil, arbiter.Request{ID: reqID, Kind: arbiter.RequestAcquire, Node: node}, 1)
			if err != nil {
				t.Fatal(err)
			}
			conn.Write(pkt)
			conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			buf := make([]byte, 2048)
			if n, err := conn.Read(buf); err == nil {
				r, err := witness.ParseReply(buf[:n])
				if err == nil && r.RequestID == reqID && r.Granted() == granted && (!granted || r.Epoch == epoch) && (granted || r.Holder == arbiter.NodeNone) {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d never got granted=%v (epoch %d)\nwitness log:\n%s", node, granted, epoch, logs.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	acquire(1, true, 1)
	// Node 1's lease runs out with nobody in sync: node 2 is refused.
	acquire(2, false, 0)
	run := func(args ...string) (string, int) {
		t.Helper()
		cmd := exec.CommandContext(ctx, bin, args...)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	if out, code := run("witness", "override", "--dir", dir, "--allow", "2", "--accept-loss"); code != 1 || !strings.Contains(out, "stop the witness") || !strings.Contains(out, "directory in use") {
		t.Fatalf("override beside a running witness: exit %d\n%s", code, out)
	}
	second := netip.AddrPortFrom(addr.Addr(), freeUDPPort(t))
	if out, code := run("witness", "--listen", second.String(), "--dir", dir); code == 0 || !strings.Contains(out, "another witness") {
		t.Fatalf("a second witness on the directory: exit %d\n%s", code, out)
	}
	w.Process.Kill()
	w.Wait()
	out, code := run("witness", "override", "--dir", dir, "--allow", "2", "--accept-loss")
	if code != 0 || !strings.Contains(out, "before: epoch 1, last holder 1, in-sync set version 1 []") || !strings.Contains(out, "grants epoch 2 to node 1 (the last holder) or [2]") {
		t.Fatalf("override: exit %d\n%s", code, out)
	}
	w, logs = startWitnessBin(ctx, t, bin, addr, dir)
	acquire(2, true, 2)
}
