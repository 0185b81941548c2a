package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/seqbus/seqbus/auth"

	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/engine"
	harness "github.com/seqbus/seqbus/internal/cluster"
	"github.com/seqbus/seqbus/internal/netns"
)

// Failover layout on the LAN: hosts 0 and 1 run nodes 1 and 2 (roles come
// from the witness), host 2 the witness, host 3 the test's own client and
// market-data observer (sockets opened inside that namespace).
const (
	witnessPort = 7000
	// mdGroup is the market-data multicast group the nodes publish on.
	mdGroup = "239.77.0.2:7200"
	// failoverSnapshotEvery keeps snapshots out of these runs, so that the
	// final primary's journal replays from seq 1 and the journals compare
	// record for record.
	failoverSnapshotEvery = 100_000_000
	// loadSession is the in-test client's session.
	loadSession = 7
	// The lease flags are the defaults, given explicitly so that witness
	// and nodes agree: a 1 s lease, renewed every 250 ms, with a 150 ms
	// margin and a 50 ms retry.
	leaseDuration = time.Second
	leaseMargin   = 150 * time.Millisecond
	// examplesMax bounds the examples a violated check keeps.
	examplesMax = 5
)

// witnessProc is the witness process and its state directory (kept across
// restarts, so a restarted witness quarantines and raises the epoch).
type witnessProc struct {
	host  *netns.Host
	dir   string
	p     *proc
	runs  int
	lease time.Duration
}

func (w *witnessProc) addr() netip.AddrPort { return netip.AddrPortFrom(w.host.Addr, witnessPort) }

// fcluster is a witness and two nodes with dynamic roles.
type fcluster struct {
	t      *testing.T
	lan    *netns.LAN
	nodes  [2]*member
	wit    *witnessProc
	client *netns.Host
}

type failoverOptions struct {
	// flags every node gets besides the common ones (--unsafe-no-gating,
	// --unsafe-no-fencing, --min-insync N).
	flags []string
	// lease is the lease (and the witness's restart quarantine) of the
	// nodes and the witness; 0 is leaseDuration.
	lease time.Duration
	// blackoutUntilAhead: primaryKilled's blackout of the standby lasts
	// past its minimum until the primary has applied commands the standby
	// cannot have (holdBlackout).
	blackoutUntilAhead bool
}

// newFailoverCluster builds the LAN and the configuration; nothing runs
// until startWitness and startNode.
func newFailoverCluster(t *testing.T, o failoverOptions) *fcluster {
	t.Helper()
	netns.Require(t)
	netns.RequireTool(t, "nft")
	lan := netns.NewLAN(t, 4)
	lease := o.lease
	if lease == 0 {
		lease = leaseDuration
	}
	c := &fcluster{t: t, lan: lan, client: lan.Hosts[3],
		wit: &witnessProc{host: lan.Hosts[2], dir: filepath.Join(t.TempDir(), "witness"), lease: lease}}
	for i := range c.nodes {
		id := uint32(i + 1)
		c.nodes[i] = &member{id: id, host: lan.Hosts[i], dir: filepath.Join(t.TempDir(), fmt.Sprintf("node%d", id)), role: "witness"}
	}
	for _, m := range c.nodes {
		m.args = []string{"node",
			"--id", strconv.Itoa(int(m.id)),
			"--dir", m.dir,
			"--listen", m.addr().String(),
			"--group", groupAddr + ":" + strconv.Itoa(groupPort),
			"--iface", m.host.Iface,
			"--market-data", mdGroup,
			"--fsync", "group",
			"--snapshot-every", strconv.Itoa(failoverSnapshotEvery),
			"--witness", c.wit.addr().String(),
			"--lease", lease.String(), "--renew", "250ms", "--margin", leaseMargin.String(), "--retry", "50ms",
			// A standby's ack waits for its fdatasync, which the shared
			// CI machine can hold past the default 200 ms: the primary then
			// rightly removes it, and a kill right after halts by design
			// (no leader), which is not what these tests are about. The
			// in-sync tests pass their own (later flags win).
			"--insync-timeout", "1s",
			// The node's own disk: a loaded machine holds an fdatasync
			// for over a second now and then, and past this bound the
			// primary gives its lease up through its disk (a failover
			// no test here is about; node and the simulator test it).
			"--disk-stall-after", "5s",
		}
		for _, f := range o.flags {
			if strings.HasPrefix(f, "--unsafe-") {
				// The unsafe switches exist only on the drill's nodes.
				m.args = append([]string{"drill"}, m.args...)
				break
			}
		}
		m.args = append(m.args, o.flags...)
		for _, peer := range c.nodes {
			if peer != m {
				m.args = append(m.args, "--peer", fmt.Sprintf("%d=%s", peer.id, peer.addr()))
			}
		}
	}
	return c
}

func (c *fcluster) node(id uint32) *member { return c.nodes[id-1] }

// other is the node that is not m.
func (c *fcluster) other(m *member) *member { return c.nodes[2-m.id] }

// startWitness runs the witness and waits until it serves.
func (c *fcluster) startWitness() {
	c.t.Helper()
	w := c.wit
	w.runs++
	w.p = startProc(c.t, w.host, fmt.Sprintf("witness-run%d", w.runs), "witness",
		"--listen", w.addr().String(), "--dir", w.dir, "--lease", w.lease.String())
	waitFor(c.t, 10*time.Second, "the witness to serve", func() bool {
		if w.p.exited() {
			c.t.Fatalf("witness exited at start: %v\n%s", w.p.err, w.p.log())
		}
		return strings.Contains(w.p.log(), "serving")
	})
}

func (c *fcluster) startAll() {
	c.t.Helper()
	c.startWitness()
	for _, m := range c.nodes {
		startMember(c.t, m)
	}
}

// waitLeader waits until a node other than not reports itself primary,
// holding the lease, at an epoch >= minEpoch (harness.PrimaryOf).
func (c *fcluster) waitLeader(timeout time.Duration, not uint32, minEpoch uint64) (*member, status) {
	c.t.Helper()
	var leader *member
	var st status
	waitFor(c.t, timeout, "a leader", func() bool {
		var cands []harness.Candidate
		for _, m := range c.nodes {
			cands = append(cands, harness.Candidate{ID: m.id, Dir: m.dir, Alive: m.p != nil && !m.p.exited()})
		}
		id, s := harness.PrimaryOf(cands, not, minEpoch, true)
		if id == 0 {
			return false
		}
		leader, st = c.node(id), s
		return true
	})
	return leader, st
}

// waitConverged waits until the standby has applied exactly what the
// primary has, with the same state hash, and returns the primary.
func (c *fcluster) waitConverged(timeout time.Duration) *member {
	c.t.Helper()
	var primary *member
	waitFor(c.t, timeout, "the standby to converge on the primary", func() bool {
		var st [2]status
		for i, m := range c.nodes {
			s, ok := readStatus(m.dir)
			if !ok || m.p.exited() {
				return false
			}
			st[i] = s
		}
		for i, s := range st {
			o := st[1-i]
			if s.Role == "primary" && s.Lease.Held && o.Role == "standby" && o.Epoch == s.Epoch &&
				o.Applied == s.Applied && o.StateHash == s.StateHash {
				primary = c.nodes[i]
				return true
			}
		}
		return false
	})
	return primary
}

// stopAll stops the nodes (standby first) with SIGTERM, so each syncs its
// journal and writes its final status, then the witness.
func (c *fcluster) stopAll(primary *member) {
	c.t.Helper()
	for _, m := range []*member{c.other(primary), primary} {
		if m.p != nil && !m.p.exited() {
			m.p.stop(c.t)
		}
	}
	if !c.wit.p.exited() {
		c.wit.p.stop(c.t)
	}
}

// signal sends sig to p's process (harness.Proc.Signal: kill, stop,
// continue).
func signal(t *testing.T, p *proc, sig syscall.Signal) time.Time {
	t.Helper()
	var err error
	if sig == syscall.SIGSTOP {
		// Returns once every thread is stopped: what the test does next
		// (release a held link, resume a peer) must find it stopped.
		err = p.Pause(5 * time.Second)
	} else {
		err = p.Signal(sig)
	}
	if err != nil {
		t.Fatalf("%s: signal %v: %v", p.name, sig, err)
	}
	return time.Now()
}

// killProc sends SIGKILL and waits for the exit.
func killProc(t *testing.T, p *proc) time.Time {
	t.Helper()
	at := signal(t, p, syscall.SIGKILL)
	<-p.done
	return at
}

// blackout drops every replication multicast datagram arriving at host
// (the standby then sees nothing from the primary; NAK repair cannot start
// because it sees no gap); endBlackout removes the rule.
func blackout(t *testing.T, h *netns.Host) {
	t.Helper()
	if err := harness.Blackout(h.Name, groupPort); err != nil {
		t.Fatal(err)
	}
}

func endBlackout(t *testing.T, h *netns.Host) {
	t.Helper()
	if err := harness.EndBlackout(h.Name); err != nil {
		t.Fatal(err)
	}
}

// holdUnicast drops every unicast datagram from src arriving at host (a
// standby's acks to its primary); releaseUnicast removes the rule.
func holdUnicast(t *testing.T, h *netns.Host, src netip.Addr) {
	t.Helper()
	if err := harness.HoldUnicast(h.Name, src, listenPort); err != nil {
		t.Fatal(err)
	}
}

func releaseUnicast(t *testing.T, h *netns.Host) {
	t.Helper()
	if err := harness.ReleaseUnicast(h.Name); err != nil {
		t.Fatal(err)
	}
}

// seenOutput is one output message the test received, with the header of
// the frame that carried it (harness.Seen, with the names the tests use).
type seenOutput struct {
	at    time.Time
	node  uint32
	epoch uint64
	// seq is the frame's seq: the seq of the command whose output comes
	// first in the frame (a frame packs outputs of that seq and later).
	seq uint64
	o   engine.Output
}

func seenOf(in []harness.Seen) []seenOutput {
	out := make([]seenOutput, len(in))
	for i, s := range in {
		out[i] = seenOutput{at: s.At, node: s.Node, epoch: s.Epoch, seq: s.Seq, o: s.O}
	}
	return out
}

// tapConn is the client's socket (harness.Tap): it records every output
// it receives, with the sender and epoch from the frame header, before
// the client matches it.
type tapConn struct{ *harness.Tap }

func newTapConn(u *bus.UDP) *tapConn { return &tapConn{harness.NewTap(u)} }

func (c *tapConn) snapshot() []seenOutput { return seenOf(c.Snapshot()) }

// loadClient is the test's own client (package client), with its socket
// in the client host's namespace. It follows the witness's lease holder.
type loadClient struct {
	cl  *client.Client
	tap *tapConn

	mu      sync.Mutex
	results []client.Result

	done chan struct{}
	rep  client.LoadReport
	err  error
}

// dialClient opens the client in the client host's namespace, pointed at
// primary first.
func (c *fcluster) dialClient(primary *member) *loadClient {
	return c.dialClientWith(primary, nil)
}

// dialClientWith is dialClient with a master key (nil: frames unsealed).
func (c *fcluster) dialClientWith(primary *member, key *auth.MasterKey) *loadClient {
	c.t.Helper()
	lc := &loadClient{done: make(chan struct{})}
	err := c.client.Do(func() error {
		u, err := bus.ListenUnicast(bus.UnicastConfig{
			Addr:   netip.AddrPortFrom(c.client.Addr, 0),
			Tuning: bus.Tuning{RecvBufferBytes: 4 << 20},
		})
		if err != nil {
			return err
		}
		lc.tap = newTapConn(u)
		lc.cl, err = client.Dial(client.Options{
			Core:    client.Config{Session: loadSession},
			Primary: primary.addr(),
			Idle:    bus.Idle{Kind: bus.IdleBlock},
			Conn:    lc.tap,
			Witness: c.wit.addr(),
			Nodes:   map[uint32]netip.AddrPort{1: c.node(1).addr(), 2: c.node(2).addr()},
			Key:     key,
		})
		if err != nil {
			u.Close()
		}
		return err
	})
	if err != nil {
		c.t.Fatalf("client: %v", err)
	}
	c.t.Cleanup(func() { lc.cl.Close() })
	return lc
}

// start runs a fixed-rate load of count commands in the background.
func (lc *loadClient) start(rate float64, count uint64) {
	go func() {
		defer close(lc.done)
		lc.rep, lc.err = lc.cl.Load(context.Background(),
			client.LoadConfig{Rate: rate, Count: count, Instruments: 4, Seed: 11, Drain: 30 * time.Second},
			func(r client.Result) {
				lc.mu.Lock()
				lc.results = append(lc.results, r)
				lc.mu.Unlock()
			})
	}()
}

// answered is how many commands have been answered so far.
func (lc *loadClient) answered() uint64 { return lc.cl.Stats().Answered }

func (lc *loadClient) waitAnswered(t *testing.T, n uint64, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, fmt.Sprintf("%d answers", n), func() bool { return lc.answered() >= n })
}

func (lc *loadClient) running() bool {
	select {
	case <-lc.done:
		return false
	default:
		return true
	}
}

// finish waits for the load to end and logs its report.
func (lc *loadClient) finish(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case <-lc.done:
	case <-time.After(timeout):
		t.Fatalf("load still running after %v (answered %d)", timeout, lc.answered())
	}
	st := lc.rep.Stats
	t.Logf("client: sent %d answered %d acks %d rejects %d duplicates %d resent %d executions %d unmatched %d failovers %d in %v (err %v)",
		lc.rep.Sent, st.Answered, st.Acks, st.Rejects, st.Duplicates, st.Resent, st.Executions, st.Unmatched,
		lc.cl.Failovers(), lc.rep.Elapsed.Round(time.Millisecond), lc.err)
}

// mdObserver receives the market-data multicast on the client host
// (harness.Observer).
type mdObserver struct{ *harness.Observer }

func (c *fcluster) observeMarketData() *mdObserver {
	c.t.Helper()
	var u *bus.UDP
	err := c.client.Do(func() error {
		var err error
		u, err = bus.ListenMulticast(bus.MulticastReceiverConfig{Group: netip.MustParseAddrPort(mdGroup), Interface: c.client.Iface,
			Tuning: bus.Tuning{RecvBufferBytes: 8 << 20}})
		return err
	})
	if err != nil {
		c.t.Fatalf("market-data observer: %v", err)
	}
	return observe(c.t, u)
}

// observe records every output multicast to u until the test ends.
func observe(t *testing.T, u *bus.UDP) *mdObserver {
	t.Helper()
	o, err := harness.Observe(u)
	if err != nil {
		u.Close()
		t.Fatal(err)
	}
	t.Cleanup(o.Close)
	return &mdObserver{o}
}

func (o *mdObserver) snapshot() []seenOutput { return seenOf(o.Snapshot()) }

// findings collects violated checks: for each check, how many violations
// and a few examples. Safe runs require none; unsafe runs require their
// check to be violated.
type findings struct {
	count    map[string]int
	examples map[string][]string
}

func (f *findings) add(check, format string, args ...any) {
	if f.count == nil {
		f.count, f.examples = map[string]int{}, map[string][]string{}
	}
	f.count[check]++
	if len(f.examples[check]) < examplesMax {
		f.examples[check] = append(f.examples[check], fmt.Sprintf(format, args...))
	}
}

// merge adds g's findings to f.
func (f *findings) merge(g *findings) {
	for check, n := range g.count {
		for i := range n {
			if i < len(g.examples[check]) {
				f.add(check, "%s", g.examples[check][i])
			} else {
				f.count[check]++
			}
		}
	}
}

func (f *findings) String() string {
	if len(f.count) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(f.count))
	for k := range f.count {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %s: %d, e.g. %s", k, f.count[k], strings.Join(f.examples[k], "; "))
	}
	return b.String()
}

// The checks (harness.CheckHistory's, and the deposed primary's
// silence the tests check themselves).
const (
	checkAllAnswered   = harness.CheckAllAnswered
	checkInHistory     = harness.CheckInHistory
	checkIdentical     = harness.CheckIdentical
	checkAppliedOnce   = harness.CheckAppliedOnce
	checkReplicas      = harness.CheckReplicas
	checkMDDuplicate   = harness.CheckMDDuplicate
	checkMDReuse       = harness.CheckMDReuse
	checkMDMonotonic   = harness.CheckMDMonotonic
	checkDeposedSilent = harness.CheckDeposedSilent
)

// verify checks the stopped cluster against everything the client and the
// market-data observer received (harness.CheckHistory). primary is the
// final primary.
func (c *fcluster) verify(primary *member, lc *loadClient, md *mdObserver) *findings {
	t := c.t
	t.Helper()
	standby := c.other(primary)
	h := &harness.History{Sent: lc.rep.Sent, LoadErr: lc.err, Stats: lc.rep.Stats,
		PrimaryStatus: mustStatus(t, primary), StandbyStatus: mustStatus(t, standby)}
	for _, s := range []status{h.PrimaryStatus, h.StandbyStatus} {
		t.Logf("node %d (%s, epoch %d): applied %d hash %#x journal [%d, %d] node %v",
			s.ID, s.Role, s.Epoch, s.Applied, s.StateHash, s.Journal.FirstSeq, s.Journal.LastSeq, nonZero(s.Node))
	}
	var perr, serr error
	var wg sync.WaitGroup
	wg.Go(func() {
		h.Primary, perr = harness.ReadJournal(primary.dir, harness.JournalOptions{Replay: true, Engine: engine.NodeConfig(), Session: loadSession})
	})
	wg.Go(func() { h.Standby, serr = harness.ReadJournal(standby.dir, harness.JournalOptions{}) })
	wg.Wait()
	if perr != nil || serr != nil {
		t.Fatalf("journals: primary %v, standby %v", perr, serr)
	}
	t.Logf("final primary %d journal epochs %v; standby %d journal epochs %v", primary.id, h.Primary.Epochs, standby.id, h.Standby.Epochs)
	lc.mu.Lock()
	h.Results = slices.Clone(lc.results)
	lc.mu.Unlock()
	h.Seen, h.MD = lc.tap.Snapshot(), md.Snapshot()
	f := &findings{}
	n := harness.CheckHistory(h, f.add)
	t.Logf("verified: %v; findings: %v", n, f)
	return f
}

// requireClean fails the test for every finding.
func requireClean(t *testing.T, f *findings) {
	t.Helper()
	if len(f.count) != 0 {
		t.Errorf("checks violated:%v", f)
	}
}

// sentAfter counts the outputs in seen that node sent at epoch and that
// arrived after at (by the test's clock, for timelines: a descheduled
// test process stamps late, so checks use arrival order or seqs).
func sentAfter(seen []seenOutput, node uint32, epoch uint64, at time.Time) (n int, first time.Time) {
	for _, s := range seen {
		if s.node == node && s.epoch == epoch && s.at.After(at) {
			if n == 0 {
				first = s.at
			}
			n++
		}
	}
	return n, first
}

// arrivedAfterNewEpoch counts the outputs node sent at epoch that arrived,
// in socket order, after the first output of a later epoch: the new
// primary releases only after the witness granted it the lease, so after
// the old lease ended; an old-epoch output behind it was sent after that.
func arrivedAfterNewEpoch(seen []seenOutput, node uint32, epoch uint64) (n int, first seenOutput) {
	newer := false
	for _, s := range seen {
		if s.epoch > epoch {
			newer = true
			continue
		}
		if newer && s.node == node && s.epoch == epoch {
			if n == 0 {
				first = s
			}
			n++
		}
	}
	return n, first
}

// releasedAbove counts the outputs node sent at epoch in frames whose seq
// is above released: with the release watermark stuck at released, every
// output up to it left before, so such a frame left after.
func releasedAbove(seen []seenOutput, node uint32, epoch, released uint64) (n int, first seenOutput) {
	for _, s := range seen {
		if s.node == node && s.epoch == epoch && s.seq > released {
			if n == 0 {
				first = s
			}
			n++
		}
	}
	return n, first
}

// firstFrom is the arrival of the first output seen from node at epoch.
func firstFrom(seen []seenOutput, node uint32, epoch uint64) (time.Time, bool) {
	for _, s := range seen {
		if s.node == node && s.epoch == epoch {
			return s.at, true
		}
	}
	return time.Time{}, false
}

// lastBefore is the arrival of the last output seen before at.
func lastBefore(seen []seenOutput, at time.Time) time.Time {
	var last time.Time
	for _, s := range seen {
		if s.at.Before(at) {
			last = s.at
		}
	}
	return last
}

// logLine is one parsed slog text line.
type logLine struct {
	at     time.Time
	fields map[string]string
}

// findLogAfter returns the first line of log whose msg starts with msg,
// logged at or after after (log times have millisecond precision, so a
// line up to 1 ms before counts), parsed. Values are key=value or
// key="quoted value".
func findLogAfter(log, msg string, after time.Time) (logLine, bool) {
	l, ok := harness.FindLog(log, msg, after)
	return logLine{at: l.At, fields: l.Fields}, ok
}

// duration parses a logged duration field ("" when missing).
func (l logLine) duration(key string) time.Duration {
	d, _ := time.ParseDuration(l.fields[key])
	return d
}

// ms formats a duration in milliseconds for the timeline.
func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

// rel formats at relative to ref for the timeline, signed, or "absent"
// when the event did not happen.
func rel(at, ref time.Time) string {
	if at.IsZero() {
		return "absent"
	}
	return fmt.Sprintf("%+.1f ms", float64(at.Sub(ref))/float64(time.Millisecond))
}

// statusAfter reads m's status written after at (statuses are rewritten
// every 100 ms by a running node).
func statusAfter(t *testing.T, m *member, at time.Time) status {
	t.Helper()
	var st status
	waitFor(t, 5*time.Second, fmt.Sprintf("node %d status after %v", m.id, at.Format(time.StampMilli)), func() bool {
		fi, err := os.Stat(filepath.Join(m.dir, "status.json"))
		if err != nil || !fi.ModTime().After(at) {
			return false
		}
		s, ok := readStatus(m.dir)
		st = s
		return ok
	})
	return st
}
