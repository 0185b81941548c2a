// Package etcdtest starts throw-away 3-member etcd clusters on 127.0.0.1
// for tests (Debian's etcd-server binary; scripts/setup installs it).
package etcdtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Binary is Debian's etcd-server (3.4). The integration tests need it;
// without it they skip, except in CI where a missing binary is a failure.
const Binary = "/usr/bin/etcd"

// Cluster timing for tests: a 50 ms heartbeat and 500 ms election timeout
// make etcd's minimum lease TTL 1 s (1.5 election timeouts, rounded up to
// whole seconds), so a 1 s lease is really 1 s, and elections after a
// killed leader take about half a second.
const (
	HeartbeatMs = 50
	ElectionMs  = 500
	UpBound     = 15 * time.Second
)

func Need(tb testing.TB) {
	tb.Helper()
	if _, err := os.Stat(Binary); err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("%s missing in CI (apt-get install etcd-server): %v", Binary, err)
		}
		tb.Skipf("%s missing (apt-get install etcd-server): skipping etcd integration test", Binary)
	}
}

// member is one etcd process of a test cluster.
type member struct {
	name       string
	dataDir    string
	clientURL  string
	peerURL    string
	logPath    string
	cmd        *exec.Cmd
	waitResult chan error
}

// Cluster is a 3-member etcd cluster on 127.0.0.1 in a temp dir.
type Cluster struct {
	tb      testing.TB
	members []*member
	initial string
	// heartbeatMs and electionMs are etcd's raft timing.
	heartbeatMs, electionMs int
}

// FreePorts reserves n distinct loopback ports by listening on port 0. The
// ports are released before etcd binds them, a small race other processes
// rarely win on a test machine.
func FreePorts(tb testing.TB, n int) []int {
	tb.Helper()
	ports := make([]int, 0, n)
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatalf("reserve port: %v", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		_ = l.Close()
	}
	return ports
}

// Start starts three members with the default test timing, waits
// (bounded) until the cluster answers, and registers a cleanup that kills
// every member.
func Start(tb testing.TB, dir string) *Cluster {
	return StartTimed(tb, dir, HeartbeatMs, ElectionMs)
}

func StartTimed(tb testing.TB, dir string, heartbeatMs, electionMs int) *Cluster {
	tb.Helper()
	Need(tb)
	ports := FreePorts(tb, 6)
	c := &Cluster{tb: tb, heartbeatMs: heartbeatMs, electionMs: electionMs}
	var initial []string
	for i := range 3 {
		m := &member{
			name:      fmt.Sprintf("m%d", i),
			dataDir:   filepath.Join(dir, fmt.Sprintf("m%d.etcd", i)),
			clientURL: fmt.Sprintf("http://127.0.0.1:%d", ports[2*i]),
			peerURL:   fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1]),
			logPath:   filepath.Join(dir, fmt.Sprintf("m%d.log", i)),
		}
		c.members = append(c.members, m)
		initial = append(initial, m.name+"="+m.peerURL)
	}
	c.initial = strings.Join(initial, ",")
	for i := range c.members {
		c.StartMember(i)
	}
	c.WaitHealthy(UpBound)
	return c
}

// start runs member i (fresh, or again on its data dir after kill).
func (c *Cluster) StartMember(i int) {
	c.tb.Helper()
	m := c.members[i]
	logf, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.tb.Fatalf("etcd log: %v", err)
	}
	cmd := exec.Command(Binary,
		"--name", m.name,
		"--data-dir", m.dataDir,
		"--listen-client-urls", m.clientURL,
		"--advertise-client-urls", m.clientURL,
		"--listen-peer-urls", m.peerURL,
		"--initial-advertise-peer-urls", m.peerURL,
		"--initial-cluster", c.initial,
		"--initial-cluster-state", "new",
		"--initial-cluster-token", "seqbus-etcdarb-test",
		"--heartbeat-interval", fmt.Sprint(c.heartbeatMs),
		"--election-timeout", fmt.Sprint(c.electionMs),
		"--logger", "zap",
		"--log-outputs", "stderr",
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = os.Environ()
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		cmd.Env = append(cmd.Env, "ETCD_UNSUPPORTED_ARCH="+runtime.GOARCH)
	}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		c.tb.Fatalf("start etcd %s: %v", m.name, err)
	}
	m.cmd = cmd
	m.waitResult = make(chan error, 1)
	go func() {
		m.waitResult <- cmd.Wait()
		_ = logf.Close()
	}()
	c.tb.Cleanup(func() { c.Kill(i) })
}

// kill SIGKILLs member i (no-op if it is not running) and reaps it.
func (c *Cluster) Kill(i int) {
	m := c.members[i]
	if m.cmd == nil {
		return
	}
	_ = m.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-m.waitResult:
	case <-time.After(10 * time.Second):
		c.tb.Errorf("etcd %s did not exit after SIGKILL", m.name)
	}
	m.cmd = nil
}

func (c *Cluster) Endpoints() []string {
	eps := make([]string, 0, len(c.members))
	for _, m := range c.members {
		eps = append(eps, m.clientURL)
	}
	return eps
}

// rawClient is a plain etcd client for the test's own checks.
func (c *Cluster) Client() *clientv3.Client {
	c.tb.Helper()
	cl, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		c.tb.Fatalf("etcd client: %v", err)
	}
	return cl
}

// waitHealthy waits until a linearizable read succeeds, bounded.
func (c *Cluster) WaitHealthy(bound time.Duration) {
	c.tb.Helper()
	cl := c.Client()
	defer cl.Close()
	deadline := time.Now().Add(bound)
	var err error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		_, err = cl.Get(ctx, "/health")
		cancel()
		if err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.DumpLogs()
	c.tb.Fatalf("etcd cluster not healthy within %v: %v", bound, err)
}

// LeaderIndex returns the index of the member that is etcd's raft
// leader. It asks every running member and, while none says it leads (an
// election under way: with the short timers of StartTimed and a loaded
// machine, a healthy cluster changes leaders now and then), asks again
// for up to leaderWait before failing the test.
func (c *Cluster) LeaderIndex() int {
	c.tb.Helper()
	cl := c.Client()
	defer cl.Close()
	for deadline := time.Now().Add(leaderWait); ; time.Sleep(50 * time.Millisecond) {
		for i, m := range c.members {
			if m.cmd == nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			st, err := cl.Status(ctx, m.clientURL)
			cancel()
			if err == nil && st.Header.MemberId == st.Leader {
				return i
			}
		}
		if time.Now().After(deadline) {
			break
		}
	}
	c.DumpLogs()
	c.tb.Fatalf("no etcd leader found within %v", leaderWait)
	return -1
}

// leaderWait bounds LeaderIndex's wait for an election to end.
const leaderWait = 10 * time.Second

func (c *Cluster) DumpLogs() {
	for _, m := range c.members {
		b, _ := os.ReadFile(m.logPath)
		if len(b) > 4000 {
			b = b[len(b)-4000:]
		}
		c.tb.Logf("--- %s log tail ---\n%s", m.name, b)
	}
}
