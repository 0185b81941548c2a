package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seqbus/seqbus/internal/cluster"
	"github.com/seqbus/seqbus/internal/etcdtest"
)

// TestClientFollowsEtcdLeader: two `seqbus node --arbiter etcd://...`
// processes and `seqbus client --arbiter etcd://...`; the primary is
// SIGKILLed under load and the client, following the etcd lease holder,
// gets every command answered by the new primary.
func TestClientFollowsEtcdLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("runs an etcd cluster and three processes")
	}
	etcdtest.Need(t)
	ec := etcdtest.Start(t, t.TempDir())
	var hosts []string
	for _, e := range ec.Endpoints() {
		hosts = append(hosts, strings.TrimPrefix(e, "http://"))
	}
	arb := "etcd://" + strings.Join(hosts, ",")
	bin := buildBinary(t)
	dir := t.TempDir()
	var ports [3]uint16
	for i := range ports {
		p, err := cluster.FreeLoopbackPort()
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = p
	}
	addr := map[int]netip.AddrPort{1: cluster.Loopback(ports[0]), 2: cluster.Loopback(ports[1])}
	group := fmt.Sprintf("239.75.%d.%d:%d", rand.IntN(250), 1+rand.IntN(250), ports[2])
	procs := map[int]*exec.Cmd{}
	for id := 1; id <= 2; id++ {
		other := 3 - id
		cmd := exec.Command(bin, "node", "--id", strconv.Itoa(id), "--dir", filepath.Join(dir, fmt.Sprint(id)),
			"--listen", addr[id].String(), "--group", group, "--iface", "lo", "--arbiter", arb,
			"--peer", fmt.Sprintf("%d=%s", other, addr[other]), "--fsync", "none")
		cluster.DieWithParent(cmd)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs[id] = cmd
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}
	primary := func() int {
		for id := 1; id <= 2; id++ {
			var st nodeStatus
			out, err := exec.Command(bin, "stat", "--dir", filepath.Join(dir, fmt.Sprint(id)), "--json").Output()
			if err == nil && json.Unmarshal(out, &st) == nil && st.Role == "primary" && procs[id].ProcessState == nil {
				return id
			}
		}
		return 0
	}
	deadline := time.Now().Add(15 * time.Second)
	first := 0
	for first == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		first = primary()
	}
	if first == 0 {
		t.Fatal("no primary within 15 s")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := exec.CommandContext(ctx, bin, "client", "--primary", addr[first].String(), "--arbiter", arb,
		"--node", "1="+addr[1].String(), "--node", "2="+addr[2].String(), "--rate", "2000", "--count", "8000", "--drain", "20s", "--json", "-")
	var out strings.Builder
	cl.Stdout, cl.Stderr = &out, &out
	if err := cl.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	procs[first].Process.Signal(syscall.SIGKILL)
	procs[first].Wait()
	if err := cl.Wait(); err != nil {
		t.Fatalf("client: %v\n%s", err, out.String())
	}
	var sum clientSummary
	text := out.String()
	if err := json.Unmarshal([]byte(text[strings.Index(text, "{"):]), &sum); err != nil {
		t.Fatalf("summary: %v\n%s", err, text)
	}
	if sum.Unanswered != 0 || sum.Answered != 8000 {
		t.Fatalf("answered %d, unanswered %d after the failover:\n%s", sum.Answered, sum.Unanswered, text)
	}
}
