package main

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/internal/cluster"
	"github.com/seqbus/seqbus/witness"
)

// TestStatWitness (issue 15 item 7): a running `seqbus witness` writes
// status.json in its --dir, and `seqbus stat --dir` prints it as a
// witness: the lease, requests by kind, drops by reason.
func TestStatWitness(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	addr := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), freeUDPPort(t))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w, _ := startWitnessBin(ctx, t, bin, addr, dir)
	defer func() { w.Process.Kill(); w.Wait() }()
	conn, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	acq, err := witness.AppendRequest(nil, arbiter.Request{ID: 1, Kind: arbiter.RequestAcquire, Node: 1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	deadline := time.Now().Add(20 * time.Second)
	for {
		conn.Write(acq)
		conn.Write([]byte("not a frame"))
		out, err = exec.Command(bin, "stat", "--dir", dir, "--once").Output()
		if err == nil && strings.Contains(string(out), "epoch 1  time left") && strings.Contains(string(out), "last holder 1") && strings.Contains(string(out), "short=") &&
			// The status may show the lease decided while its epoch is
			// still being written (the witness answers meanwhile); wait
			// for the grant.
			strings.Contains(string(out), "grants: acquire=") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stat --once of the witness: %v\n%s", err, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, want := range []string{"witness 0", "requests: acquire=", "grants: acquire=", "drops:", "short="} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("stat --once lacks %q:\n%s", want, out)
		}
	}
	js, err := exec.Command(bin, "stat", "--dir", dir, "--json").Output()
	if err != nil || !strings.Contains(string(js), `"role": "witness"`) {
		t.Fatalf("stat --json: %v %s", err, js)
	}
}

// freeUDPPort returns a UDP port on 127.0.0.1 that was free a moment ago.
func freeUDPPort(t *testing.T) uint16 {
	t.Helper()
	p, err := cluster.FreeLoopbackPort() // below the ephemeral range
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// startWitnessBin starts `seqbus witness` on addr and dir; its output
// goes to the buffer returned. The caller kills and waits for it.
func startWitnessBin(ctx context.Context, t *testing.T, bin string, addr netip.AddrPort, dir string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	w := exec.CommandContext(ctx, bin, "witness", "--listen", addr.String(), "--dir", dir)
	var logs bytes.Buffer
	w.Stdout, w.Stderr = &logs, &logs
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	return w, &logs
}
