package node

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/nodeconfig"
	"github.com/seqbus/seqbus/status"
)

// publishStatus copies the status under the lock (values only: cheap)
// and completes, marshals and writes it outside, as the agent's status
// writer does with the copy it is handed (tests without an agent).
func (n *Node) publishStatus() {
	if n.cfg.StatusFile == "" {
		return
	}
	n.mu.Lock()
	st := n.statusLocked()
	n.mu.Unlock()
	n.writeStatus(&st)
}

// TestStatusFileIsTruthful: status.json carries the state hash as hex
// text (a JSON number above 2^53 is rounded by jq), says when and by which
// process it was written, names socket drops, and on the primary shows each
// standby's acked seq.
func TestStatusFileIsTruthful(t *testing.T) {
	defer goleak.VerifyNone(t)
	c := newCluster(t, 2)
	defer c.closeAll()
	statusFile := filepath.Join(t.TempDir(), "status.json")
	c.start(1, func(cfg *nodeconfig.Config) { cfg.StatusFile = statusFile })
	c.start(2, nil)
	cl := dialClient(t, c.addrs[1], 7)
	defer cl.Close()
	if rep, err := cl.Load(context.Background(), client.LoadConfig{Rate: 5_000, Count: 500, Seed: 1, Drain: 10 * time.Second}, nil); err != nil || rep.Stats.Answered != 500 {
		t.Fatalf("load: %v %+v", err, rep)
	}
	c.waitConverged(10 * time.Second)
	// Garbage to the primary's unicast port: a bad-header drop.
	conn, err := net.Dial("udp", c.addrs[1].String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write([]byte("not a seqbus frame at all")); err != nil {
		t.Fatal(err)
	}
	conn.Close()

	want := c.nodes[1].Status()
	var raw map[string]any
	deadline := time.Now().Add(10 * time.Second)
	for {
		raw = nil
		if b, err := os.ReadFile(statusFile); err == nil && json.Unmarshal(b, &raw) == nil {
			uc, _ := raw["unicast"].(map[string]any)
			drops, _ := uc["drops"].(map[string]any)
			sb, _ := raw["standbys"].([]any)
			if drops["bad_header"] == 1.0 && raw["applied"] == float64(want.Applied) && len(sb) == 1 &&
				sb[0].(map[string]any)["acked"] == float64(want.Applied) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("status file never showed the drop and the standby's ack: %v", raw)
		}
		time.Sleep(20 * time.Millisecond)
	}
	hash, ok := raw["state_hash"].(string)
	if !ok || hash != fmt.Sprintf("%016x", uint64(want.StateHash)) {
		t.Fatalf("state_hash %#v, want the hex string %016x", raw["state_hash"], uint64(want.StateHash))
	}
	if at, _ := raw["written_at"].(string); !regexp.MustCompile(`^\d{4}-\d\d-\d\dT`).MatchString(at) {
		t.Fatalf("written_at %q", at)
	} else if tm, err := time.Parse(time.RFC3339Nano, at); err != nil || time.Since(tm) > time.Minute {
		t.Fatalf("written_at %q: %v", at, err)
	}
	if started, _ := raw["started_at"].(string); started == "" {
		t.Fatal("no started_at")
	}
	if raw["pid"] != float64(os.Getpid()) || raw["write_interval_ns"] != float64(status.IntervalNs) {
		t.Fatalf("pid %v write_interval_ns %v", raw["pid"], raw["write_interval_ns"])
	}
	if mono, _ := raw["written_at_mono_ns"].(float64); mono <= 0 {
		t.Fatalf("written_at_mono_ns %v", raw["written_at_mono_ns"])
	}
	sb := raw["standbys"].([]any)[0].(map[string]any)
	if sb["id"] != 2.0 || sb["in_sync"] != true {
		t.Fatalf("standby %v", sb)
	}
	// The Go form reads back, hash and all.
	var back status.Status
	b, _ := os.ReadFile(statusFile)
	if err := json.Unmarshal(b, &back); err != nil || back.StateHash != want.StateHash || back.Unicast.Drops.BadHeader != 1 {
		t.Fatalf("read back: %v, hash %x drops %+v", err, back.StateHash, back.Unicast.Drops)
	}
}
