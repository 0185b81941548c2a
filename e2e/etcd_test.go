package e2e

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/client"
	harness "github.com/seqbus/seqbus/internal/cluster"
	"github.com/seqbus/seqbus/internal/etcdtest"
)

// The etcd tests run two seqbus nodes whose lease comes from a real
// 3-member etcd cluster (package etcdarb, `seqbus node --arbiter
// etcd://...`). As the issue asks, everything runs on loopback in the
// test's own namespace: the etcd members (internal/etcdtest), the nodes
// (replication and market-data multicast on random 239.78/239.79 groups
// pinned to lo with TTL 0) and the test's client. The client has no
// witness to ask who leads, so the test follows the lease holder by
// polling the nodes' status files (see etcdFollower).
const (
	// etcd raft timing: a 25 ms heartbeat and a 250 ms election timeout,
	// the setting etcdarb recommends (an etcd leader election then stalls
	// etcd 0.5-0.9 s, which a 2 s lease survives; etcd's minimum lease TTL
	// becomes 1 s, so a 1 s lease is really 1 s).
	etcdHeartbeatMs = 25
	etcdElectionMs  = 250
	// etcdRate is the load of every etcd test: moderate, because the test
	// process runs with the race detector on 2 shared cores.
	etcdRate = 3_000
	// etcdWarmup is how many answers the load gets before the fault.
	etcdWarmup = 3_000
	// etcdFollowEvery is how often the follower reads the status files (the
	// nodes rewrite them every 100 ms).
	etcdFollowEvery = 20 * time.Millisecond
)

// etcdLease is the lease configuration the nodes get.
type etcdLease struct {
	lease, renew, margin, retry time.Duration
}

// etcdWitnessLikeLease is the UDP witness's default lease (1 s, renewed every
// 250 ms, 150 ms margin): the failover tests use it so that their timings
// compare with the witness's.
var etcdWitnessLikeLease = etcdLease{lease: time.Second, renew: 250 * time.Millisecond, margin: 150 * time.Millisecond, retry: 50 * time.Millisecond}

// etcdRecommendedLease is what etcdarb recommends with a 250 ms election
// timeout: a 2 s lease, which outlasts an etcd leader election. Renewing
// every 500 ms keeps the view (lease - margin = 1.9 s after the last
// renewal sent) at least 1.4 s ahead of the clock.
var etcdRecommendedLease = etcdLease{lease: 2 * time.Second, renew: 500 * time.Millisecond, margin: 100 * time.Millisecond, retry: 50 * time.Millisecond}

// ecluster is an etcd cluster and two seqbus nodes on loopback. fc holds
// the nodes so that the failover helpers (waitLeader, waitConverged,
// other, verify) work unchanged; it has no LAN and no witness.
type ecluster struct {
	t     *testing.T
	etcd  *etcdtest.Cluster
	fc    *fcluster
	addrs map[uint32]netip.AddrPort
	md    netip.AddrPort
	lease etcdLease
}

type etcdOptions struct {
	lease etcdLease
	// flags every node gets besides the common ones; an --unsafe- flag
	// runs the nodes as `seqbus drill node`.
	flags []string
}

// newEtcdCluster starts the etcd cluster and configures the nodes; the
// nodes run only after start.
func newEtcdCluster(t *testing.T, o etcdOptions) *ecluster {
	t.Helper()
	etcdtest.Need(t)
	et := etcdtest.StartTimed(t, t.TempDir(), etcdHeartbeatMs, etcdElectionMs)
	var hosts []string
	for _, ep := range et.Endpoints() {
		hosts = append(hosts, strings.TrimPrefix(ep, "http://"))
	}
	ports := etcdFreeUDPPorts(t, 4)
	group := netip.AddrPortFrom(netip.AddrFrom4([4]byte{239, 78, byte(rand.IntN(250)), byte(1 + rand.IntN(250))}), uint16(ports[2]))
	c := &ecluster{t: t, etcd: et, fc: &fcluster{t: t}, addrs: map[uint32]netip.AddrPort{}, lease: o.lease,
		md: netip.AddrPortFrom(netip.AddrFrom4([4]byte{239, 79, byte(rand.IntN(250)), byte(1 + rand.IntN(250))}), uint16(ports[3]))}
	for i := range c.fc.nodes {
		id := uint32(i + 1)
		c.addrs[id] = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(ports[i]))
		c.fc.nodes[i] = &member{id: id, dir: filepath.Join(t.TempDir(), fmt.Sprintf("node%d", id)), role: "etcd"}
	}
	l := o.lease
	for _, m := range c.fc.nodes {
		m.args = []string{"node",
			"--id", strconv.Itoa(int(m.id)),
			"--dir", m.dir,
			"--listen", c.addrs[m.id].String(),
			"--group", group.String(),
			"--iface", "lo",
			"--market-data", c.md.String(),
			"--fsync", "group",
			"--snapshot-every", strconv.Itoa(failoverSnapshotEvery),
			"--arbiter", "etcd://" + strings.Join(hosts, ","),
			"--lease", l.lease.String(), "--renew", l.renew.String(), "--margin", l.margin.String(), "--retry", l.retry.String(),
			// As in newFailoverCluster: a standby's ack waits for its
			// fdatasync, which a loaded machine holds past the default
			// 200 ms; the primary then rightly removes it from the
			// in-sync set and a fault right after halts by design (no
			// member to promote), which is not what these tests are about
			// (TestEtcdPausedPrimary timed out waiting for a leader so).
			// A test about removal passes its own (later flags win).
			"--insync-timeout", "1s",
			// And the node's own disk, as there.
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
		for _, peer := range c.fc.nodes {
			if peer != m {
				m.args = append(m.args, "--peer", fmt.Sprintf("%d=%s", peer.id, c.addrs[peer.id]))
			}
		}
	}
	return c
}

// etcdFreeUDPPorts is n distinct UDP ports free a moment ago, drawn below
// the kernel's ephemeral range (harness.FreeLoopbackPorts), so no other
// test's ephemeral socket takes one before the nodes bind it.
func etcdFreeUDPPorts(t *testing.T, n int) []int {
	t.Helper()
	got, err := harness.FreeLoopbackPorts(n)
	if err != nil {
		t.Fatalf("reserve UDP ports: %v", err)
	}
	ports := make([]int, n)
	for i, p := range got {
		ports[i] = int(p)
	}
	return ports
}

// startNode runs m (again, on its own disk, after a kill) and waits until
// it has written its first status.
func (c *ecluster) startNode(m *member) {
	c.t.Helper()
	m.runs++
	_ = os.Remove(filepath.Join(m.dir, "status.json"))
	m.p = startProc(c.t, nil, m.name(), m.args...)
	waitFor(c.t, 20*time.Second, m.name()+" first status", func() bool {
		if m.p.exited() {
			c.t.Fatalf("%s exited at start: %v\n%s", m.name(), m.p.err, m.p.log())
		}
		_, ok := readStatus(m.dir)
		return ok
	})
}

// startAll runs both nodes and waits for a leader whose standby is in
// the in-sync set (only a member of the set may be promoted).
func (c *ecluster) startAll() (*member, status) {
	c.t.Helper()
	for _, m := range c.fc.nodes {
		c.startNode(m)
	}
	p, st := c.fc.waitLeader(15*time.Second, 0, 1)
	waitFor(c.t, 10*time.Second, "the standby in the in-sync set", func() bool {
		s, ok := readStatus(p.dir)
		return ok && s.Node["InSyncMembers"] == 1
	})
	return p, st
}

// stopAll stops the nodes (the standby first) with SIGTERM, so each syncs
// its journal and writes its final status.
func (c *ecluster) stopAll(primary *member) {
	c.t.Helper()
	for _, m := range []*member{c.fc.other(primary), primary} {
		if m.p != nil && !m.p.exited() {
			m.p.stop(c.t)
		}
	}
}

// dialClient opens the test's client on loopback, pointed at primary, and
// an observer of the market-data group on lo.
func (c *ecluster) dialClient(primary *member) (*loadClient, *mdObserver) {
	c.t.Helper()
	u, err := bus.ListenUnicast(bus.UnicastConfig{
		Addr:   netip.MustParseAddrPort("127.0.0.1:0"),
		Tuning: bus.Tuning{RecvBufferBytes: 4 << 20},
	})
	if err != nil {
		c.t.Fatalf("client socket: %v", err)
	}
	lc := &loadClient{done: make(chan struct{}), tap: newTapConn(u)}
	lc.cl, err = client.Dial(client.Options{
		Core:    client.Config{Session: loadSession},
		Primary: c.addrs[primary.id],
		Idle:    bus.Idle{Kind: bus.IdleBlock},
		Conn:    lc.tap,
	})
	if err != nil {
		u.Close()
		c.t.Fatalf("client: %v", err)
	}
	c.t.Cleanup(func() { lc.cl.Close() })

	mu, err := bus.ListenMulticast(bus.MulticastReceiverConfig{Group: c.md, Interface: "lo",
		Tuning: bus.Tuning{RecvBufferBytes: 8 << 20}})
	if err != nil {
		c.t.Fatalf("market-data observer: %v", err)
	}
	obs := observe(c.t, mu)
	return lc, obs
}

// startEtcdLoad runs count commands at etcdRate in the background.
func (lc *loadClient) startEtcdLoad(count uint64) { lc.start(etcdRate, count) }

// etcdFollower points the client at the lease holder, as the client does
// itself with a witness: every etcdFollowEvery it reads both status files and,
// when a node reports itself primary holding the lease at an epoch higher
// than the one followed, calls SetPrimary (which resends everything in
// flight). It runs until the test ends.
type etcdFollower struct {
	stop, done chan struct{}
	mu         sync.Mutex
	switches   []etcdFollowSwitch
}

type etcdFollowSwitch struct {
	at    time.Time
	node  uint32
	epoch uint64
}

func (s etcdFollowSwitch) String() string {
	return fmt.Sprintf("to node %d at epoch %d", s.node, s.epoch)
}

func (c *ecluster) follow(lc *loadClient, primary *member, epoch uint64) *etcdFollower {
	f := &etcdFollower{stop: make(chan struct{}), done: make(chan struct{})}
	cur := primary.id
	go func() {
		defer close(f.done)
		tick := time.NewTicker(etcdFollowEvery)
		defer tick.Stop()
		for {
			select {
			case <-f.stop:
				return
			case <-tick.C:
			}
			for _, m := range c.fc.nodes {
				s, ok := readStatus(m.dir)
				if !ok || s.Role != "primary" || !s.Lease.Held || s.Epoch <= epoch {
					continue
				}
				epoch = s.Epoch
				if m.id != cur {
					cur = m.id
					lc.cl.SetPrimary(c.addrs[m.id])
					f.mu.Lock()
					f.switches = append(f.switches, etcdFollowSwitch{at: time.Now(), node: m.id, epoch: s.Epoch})
					f.mu.Unlock()
				}
			}
		}
	}()
	c.t.Cleanup(f.close)
	return f
}

func (f *etcdFollower) close() {
	select {
	case <-f.stop:
	default:
		close(f.stop)
	}
	<-f.done
}

func (f *etcdFollower) seen() []etcdFollowSwitch {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]etcdFollowSwitch(nil), f.switches...)
}

// etcdFirstSwitch is when the follower first pointed the client elsewhere.
func etcdFirstSwitch(f *etcdFollower) time.Time {
	if sw := f.seen(); len(sw) > 0 {
		return sw[0].at
	}
	return time.Time{}
}

// etcdFirstArrivalAfter is the arrival of the first output at or after at.
func etcdFirstArrivalAfter(seen []seenOutput, at time.Time) (time.Time, bool) {
	for _, s := range seen {
		if !s.at.Before(at) {
			return s.at, true
		}
	}
	return time.Time{}, false
}

// TestEtcdFailoverPrimaryKilled kills the primary with SIGKILL under load,
// the lease coming from etcd: the standby must be granted a higher epoch
// once the dead primary's etcd lease expires and promote; the client,
// pointed at it, resends; the old primary restarted on its disk rejoins as
// a standby; every acknowledged order is in the final history, nothing is
// applied twice and the replicas are identical. The failover timeline is
// logged, to compare with the UDP witness (promoted 0.78-0.98 s after the
// SIGKILL with the same 1 s lease).
func TestEtcdFailoverPrimaryKilled(t *testing.T) {
	begin := time.Now()
	c := newEtcdCluster(t, etcdOptions{lease: etcdWitnessLikeLease})
	old, ost := c.startAll()
	lc, md := c.dialClient(old)
	fw := c.follow(lc, old, ost.Epoch)
	lc.startEtcdLoad(4 * etcdRate)
	lc.waitAnswered(t, etcdWarmup, 30*time.Second)
	standby := c.fc.other(old)
	killedAt := killProc(t, old.p)
	nw, nst := c.fc.waitLeader(10*time.Second, old.id, ost.Epoch+1)
	promotedSeen := time.Now()
	if nw != standby {
		t.Fatalf("node %d leads after the kill of node %d", nw.id, old.id)
	}
	lc.finish(t, 60*time.Second)

	c.startNode(old)
	final := c.fc.waitConverged(20 * time.Second)
	if final != nw {
		t.Errorf("node %d leads at the end; node %d was promoted", final.id, nw.id)
	}
	c.stopAll(final)
	requireClean(t, c.fc.verify(final, lc, md))

	seen := lc.tap.snapshot()
	log := nw.p.log()
	prom, okP := findLogAfter(log, "PROMOTED", killedAt)
	firstRel, okR := findLogAfter(log, "first release after promotion", killedAt)
	firstNew, okN := firstFrom(seen, nw.id, nst.Epoch)
	if !okP || !okR || !okN {
		t.Errorf("timeline incomplete: promoted %v, first release %v, first answer from the new primary %v", okP, okR, okN)
	}
	// The dead primary renewed at most one renew interval before the kill,
	// so its etcd lease (TTL = the lease) lived at least lease - renew
	// after it: a promotion earlier than that (less the log's 1 ms
	// precision) would mean etcd granted a second holder.
	if earliest := c.lease.lease - c.lease.renew - time.Millisecond; okP && prom.at.Sub(killedAt) < earliest {
		t.Errorf("node %d promoted %v after the kill, before the dead primary's etcd lease could have expired (%v)",
			nw.id, prom.at.Sub(killedAt), earliest)
	}
	sw := fw.seen()
	if len(sw) != 1 || sw[0].node != nw.id {
		t.Errorf("the client followed %v; want one switch, to node %d", sw, nw.id)
	}
	var switchedAt time.Time
	if len(sw) > 0 {
		switchedAt = sw[0].at
	}
	rejoin := mustStatus(t, old)
	t.Logf("etcd failover timeline (lease %v, renew %v, margin %v; etcd election %d ms), times from the SIGKILL of node %d:\n"+
		"  last output at the client from the old primary  %s\n"+
		"  node %d PROMOTED at epoch %d (log)            %s  (since_last_primary_frame %v, lease_acquired_in %v)\n"+
		"  first release by the new primary (log)          %s  (after promotion %v)\n"+
		"  test saw the new leader's status                %s; client pointed at it %s\n"+
		"  first output at the client from the new primary %s\n"+
		"  detection to promotion (last primary frame to PROMOTED) %v; the witness: 0.78-0.98 s from SIGKILL to PROMOTED\n"+
		"  old primary on rejoin: SuffixDiscarded %d HistoryDiscarded %d; wall %v",
		c.lease.lease, c.lease.renew, c.lease.margin, etcdElectionMs, old.id,
		rel(lastBefore(seen, killedAt), killedAt),
		nw.id, nst.Epoch, rel(prom.at, killedAt), prom.duration("since_last_primary_frame"), prom.duration("lease_acquired_in"),
		rel(firstRel.at, killedAt), firstRel.duration("after"),
		rel(promotedSeen, killedAt), rel(switchedAt, killedAt),
		rel(firstNew, killedAt),
		prom.duration("since_last_primary_frame"),
		rejoin.Node["SuffixDiscarded"], rejoin.Node["HistoryDiscarded"], time.Since(begin).Round(time.Millisecond))
}

// TestEtcdOneMemberDown kills etcd's raft leader under steady load, with
// the recommended settings (250 ms election timeout, 2 s lease): etcd is
// silent while it elects a new leader, but the primary's lease view
// outlasts that, so there is no failover (same primary, same epoch, no
// lease lost, the standby stays a standby, the client never switches) and
// releases go on. The longest gap between outputs at the client (the
// target: under one renew interval) and the smallest lease headroom the
// primary reported are logged.
func TestEtcdOneMemberDown(t *testing.T) {
	begin := time.Now()
	// Under scripts/test-under-load, whose disk writer holds fdatasync up
	// for over a second, node 1 once gave its lease up through its disk,
	// not through etcd, inside this test's window, when the disk-stall
	// bound was the in-sync timeout (1 s); the helper's
	// --disk-stall-after 5s keeps this test about etcd.
	c := newEtcdCluster(t, etcdOptions{lease: etcdRecommendedLease})
	p, pst := c.startAll()
	sb := c.fc.other(p)
	lc, md := c.dialClient(p)
	fw := c.follow(lc, p, pst.Epoch)
	// Warmup (1 s) plus the observation window (one lease plus the
	// longest etcd election measured, and a margin), plus a tail of 3 s:
	// the warmup's answers can come late (the first release after the
	// promotion waits for the standby, and the load's early commands are
	// resent), and a 1 s tail once let the load end inside the window.
	observe := c.lease.lease + 1500*time.Millisecond
	lc.startEtcdLoad(uint64(float64(etcdRate) * (1 + observe.Seconds() + 3)))
	lc.waitAnswered(t, etcdWarmup, 30*time.Second)
	before := mustStatus(t, p)
	leader := c.etcd.LeaderIndex()
	killedAt := time.Now()
	c.etcd.Kill(leader)

	// Sample the primary's status through the window: it must hold its
	// lease at its epoch at every sample.
	minRemaining := time.Duration(1 << 62)
	var broken []string
	var last status
	for time.Since(killedAt) < observe {
		time.Sleep(etcdFollowEvery)
		s, ok := readStatus(p.dir)
		if !ok {
			continue
		}
		last = s
		minRemaining = min(minRemaining, time.Duration(s.Lease.RemainingNs))
		if (s.Role != "primary" || !s.Lease.Held || s.Epoch != pst.Epoch) && len(broken) < examplesMax {
			broken = append(broken, fmt.Sprintf("%s: role %s held %v epoch %d", rel(time.Now(), killedAt), s.Role, s.Lease.Held, s.Epoch))
		}
	}
	if !lc.running() {
		t.Errorf("the load ended inside the observation window: the gap measured covers less than it should")
	}
	end := time.Now()
	seen := lc.tap.snapshot()
	gap := longestGap(seen, killedAt.Add(-100*time.Millisecond), end)
	after := statusAfter(t, p, end)
	sbs := mustStatus(t, sb)
	if len(broken) > 0 || after.Node["LeaseLost"] != before.Node["LeaseLost"] || after.Node["StepDowns"] != 0 {
		t.Errorf("node %d lost its lease with etcd member %d down: %v; LeaseLost %d -> %d, StepDowns %d",
			p.id, leader, broken, before.Node["LeaseLost"], after.Node["LeaseLost"], after.Node["StepDowns"])
	}
	if sbs.Role != "standby" || sbs.Node["Promotions"] != 0 || len(fw.seen()) != 0 {
		t.Errorf("a failover happened with one etcd member down: standby %d is %s (Promotions %d), client switches %v",
			sb.id, sbs.Role, sbs.Node["Promotions"], fw.seen())
	}
	// The gap is measured, not asserted (a wall-clock bound flakes on a
	// loaded machine: 593 ms once under CI's load against a 500 ms bound);
	// what must hold is checked above at every status sample: the lease
	// held at the same epoch, no step-down, no failover, releases going on.
	if after.Released <= before.Released {
		t.Errorf("node %d released nothing with one etcd member down (released %d -> %d)", p.id, before.Released, after.Released)
	}

	lc.finish(t, 60*time.Second)
	final := c.fc.waitConverged(20 * time.Second)
	if final != p {
		t.Errorf("node %d leads at the end; node %d should have kept the lease", final.id, p.id)
	}
	c.stopAll(final)
	requireClean(t, c.fc.verify(final, lc, md))
	t.Logf("etcd leader (member %d) killed under load (lease %v, renew %v, margin %v; etcd election %d ms): "+
		"longest gap between outputs at the client over the %v after the kill %s (target: under one renew interval, %v); smallest lease headroom the primary reported %v "+
		"(status every 100 ms); epoch %d kept; released %d -> %d; primary's WitnessSilent %d; wall %v",
		leader, c.lease.lease, c.lease.renew, c.lease.margin, etcdElectionMs, observe, ms(gap), c.lease.renew, minRemaining.Round(time.Millisecond),
		last.Epoch, before.Released, after.Released, after.Node["WitnessSilent"], time.Since(begin).Round(time.Millisecond))
}

// TestEtcdQuorumLost kills two of the three etcd members (both followers,
// leaving etcd's leader alone without a quorum) under load. Nobody may
// lead without etcd: the primary stops releasing when its lease view ends
// (no output above its release watermark at the halt reaches the client,
// and the watermark stays; when the last output arrived is logged beside
// lease + margin), and no node becomes primary at a higher epoch. When
// one member comes back, a node is granted the lease again (the same
// node at the same epoch if its etcd lease survived, otherwise a new
// epoch), releases resume, and nothing answered is lost.
func TestEtcdQuorumLost(t *testing.T) {
	requireClean(t, etcdQuorumLost(t, etcdOptions{lease: etcdRecommendedLease}))
}

func etcdQuorumLost(t *testing.T, o etcdOptions) *findings {
	begin := time.Now()
	c := newEtcdCluster(t, o)
	p, pst := c.startAll()
	sb := c.fc.other(p)
	lc, md := c.dialClient(p)
	fw := c.follow(lc, p, pst.Epoch)
	lc.startEtcdLoad(5 * etcdRate)
	lc.waitAnswered(t, etcdWarmup, 30*time.Second)
	leader := c.etcd.LeaderIndex()
	var killed []int
	for i := range 3 {
		if i != leader {
			killed = append(killed, i)
		}
	}
	c.etcd.Kill(killed[0])
	c.etcd.Kill(killed[1])
	killedAt := time.Now()
	f := &findings{}

	// The halt: bounded by the lease view (lease - margin after the last
	// renewal sent, which is before the kill). This only waits for the
	// node to say it halted, in its status or its log, both files on a
	// disk that can stall for seconds on a loaded VM (a status file once
	// lagged over a second); the halt is judged by seqs and counters
	// below.
	haltBound := c.lease.lease + c.lease.margin
	var halted status
	waitFor(t, haltBound+10*time.Second, "the primary to lose its lease", func() bool {
		s, ok := readStatus(p.dir)
		if ok && !s.Lease.Held {
			halted = s
			return true
		}
		_, logged := findLogAfter(p.p.log(), "lease not held", killedAt)
		return logged
	})
	lost, _ := findLogAfter(p.p.log(), "lease not held", killedAt)
	haltedStatus := "status: not yet written when the log said so"
	if halted.Role != "" {
		haltedStatus = fmt.Sprintf("status: remaining %v", time.Duration(halted.Lease.RemainingNs))
	}
	// Nobody leads while etcd has no quorum: watch both nodes for one more
	// renew interval plus a second, with releases stopped.
	s1 := statusAfter(t, p, time.Now())
	watchUntil := time.Now().Add(c.lease.renew + time.Second)
	for time.Now().Before(watchUntil) {
		time.Sleep(etcdFollowEvery)
		for _, m := range c.fc.nodes {
			s, ok := readStatus(m.dir)
			// Only a file written after the lapse was logged says
			// anything of the time after it: one written before is
			// the agent's last copy from before (every 100 ms).
			written, err := time.Parse(time.RFC3339Nano, s.WrittenAt)
			if ok && err == nil && written.After(lost.at) && s.Role == "primary" && s.Lease.Held {
				f.add(checkDeposedSilent, "node %d leads (epoch %d) %s after etcd lost its quorum", m.id, s.Epoch, rel(time.Now(), killedAt))
			}
		}
	}
	s2 := statusAfter(t, p, time.Now())
	if !lc.running() {
		t.Fatalf("the load ended while etcd had no quorum")
	}
	// When the last output reached the client is logged, not judged:
	// even the kernel's receive stamp (cluster.Tap) is taken at the last
	// veth hop, after the softirqs of the hops before it, and under
	// CI-like load an output the node released before its halt (seq 7092
	// of 7096 released) was stamped 890 ms after the node logged the
	// lapse. What judges the halt is by seqs and counters: nothing above
	// the watermark at the halt reaches the client, and the watermark and
	// OutputsReleased do not move while etcd has no quorum. The lease
	// view itself (lease - margin from the renewal's send) is the
	// simulator's to check, on its own clock, with MutLeaseFromReply.
	seen := lc.tap.snapshot()
	lastOut := lastBefore(seen, time.Now())
	if n, first := releasedAbove(seen, p.id, pst.Epoch, s1.Released); n > 0 {
		f.add(checkDeposedSilent, "the client got %d outputs from node %d above its release watermark %d at the halt (first seq %d at %s)",
			n, p.id, s1.Released, first.seq, rel(first.at, killedAt))
	}
	if s2.Node["OutputsReleased"] != s1.Node["OutputsReleased"] || s2.Released != s1.Released {
		f.add(checkDeposedSilent, "node %d released without etcd: OutputsReleased %d -> %d, released %d -> %d",
			p.id, s1.Node["OutputsReleased"], s2.Node["OutputsReleased"], s1.Released, s2.Released)
	}
	if o := mustStatus(t, sb); o.Role != "standby" || o.Node["Promotions"] != 0 {
		t.Errorf("node %d became %s (Promotions %d) without an etcd quorum", sb.id, o.Role, o.Node["Promotions"])
	}

	restartAt := time.Now()
	answeredAtRestart := lc.answered()
	c.etcd.StartMember(killed[0])
	nw, nst := c.fc.waitLeader(4*c.lease.lease+5*time.Second, 0, pst.Epoch)
	ledAt := time.Now()
	lc.waitAnswered(t, answeredAtRestart+1, 10*time.Second)
	lc.finish(t, 60*time.Second)
	final := c.fc.waitConverged(20 * time.Second)
	if final != nw {
		t.Errorf("node %d leads at the end; node %d led after the restart", final.id, nw.id)
	}
	c.stopAll(final)
	f.merge(c.fc.verify(final, lc, md))

	seen = lc.tap.snapshot()
	resumed, okR := etcdFirstArrivalAfter(seen, restartAt)
	if !okR {
		t.Errorf("no output at the client after etcd member %d restarted", killed[0])
	}
	again, _ := findLogAfter(nw.p.log(), "lease held again", restartAt)
	prom, _ := findLogAfter(nw.p.log(), "PROMOTED", restartAt)
	how := "the same node at the same epoch (its etcd lease outlived the outage)"
	if nw != p || nst.Epoch != pst.Epoch {
		how = fmt.Sprintf("a new term (PROMOTED log %s)", rel(prom.at, restartAt))
	}
	t.Logf("etcd quorum lost (members %v killed, leader %d left alone; lease %v, margin %v), times from the second kill:\n"+
		"  last output at the client                %s  (lease + margin = %v; logged, not judged)\n"+
		"  node %d: lease not held (log)             %s  (%s)\n"+
		"  no leader, released stuck at %d for %v\n"+
		"  etcd member %d restarted                   %s\n"+
		"  node %d leads at epoch %d (status seen)    %s after the restart: %s; 'lease held again' log %s\n"+
		"  first output at the client after restart %s after the restart; client switches %v; wall %v",
		killed, leader, c.lease.lease, c.lease.margin,
		rel(lastOut, killedAt), haltBound,
		p.id, rel(lost.at, killedAt), haltedStatus,
		s1.Released, c.lease.renew+time.Second,
		killed[0], rel(restartAt, killedAt),
		nw.id, nst.Epoch, ms(ledAt.Sub(restartAt)), how, rel(again.at, restartAt),
		rel(resumed, restartAt), fw.seen(), time.Since(begin).Round(time.Millisecond))
	return f
}

// TestEtcdPausedPrimary stops the primary with SIGSTOP for two leases
// under load, the lease coming from etcd: the standby must be granted a
// higher epoch and promote; after SIGCONT the old primary must release
// nothing (no output of its old epoch reaches the client or the market
// after the new primary's first output), step down (standby at the new
// epoch) and converge; every other check must hold. The standby is stopped
// for the 100 ms before the pause so that the primary pauses with outputs
// applied but not yet released, whose acks reach it while it is stopped:
// the case where a primary that trusts its stale lease view releases.
func TestEtcdPausedPrimary(t *testing.T) {
	f, stepped := etcdPausedPrimary(t, etcdOptions{lease: etcdWitnessLikeLease})
	if !stepped {
		t.Errorf("the deposed primary did not step down")
	}
	requireClean(t, f)
}

func etcdPausedPrimary(t *testing.T, o etcdOptions) (*findings, bool) {
	begin := time.Now()
	c := newEtcdCluster(t, o)
	old, ost := c.startAll()
	sb := c.fc.other(old)
	lc, md := c.dialClient(old)
	fw := c.follow(lc, old, ost.Epoch)
	lc.startEtcdLoad(5 * etcdRate)
	lc.waitAnswered(t, etcdWarmup, 30*time.Second)
	// Pause the standby for 100 ms (less than the 1 s in-sync timeout):
	// the primary gates what it applies meanwhile; the standby's acks for
	// it arrive while the primary is stopped. Only a member of the in-sync
	// set may be promoted, so first make sure it is one (a loaded machine
	// can have it removed and re-added during the warmup).
	// The stop lasts until the primary reports commands applied and not
	// released, bounded below the in-sync timeout (holdUntilPending).
	waitInSet(t, old, sb.id, 20*time.Second)
	heldAt := signal(t, sb.p, syscall.SIGSTOP)
	pending := holdUntilPending(old, heldAt, 100*time.Millisecond, 700*time.Millisecond)
	stoppedAt := signal(t, old.p, syscall.SIGSTOP)
	signal(t, sb.p, syscall.SIGCONT)
	nw, nst := c.fc.waitLeader(10*time.Second, old.id, ost.Epoch+1)
	promotedSeen := time.Now()
	time.Sleep(time.Until(stoppedAt.Add(2 * c.lease.lease)))
	contAt := signal(t, old.p, syscall.SIGCONT)

	var st status
	deadline := time.Now().Add(5 * time.Second)
	steppedDown := false
	for time.Now().Before(deadline) && !steppedDown {
		time.Sleep(50 * time.Millisecond)
		s, ok := readStatus(old.dir)
		st = s
		steppedDown = ok && s.Role == "standby" && s.Epoch == nst.Epoch
	}
	lc.finish(t, 60*time.Second)
	f := &findings{}
	if steppedDown {
		final := c.fc.waitConverged(20 * time.Second)
		if final != nw {
			t.Errorf("node %d leads at the end; node %d was promoted", final.id, nw.id)
		}
	} else {
		f.add(checkReplicas, "node %d did not step down within 5 s of SIGCONT: role %s epoch %d, node %d leads at epoch %d",
			old.id, st.Role, st.Epoch, nw.id, nst.Epoch)
	}
	c.stopAll(nw)
	seen, mds := lc.tap.snapshot(), md.snapshot()
	f.merge(c.fc.verify(nw, lc, md))
	n, first := arrivedAfterNewEpoch(seen, old.id, ost.Epoch)
	nmd, firstMD := arrivedAfterNewEpoch(mds, old.id, ost.Epoch)
	if n+nmd > 0 {
		f.add(checkDeposedSilent, "after the new primary's first output, the client got %d outputs (first at %s from SIGCONT, seq %d) and the market %d (first at %s, seq %d) from node %d at epoch %d",
			n, rel(first.at, contAt), first.seq, nmd, rel(firstMD.at, contAt), firstMD.seq, old.id, ost.Epoch)
	}
	finalOld := mustStatus(t, old)
	down, _ := findLogAfter(old.p.log(), "STEPPING DOWN", stoppedAt)
	lostL, _ := findLogAfter(old.p.log(), "lease not held", stoppedAt)
	follow, _ := findLogAfter(old.p.log(), "following a new epoch", stoppedAt)
	t.Logf("etcd pause timeline, from the SIGSTOP of node %d (lease %v, margin %v; etcd election %d ms):\n"+
		"  applied, not released, at the stop      %s\n"+
		"  last output at the client from node %d  %s\n"+
		"  node %d PROMOTED at epoch %d (log)    %s\n"+
		"  test saw the new leader's status       %s; client pointed at it %s %v\n"+
		"  SIGCONT                                %s\n"+
		"  node %d: lease not held (log)           %s\n"+
		"  node %d: STEPPING DOWN (log)            %s\n"+
		"  node %d: following a new epoch (log)    %s (fork_seq %s, applied %s)\n"+
		"  node %d after the run: StepDowns %d LeaseLost %d OutputsDroppedAtGate %d SuffixDiscarded %d DropStaleEpoch %d; outputs from it after the takeover: client %d market %d; wall %v",
		old.id, c.lease.lease, c.lease.margin, etcdElectionMs, pending,
		old.id, rel(lastBefore(seen, stoppedAt.Add(time.Millisecond)), stoppedAt),
		nw.id, nst.Epoch, rel(promLogAt(nw, stoppedAt), stoppedAt),
		rel(promotedSeen, stoppedAt), rel(etcdFirstSwitch(fw), stoppedAt), fw.seen(), rel(contAt, stoppedAt),
		old.id, rel(lostL.at, stoppedAt), old.id, rel(down.at, stoppedAt),
		old.id, rel(follow.at, stoppedAt), follow.fields["fork_seq"], follow.fields["applied"],
		old.id, finalOld.Node["StepDowns"], finalOld.Node["LeaseLost"], finalOld.Node["OutputsDroppedAtGate"], finalOld.Node["SuffixDiscarded"],
		finalOld.Node["DropStaleEpoch"], n, nmd, time.Since(begin).Round(time.Millisecond))
	return f, steppedDown
}
