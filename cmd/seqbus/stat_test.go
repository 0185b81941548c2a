package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seqbus/seqbus/internal/cluster"
	"github.com/seqbus/seqbus/internal/syncbuf"
)

// statusAt is a primary's status in today's form, written at t.
func statusAt(t *testing.T, id int, role string, at time.Time) string {
	t.Helper()
	return fmt.Sprintf(`{"id":%d,"role":%q,"epoch":3,"applied":10,"durable":10,"released":9,"ack":0,"primary":1,
"lease":{"held":true,"epoch":3,"remaining_ns":500000000},"state_hash":"ffffffffffffff01",
"standbys":[{"id":2,"acked":9,"last_ack_age_ns":1000,"in_sync":true}],
"unicast":{"DatagramsReceived":9900,"drops":{"wrong_group":0,"bad_header":9806,"unknown_sender":0,"other":0}},
"multicast":{"drops":{"wrong_group":0,"bad_header":0,"unknown_sender":0,"other":0}},
"node":{"NaksSent":4,"StepDowns":1},
"written_at":%q,"written_at_mono_ns":5,"pid":0,"started_at":%q,"write_interval_ns":100000000}`,
		id, role, at.UTC().Format(time.RFC3339Nano), at.Add(-time.Minute).UTC().Format(time.RFC3339Nano))
}

func writeStatus(t *testing.T, body string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "status.json"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A killed primary's status still says "primary, lease held": stat must
// say it is STALE once it is older than 3 write intervals, and show the
// socket drops and each standby's ack.
func TestStatStaleDropsAndAcks(t *testing.T) {
	bin := buildBinary(t)
	old := writeStatus(t, statusAt(t, 1, "primary", time.Now().Add(-2*time.Second)))
	out, err := exec.Command(bin, "stat", "--once", old).Output()
	text := string(out)
	if err != nil || !strings.HasPrefix(text, "STALE: written") {
		t.Fatalf("stat --once of a 2 s old status: %v\n%s", err, text)
	}
	for _, want := range []string{"unicast socket drops: bad_header=9806", "acked by standby 2:9", "state hash ffffffffffffff01"} {
		if !strings.Contains(text, want) {
			t.Fatalf("stat output lacks %q:\n%s", want, text)
		}
	}
	fresh := writeStatus(t, statusAt(t, 2, "standby", time.Now().Add(time.Hour))) // written "in the future": not stale
	out, err = exec.Command(bin, "stat", "--once", "--dir", fresh).Output()
	if err != nil || strings.Contains(string(out), "STALE") {
		t.Fatalf("stat --once of a fresh status: %v\n%s", err, out)
	}
}

// Side by side, like AeronStat: one column per directory.
func TestStatCluster(t *testing.T) {
	bin := buildBinary(t)
	a := writeStatus(t, statusAt(t, 1, "primary", time.Now().Add(-time.Minute)))
	b := writeStatus(t, statusAt(t, 2, "standby", time.Now().Add(time.Hour)))
	w := writeStatus(t, fmt.Sprintf(`{"role":"witness","id":0,"holder":1,"epoch":3,"lease_remaining_ns":911700550,"last_holder":1,
"in_sync_version":4,"in_sync":[2],"written_at":%q,"written_at_mono_ns":5,"pid":0,"write_interval_ns":100000000}`, time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano)))
	out, err := exec.Command(bin, "stat", "--once", a, b, w).Output()
	text := string(out)
	if err != nil {
		t.Fatalf("stat DIR DIR: %v\n%s", err, text)
	}
	lines := strings.Split(text, "\n")
	find := func(label string) []string {
		for _, l := range lines {
			if strings.HasPrefix(l, label+" ") {
				return strings.Fields(strings.TrimPrefix(l, label))
			}
		}
		t.Fatalf("no row %q:\n%s", label, text)
		return nil
	}
	if r := find("role"); len(r) != 3 || r[0] != "primary" || r[1] != "standby" || r[2] != "witness" {
		t.Fatalf("role row %q:\n%s", r, text)
	}
	// The witness's lease and set are its own fields, not a node's; a
	// standby's copy of the set is a past grant's.
	if r := find("lease left ms"); r[0] != "500" || r[2] != "912" {
		t.Fatalf("lease row %q:\n%s", r, text)
	}
	if r := find("in-sync"); len(r) != 3 || r[1] != "-" || r[2] != "[2]" {
		t.Fatalf("in-sync row %q:\n%s", r, text)
	}
	if r := find("written ago"); r[0] != "STALE" || strings.Contains(strings.Join(r[2:], " "), "STALE") {
		t.Fatalf("written row %q: want only the first STALE:\n%s", r, text)
	}
	if r := find("acked"); r[0] != "2:9" || r[1] != "0" {
		t.Fatalf("acked row %q:\n%s", r, text)
	}
	if !strings.Contains(text, "u:bad_header=9806") {
		t.Fatalf("no socket drops:\n%s", text)
	}
}

// Refreshing into a pipe writes no screen codes.
func TestStatNoANSIWhenNotATerminal(t *testing.T) {
	bin := buildBinary(t)
	dir := writeStatus(t, statusAt(t, 1, "primary", time.Now()))
	cmd := exec.Command(bin, "stat", "--interval", "50ms", dir)
	var out syncbuf.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(out.String(), "node 1  role primary") < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if n := strings.Count(out.String(), "node 1  role primary"); n < 2 {
		t.Fatalf("%d refreshes in 10 s:\n%s", n, out.String())
	}
	if strings.Contains(out.String(), "\033") {
		t.Fatalf("screen codes written to a pipe: %q", out.String())
	}
}

// startStaticPrimary runs `seqbus node --role primary` on loopback with
// extra flags and waits for its status file.
func startStaticPrimary(t *testing.T, extra ...string) (*exec.Cmd, string) {
	t.Helper()
	bin := buildBinary(t)
	dir := t.TempDir()
	ports := make([]uint16, 2)
	for i := range ports {
		p, err := cluster.FreeLoopbackPort()
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = p
	}
	args := append([]string{"node", "--id", "1", "--role", "primary", "--dir", dir,
		"--listen", cluster.Loopback(ports[0]).String(), "--group", fmt.Sprintf("239.77.9.%d:%d", 1+ports[1]%250, ports[1]), "--iface", "lo"}, extra...)
	cmd := exec.Command(bin, args...)
	var errOut syncbuf.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, "status.json")); err == nil {
			return cmd, dir
		}
		if time.Now().After(deadline) {
			t.Fatalf("no status.json from the node:\n%s", errOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The done-when of issue 19: stat on a killed node says STALE.
func TestStatKilledNodeIsStale(t *testing.T) {
	bin := buildBinary(t)
	cmd, dir := startStaticPrimary(t)
	// A live node is fresh (retried: a loaded machine may stall its
	// status writer past 300 ms now and then).
	var out []byte
	var err error
	for i := 0; i < 50; i++ {
		out, err = exec.Command(bin, "stat", "--once", dir).Output()
		if err == nil && !strings.Contains(string(out), "STALE") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil || strings.Contains(string(out), "STALE") || !strings.Contains(string(out), "role primary") {
		t.Fatalf("stat of a live node: %v\n%s", err, out)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	time.Sleep(500 * time.Millisecond) // > 3 × 100 ms
	out, err = exec.Command(bin, "stat", "--once", dir).Output()
	if err != nil || !strings.HasPrefix(string(out), "STALE") || !strings.Contains(string(out), "is not running") {
		t.Fatalf("stat of a killed node: %v\n%s", err, out)
	}
}
