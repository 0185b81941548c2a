package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	harness "github.com/seqbus/seqbus/internal/cluster"
	"github.com/seqbus/seqbus/internal/netns"
)

// binary is the seqbus executable TestMain builds once per test binary run.
// The children run without the race detector: it slows only this process.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "seqbus-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "seqbus")
	// go test puts the toolchain's own bin first in the test's PATH.
	build := exec.Command("go", "build", "-o", binary, "github.com/seqbus/seqbus/cmd/seqbus")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: build seqbus: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// Cluster layout on the LAN: host 0 is the primary, 1 and 2 the standbys
// A and B, 3 the client's host.
const (
	primaryID  = 1
	standbyA   = 2
	standbyB   = 3
	listenPort = 7101
	groupPort  = 7100
	groupAddr  = "239.77.0.1"
	// procTimeout bounds every child process: a hung child is killed by
	// its context even if a test forgets it.
	procTimeout = 3 * time.Minute
	// stopTimeout bounds a graceful SIGTERM exit.
	stopTimeout = 15 * time.Second
	// logTailLines bounds how much of each process log a failure prints.
	logTailLines = 40
)

// proc is one child process running inside a host's namespace: a thin
// wrapper over harness.Proc that keeps the fields the tests read.
type proc struct {
	*harness.Proc
	name    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{}
	err     error // valid after done is closed
}

// startProc runs bin args... inside host via `ip netns exec`, which execs
// the binary in place, so signals reach it directly; a nil host runs it in
// the test's own namespace (the loopback tests). Its stdout and stderr go
// to a file in the test's temp dir; the process is killed at cleanup.
func startProc(t *testing.T, host *netns.Host, name string, args ...string) *proc {
	t.Helper()
	spec := harness.Spec{Name: name, Bin: binary, Args: args, Log: filepath.Join(t.TempDir(), name+".log"), Timeout: procTimeout}
	if host != nil {
		spec.Netns = host.Name
	}
	cp, err := harness.Start(spec)
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{Proc: cp, name: name, logPath: cp.LogPath, cmd: cp.Cmd, done: make(chan struct{})}
	go func() {
		<-cp.Done()
		p.err = cp.Err()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			p.printLog(t)
		}
	})
	return p
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL (if still running) and waits for the exit.
func (p *proc) kill() {
	p.Kill()
	<-p.done
}

// stop sends SIGTERM and waits for a clean exit (the node writes its
// final status on the way out).
func (p *proc) stop(t *testing.T) {
	t.Helper()
	if p.exited() {
		t.Fatalf("%s exited early: %v", p.name, p.err)
	}
	if _, err := p.Stop(stopTimeout); err != nil {
		t.Fatalf("%s did not stop within %v of SIGTERM", p.name, stopTimeout)
	}
	<-p.done
	if p.err != nil {
		t.Fatalf("%s: exit after SIGTERM: %v", p.name, p.err)
	}
}

// wait waits up to timeout for the process to exit by itself.
func (p *proc) wait(t *testing.T, timeout time.Duration) error {
	t.Helper()
	if _, err := p.Wait(timeout); err != nil {
		p.kill()
		t.Fatalf("%s still running after %v", p.name, timeout)
		return nil
	}
	<-p.done
	return p.err
}

func (p *proc) log() string { return p.Log() }

func (p *proc) printLog(t *testing.T) {
	t.Logf("---- %s log (%s) ----\n%s", p.name, p.logPath, p.LogTail(logTailLines))
}

// member is one replica: its host, id, journal directory and process.
type member struct {
	id   uint32
	host *netns.Host
	dir  string
	role string
	args []string // the flags it was started with (restart reuses them)
	p    *proc
	runs int
}

func (m *member) addr() netip.AddrPort { return netip.AddrPortFrom(m.host.Addr, listenPort) }

func (m *member) name() string {
	return fmt.Sprintf("node%d-run%d", m.id, m.runs)
}

// cluster is a static primary and two standbys on a 4-host LAN.
type cluster struct {
	t       *testing.T
	lan     *netns.LAN
	members [3]*member // primary, A, B
	client  *netns.Host
}

type clusterOptions struct {
	snapshotEvery uint64
	fsync         string
	idle          string
}

// newCluster builds the LAN and the members' configuration; nothing runs
// until start.
func newCluster(t *testing.T, o clusterOptions) *cluster {
	t.Helper()
	netns.Require(t)
	netns.RequireTool(t, "nft")
	if o.fsync == "" {
		o.fsync = "group"
	}
	if o.idle == "" {
		o.idle = "block" // seqbus node's default
	}

	lan := netns.NewLAN(t, 4)
	c := &cluster{t: t, lan: lan, client: lan.Hosts[3]}
	ids := [3]uint32{primaryID, standbyA, standbyB}
	for i := range c.members {
		c.members[i] = &member{id: ids[i], host: lan.Hosts[i], dir: filepath.Join(t.TempDir(), fmt.Sprintf("node%d", ids[i])), role: "standby"}
	}
	c.members[0].role = "primary"
	for _, m := range c.members {
		m.args = []string{"node",
			"--id", strconv.Itoa(int(m.id)),
			"--dir", m.dir,
			"--listen", m.addr().String(),
			"--group", groupAddr + ":" + strconv.Itoa(groupPort),
			"--iface", m.host.Iface,
			"--role", m.role,
			"--epoch", "1",
			"--fsync", o.fsync,
			"--idle", o.idle,
		}
		if o.snapshotEvery > 0 {
			m.args = append(m.args, "--snapshot-every", strconv.FormatUint(o.snapshotEvery, 10))
		}
		for _, peer := range c.members {
			if peer != m {
				m.args = append(m.args, "--peer", fmt.Sprintf("%d=%s", peer.id, peer.addr()))
			}
		}
	}
	return c
}

func (c *cluster) primary() *member { return c.members[0] }
func (c *cluster) b() *member       { return c.members[2] }

// start runs a member and waits until it has written its first status.
func (c *cluster) start(m *member) {
	c.t.Helper()
	startMember(c.t, m)
}

// startMember runs m with its args and waits until it has written its
// first status.
func startMember(t *testing.T, m *member) {
	t.Helper()
	m.runs++
	_ = os.Remove(filepath.Join(m.dir, "status.json"))
	m.p = startProc(t, m.host, m.name(), m.args...)
	waitFor(t, 20*time.Second, m.name()+" first status", func() bool {
		if m.p.exited() {
			t.Fatalf("%s exited at start: %v\n%s", m.name(), m.p.err, m.p.log())
		}
		_, ok := readStatus(m.dir)
		return ok
	})
}

func (c *cluster) startAll() {
	c.t.Helper()
	for _, m := range c.members {
		c.start(m)
	}
}

// stopAll stops every running member with SIGTERM, standbys first, so each
// writes its final status and syncs its journal.
func (c *cluster) stopAll() {
	c.t.Helper()
	for i := len(c.members) - 1; i >= 0; i-- {
		if m := c.members[i]; m.p != nil && !m.p.exited() {
			m.p.stop(c.t)
		}
	}
}

// clientSummary mirrors what `seqbus client --json` writes.
type clientSummary struct {
	Sent, Answered, Acks, Rejects, Duplicates, Resent, Unanswered uint64
	Executions                                                    uint64
	ElapsedSec, RatePerSec                                        float64
	LatencyUs                                                     map[string]float64
}

// loadRun is a `seqbus client` process.
type loadRun struct {
	p    *proc
	json string
}

// startLoad runs a fixed-rate client against the primary. The client runs
// in the primary's namespace: `seqbus client` has no flag for its local
// address and binds 127.0.0.1, which cannot reach another host (see
// TestClientOnAnotherHost).
func (c *cluster) startLoad(session uint64, rate float64, count uint64, drain time.Duration) *loadRun {
	c.t.Helper()
	return c.startLoadOn(c.primary().host, session, rate, count, drain)
}

// startLoadOn runs the client on host.
func (c *cluster) startLoadOn(host *netns.Host, session uint64, rate float64, count uint64, drain time.Duration) *loadRun {
	c.t.Helper()
	out := filepath.Join(c.t.TempDir(), fmt.Sprintf("client%d.json", session))
	p := startProc(c.t, host, fmt.Sprintf("client%d", session), "client",
		"--primary", c.primary().addr().String(),
		"--session", strconv.FormatUint(session, 10),
		"--rate", strconv.FormatFloat(rate, 'f', -1, 64),
		"--count", strconv.FormatUint(count, 10),
		"--seed", strconv.FormatUint(session, 10),
		"--drain", drain.String(),
		"--json", out)
	return &loadRun{p: p, json: out}
}

// finish waits for the client and returns its summary; every command must
// have been answered.
func (l *loadRun) finish(t *testing.T, timeout time.Duration) clientSummary {
	t.Helper()
	err := l.p.wait(t, timeout)
	b, rerr := os.ReadFile(l.json)
	if rerr != nil {
		t.Fatalf("client summary: %v (client exit: %v)\n%s", rerr, err, l.p.log())
	}
	var s clientSummary
	if jerr := json.Unmarshal(b, &s); jerr != nil {
		t.Fatalf("client summary %s: %v", b, jerr)
	}
	t.Logf("client: sent %d answered %d acks %d rejects %d duplicates %d resent %d executions %d in %.1fs (%.0f/s) latency us %v",
		s.Sent, s.Answered, s.Acks, s.Rejects, s.Duplicates, s.Resent, s.Executions, s.ElapsedSec, s.RatePerSec, s.LatencyUs)
	if err != nil || s.Unanswered != 0 || s.Answered != s.Sent {
		t.Fatalf("client: %d of %d unanswered (exit: %v)", s.Unanswered, s.Sent, err)
	}
	return s
}

// status is the part of a node's status.json the tests read.
type status = harness.Status

func readStatus(dir string) (status, bool) {
	s, err := harness.ReadStatus(dir)
	return s, err == nil
}

func mustStatus(t *testing.T, m *member) status {
	t.Helper()
	s, ok := readStatus(m.dir)
	if !ok {
		t.Fatalf("node %d: no readable status.json in %s", m.id, m.dir)
	}
	return s
}

// waitFor polls cond every 20 ms until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// journalDigest is one record digest per seq, from first to last
// (harness.ReadJournal's).
type journalDigest struct {
	dir         string
	first, last uint64
	epochs      []epochRun // epochs in log order
	records     []uint64   // records[i] digests seq first+i
	j           *harness.Journal
}

// epochRun is a run of records with the same epoch.
type epochRun = harness.EpochRun

// readJournal opens a stopped node's journal and digests every record,
// checking that seqs are contiguous.
func readJournal(t *testing.T, dir string) journalDigest {
	t.Helper()
	j, err := harness.ReadJournal(dir, harness.JournalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return journalDigest{dir: dir, first: j.First, last: j.Last, epochs: j.Epochs, records: j.Digests, j: j}
}

// compareJournals checks that got holds exactly want's records over got's
// range, and that both end at the same seq. A journal that starts later
// (a standby restored from a snapshot) is compared from its first seq.
func compareJournals(t *testing.T, want, got journalDigest) {
	t.Helper()
	for _, diff := range harness.CompareJournals(want.j, got.j) {
		t.Error(diff)
	}
}

// finalCheck stops nothing; the members must be stopped. It checks equal
// applied and state hash, no hash mismatch anywhere, and journals equal to
// the primary's. It returns the final statuses (primary, A, B).
func (c *cluster) finalCheck() [3]status {
	t := c.t
	t.Helper()
	var st [3]status
	for i, m := range c.members {
		st[i] = mustStatus(t, m)
		t.Logf("node %d (%s): applied %d durable %d released %d ack %d hash %#x journal [%d, %d] node %v",
			m.id, st[i].Role, st[i].Applied, st[i].Durable, st[i].Released, st[i].Ack, st[i].StateHash,
			st[i].Journal.FirstSeq, st[i].Journal.LastSeq, nonZero(st[i].Node))
		if st[i].Node["HashMismatches"] != 0 {
			t.Errorf("node %d: %d state hash mismatches", m.id, st[i].Node["HashMismatches"])
		}
	}
	for i := 1; i < len(st); i++ {
		if st[i].Applied != st[0].Applied || st[i].StateHash != st[0].StateHash {
			t.Errorf("node %d: applied %d hash %#x; primary: applied %d hash %#x",
				st[i].ID, st[i].Applied, st[i].StateHash, st[0].Applied, st[0].StateHash)
		}
	}
	var digests [3]journalDigest
	var wg sync.WaitGroup
	for i, m := range c.members {
		wg.Go(func() { digests[i] = readJournal(t, m.dir) })
	}
	wg.Wait()
	if digests[0].last != st[0].Applied {
		t.Errorf("primary journal ends at %d, applied %d", digests[0].last, st[0].Applied)
	}
	for i := 1; i < len(digests); i++ {
		compareJournals(t, digests[0], digests[i])
	}
	for i, d := range digests {
		t.Logf("journal node %d: [%d, %d] epochs %v", c.members[i].id, d.first, d.last, d.epochs)
		if len(d.epochs) != 1 || d.epochs[0].Epoch != 1 {
			t.Errorf("journal node %d: epochs %v, want only epoch 1", c.members[i].id, d.epochs)
		}
	}
	return st
}

func nonZero(m map[string]uint64) map[string]uint64 {
	out := map[string]uint64{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

// recoveredApplied returns the applied seq a node reported in its
// "recovered" log line.
func recoveredApplied(t *testing.T, log string) uint64 {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(log))
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, "msg=recovered") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "applied="); ok {
				n, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					t.Fatalf("recovered line %q: %v", line, err)
				}
				return n
			}
		}
	}
	t.Fatalf("no recovered line in log:\n%s", log)
	return 0
}

// lastLine returns the last line of log containing substr.
func lastLine(log, substr string) string {
	line := ""
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, substr) {
			line = l
		}
	}
	return line
}
