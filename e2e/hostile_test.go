package e2e

import (
	"bytes"
	"crypto/rand"
	bin "encoding/binary"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seqbus/seqbus/auth"
	"github.com/seqbus/seqbus/bus"
	nodestatus "github.com/seqbus/seqbus/status"
	"github.com/seqbus/seqbus/wire"
)

// The hostile-traffic run: a keyed witness and two nodes, a keyed load
// client, and an injector on the client's host that sends every class of
// bad frame at the nodes' unicast ports and the replication group.
const (
	hostileRate  = 3_000
	hostileCount = 21_000
	// hostileWarmup: answers before the injection starts (frames are
	// captured from the group until then).
	hostileWarmup = 3_000
	// hostileCaptureMax bounds the genuine frames kept for replay.
	hostileCaptureMax = 4_000
	// The injection phases: before the kill, after the promotion, and at
	// the old primary once it has rejoined as a standby.
	hostilePhaseA = 2500 * time.Millisecond
	hostilePhaseB = 2000 * time.Millisecond
	hostilePhaseC = 1000 * time.Millisecond
	// hostileBurst datagrams go to one destination per send; the
	// injector sleeps hostilePause between sends (so a few tens of
	// thousands of datagrams a second in all) and stops at
	// hostileSendMax datagrams per phase whatever the time.
	hostileBurst   = 32
	hostilePause   = time.Millisecond
	hostileSendMax = 200_000
	// hostileRSSGrowthMax bounds how much a node's resident set may grow
	// under the flood.
	hostileRSSGrowthMax = 64 << 20
	// hostileStream is the nodes' stream (cmd/seqbus's default).
	hostileStream = 1
	// hostileStranger is a node id no member is configured with.
	hostileStranger = 99
)

// hostileStatus is the part of status.json with the drop counters.
type hostileStatus struct {
	Node      map[string]uint64 `json:"node"`
	Unicast   struct{ Drops nodestatus.SocketDrops }
	Multicast struct{ Drops nodestatus.SocketDrops }
}

func readHostileStatus(t *testing.T, m *member) hostileStatus {
	t.Helper()
	var s hostileStatus
	b, err := os.ReadFile(filepath.Join(m.dir, "status.json"))
	if err != nil {
		t.Fatalf("node %d status: %v", m.id, err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("node %d status: %v", m.id, err)
	}
	return s
}

// add sums s into the totals: node counters by name, and the bus's
// header drops (bus.DropBadHeader) of both sockets as "BusBadHeader".
func (s hostileStatus) add(tot map[string]uint64) {
	for k, v := range s.Node {
		tot[k] += v
	}
	tot["BusBadHeader"] += s.Unicast.Drops.BadHeader + s.Multicast.Drops.BadHeader
}

// vmRSS reads a process's resident set size in bytes.
func vmRSS(t *testing.T, p *proc) uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatalf("%s: %v", p.name, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("%s: VmRSS %q: %v", p.name, v, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("%s: no VmRSS", p.name)
	return 0
}

// startKeyedWitness is fcluster.startWitness with --key and --nodes.
func (c *fcluster) startKeyedWitness(keyPath string) {
	c.t.Helper()
	w := c.wit
	w.runs++
	w.p = startProc(c.t, w.host, fmt.Sprintf("witness-run%d", w.runs), "witness",
		"--listen", w.addr().String(), "--dir", w.dir, "--lease", leaseDuration.String(),
		"--key", keyPath, "--nodes", "1,2")
	waitFor(c.t, 10*time.Second, "the witness to serve", func() bool {
		if w.p.exited() {
			c.t.Fatalf("witness exited at start: %v\n%s", w.p.err, w.p.log())
		}
		return strings.Contains(w.p.log(), "serving")
	})
}

// capture keeps copies of the first hostileCaptureMax frames seen on the
// replication group (genuine DATA, HEARTBEAT, HASH... of epoch 1).
type capture struct {
	conn *bus.UDP
	loop *bus.Loop
	mu   sync.Mutex
	pkts [][]byte
}

func (c *fcluster) captureGroup() *capture {
	c.t.Helper()
	cp := &capture{}
	err := c.client.Do(func() error {
		u, err := bus.ListenMulticast(bus.MulticastReceiverConfig{
			Group:     netip.MustParseAddrPort(groupAddr + ":" + strconv.Itoa(groupPort)),
			Interface: c.client.Iface, Tuning: bus.Tuning{RecvBufferBytes: 4 << 20}})
		cp.conn = u
		return err
	})
	if err != nil {
		c.t.Fatalf("capture: %v", err)
	}
	cp.loop, err = bus.StartLoop(cp.conn, bus.LoopConfig{Idle: bus.Idle{Kind: bus.IdleBlock}},
		func(bufs [][]byte, sizes []int, _ []netip.AddrPort) {
			cp.mu.Lock()
			defer cp.mu.Unlock()
			for i := range sizes {
				if len(cp.pkts) < hostileCaptureMax {
					cp.pkts = append(cp.pkts, bytes.Clone(bufs[i][:sizes[i]]))
				}
			}
		})
	if err != nil {
		cp.conn.Close()
		c.t.Fatal(err)
	}
	c.t.Cleanup(cp.stop)
	return cp
}

func (cp *capture) stop() {
	cp.conn.Close()
	cp.loop.Stop()
}

// frames returns the captured frames of the given types.
func (cp *capture) frames(types ...wire.Type) [][]byte {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	var out [][]byte
	for _, p := range cp.pkts {
		if h, err := wire.ParseHeader(p); err == nil {
			for _, ty := range types {
				if h.Type == ty {
					out = append(out, p)
				}
			}
		}
	}
	return out
}

// forger builds hostile frames. It holds the master key (the test's), so
// it can also sign frames a key holder could: frames from a node id no
// member knows, and frames of an old epoch.
type forger struct {
	t    *testing.T
	ring *auth.Keyring
	rnd  *mrand.Rand
}

func newForger(t *testing.T, key *auth.MasterKey) *forger {
	f := &forger{t: t, ring: auth.NewKeyring(key, hostileStream), rnd: mrand.New(mrand.NewPCG(1, 2))}
	if err := f.ring.Install(1); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *forger) randBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// data is an unsigned DATA frame of epoch 1 from node at seq.
func (f *forger) data(node uint32, seq uint64) []byte {
	b, err := wire.AppendData(nil, wire.TypeData, wire.Origin{Stream: hostileStream, Node: node, Epoch: 1}, seq,
		f.randBytes(16+f.rnd.IntN(200)), f.randBytes(8))
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

func (f *forger) heartbeat(node uint32, epoch, seq uint64) []byte {
	h := wire.Heartbeat{Origin: wire.Origin{Stream: hostileStream, Node: node, Epoch: epoch}, HighestSeq: seq}
	return h.Append(nil)
}

func (f *forger) ack(node uint32, epoch, seq uint64) []byte {
	a := wire.Ack{Origin: wire.Origin{Stream: hostileStream, Node: node, Epoch: epoch}, Seq: seq}
	return a.Append(nil)
}

// badTag seals frame (FlagMAC, good CRC) and appends a random tag.
func (f *forger) badTag(frame []byte) []byte {
	return append(wire.Seal(nil, frame), f.randBytes(wire.TagLen)...)
}

// sign seals frame with the real key of epoch.
func (f *forger) sign(frame []byte, epoch uint64) []byte {
	if !f.ring.Has(epoch) {
		if err := f.ring.Install(epoch); err != nil {
			f.t.Fatal(err)
		}
	}
	b := wire.Seal(nil, frame)
	b, err := f.ring.Sign(b, b, epoch)
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

// classes are the kinds of bad frame before the failover, by name; each
// list holds ready datagrams. known is a configured node id.
func (f *forger) classes(known uint32, captured [][]byte) map[string][][]byte {
	const each = 64
	cl := map[string][][]byte{}
	for i := range each {
		seq := uint64(1 + f.rnd.IntN(1_000_000))
		// Random garbage, some of it starting with the right magic.
		g := f.randBytes(1 + f.rnd.IntN(1400))
		if i%2 == 0 && len(g) >= 4 {
			bin.LittleEndian.PutUint16(g, wire.Magic)
			g[2] = wire.Version
		}
		cl["garbage"] = append(cl["garbage"], g)
		// Truncated: a good signed frame cut short.
		full := f.sign(f.data(known, seq), 1)
		cl["truncated"] = append(cl["truncated"], full[:1+f.rnd.IntN(len(full)-1)])
		// A header whose length says more than the datagram holds.
		lie := bytes.Clone(full)
		bin.LittleEndian.PutUint32(lie[32:], uint32(len(full)+1+f.rnd.IntN(60_000)))
		cl["length-lie-header"] = append(cl["length-lie-header"], lie)
		// A message length prefix that lies, CRC made good.
		d := f.data(known, seq)
		bin.LittleEndian.PutUint16(d[wire.HeaderLen:], 60_000)
		cl["length-lie-message"] = append(cl["length-lie-message"], f.badTag(d))
		// A count that lies, CRC made good.
		d = f.data(known, seq)
		bin.LittleEndian.PutUint16(d[12:], uint16(3+f.rnd.IntN(50)))
		cl["count-lie"] = append(cl["count-lie"], f.badTag(d))
		// A damaged frame: the CRC does not match.
		d = f.sign(f.data(known, seq), 1)
		d[wire.HeaderLen+3] ^= 0x40
		cl["bad-crc"] = append(cl["bad-crc"], d)
		// Valid-looking (good CRC, FlagMAC) with a bad MAC: DATA, ACK.
		cl["bad-mac"] = append(cl["bad-mac"], f.badTag(f.data(known, seq)), f.badTag(f.ack(known, 1, seq)))
		// Unsigned frames.
		cl["unsigned"] = append(cl["unsigned"], f.data(known, seq), f.heartbeat(known, 1, seq), f.ack(known, 1, seq))
		// From a node id no member knows, validly signed (a key holder).
		cl["unknown-node"] = append(cl["unknown-node"], f.sign(f.heartbeat(hostileStranger, 1, seq), 1), f.sign(f.ack(hostileStranger, 1, seq), 1))
		// An epoch no key is held for, with a bad MAC.
		cl["unknown-epoch"] = append(cl["unknown-epoch"], f.badTag(f.heartbeat(known, 1000+uint64(i), seq)))
	}
	cl["replay"] = captured
	return cl
}

// injector sends hostile datagrams from the client's host.
type injector struct {
	t      *testing.T
	uc, mc *bus.UDP
	group  netip.AddrPort
	sent   map[string]uint64
}

func (c *fcluster) newInjector() *injector {
	c.t.Helper()
	in := &injector{t: c.t, group: netip.MustParseAddrPort(groupAddr + ":" + strconv.Itoa(groupPort)), sent: map[string]uint64{}}
	err := c.client.Do(func() error {
		var err error
		if in.uc, err = bus.ListenUnicast(bus.UnicastConfig{Addr: netip.AddrPortFrom(c.client.Addr, 0)}); err != nil {
			return err
		}
		in.mc, err = bus.NewMulticastSender(bus.MulticastSenderConfig{Group: in.group, Interface: c.client.Iface, TTL: 1})
		return err
	})
	if err != nil {
		c.t.Fatalf("injector: %v", err)
	}
	c.t.Cleanup(func() {
		in.uc.Close()
		in.mc.Close()
	})
	return in
}

// run sends the classes round-robin to every destination (the group when
// a destination is the group) for d, at most hostileSendMax datagrams.
func (in *injector) run(d time.Duration, classes map[string][][]byte, dests ...netip.AddrPort) uint64 {
	names := make([]string, 0, len(classes))
	for k, v := range classes {
		if len(v) > 0 {
			names = append(names, k)
		}
	}
	var total uint64
	start := time.Now()
	pos := map[string]int{}
	batch := make([][]byte, 0, hostileBurst)
	for i := 0; time.Since(start) < d && total < hostileSendMax; i++ {
		name := names[i%len(names)]
		dst := dests[(i/len(names))%len(dests)]
		list := classes[name]
		batch = batch[:0]
		for range hostileBurst {
			batch = append(batch, list[pos[name]%len(list)])
			pos[name]++
		}
		conn := in.uc
		if dst == in.group {
			conn = in.mc
		}
		if err := conn.Send(batch, dst); err != nil {
			in.t.Errorf("inject %s to %v: %v", name, dst, err)
			return total
		}
		total += uint64(len(batch))
		in.sent[name] += uint64(len(batch))
		time.Sleep(hostilePause)
	}
	return total
}

// requireNoPanic fails for a process log that shows a panic or a fatal
// runtime error.
func requireNoPanic(t *testing.T, p *proc) {
	t.Helper()
	log := p.log()
	for _, bad := range []string{"panic:", "fatal error:", "goroutine 1 ["} {
		if strings.Contains(log, bad) {
			t.Errorf("%s log shows %q", p.name, bad)
		}
	}
}

// TestHostileTraffic: with authentication on, every class of bad frame a
// hostile host on the LAN can send (garbage, truncated, lying lengths and
// counts, bad CRCs, bad MACs, unsigned, unknown node ids, unknown epochs,
// replays of genuine frames, old-epoch frames after a failover) is sent at
// the primary's and the standby's unicast ports and at the replication
// group while a keyed client runs a load, the primary is killed and the
// standby promotes. Nothing acknowledged may be lost or applied twice, the
// replicas must end identical, the nodes' memory must stay bounded, every
// class must show in a drop counter, and no process may panic.
func TestHostileTraffic(t *testing.T) {
	begin := time.Now()
	keyPath := filepath.Join(t.TempDir(), "seqbus.key")
	key, err := auth.Keygen(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(keyPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi.Mode(), err)
	}
	c := newFailoverCluster(t, failoverOptions{flags: []string{"--key", keyPath}})
	c.startKeyedWitness(keyPath)
	for _, m := range c.nodes {
		startMember(t, m)
	}
	old, ost := c.waitLeader(10*time.Second, 0, 1)
	standby := c.other(old)
	capt := c.captureGroup()
	md := c.observeMarketData()
	lc := c.dialClientWith(old, &key)
	lc.start(hostileRate, hostileCount)
	lc.waitAnswered(t, hostileWarmup, 30*time.Second)
	capt.stop()
	captured := capt.frames(wire.TypeData, wire.TypeHeartbeat, wire.TypeHash)
	capturedData := capt.frames(wire.TypeData)
	if len(capturedData) == 0 {
		t.Fatalf("captured no DATA frame from the group (%d frames)", len(capt.pkts))
	}

	f := newForger(t, &key)
	in := c.newInjector()
	group := in.group
	rss0 := map[uint32]uint64{old.id: vmRSS(t, old.p), standby.id: vmRSS(t, standby.p)}

	// Phase A: everything at both nodes and the group, under load.
	classes := f.classes(old.id, captured)
	nA := in.run(hostilePhaseA, classes, old.addr(), standby.addr(), group)
	for _, m := range c.nodes {
		if m.p.exited() {
			t.Fatalf("node %d exited during the injection: %v", m.id, m.p.err)
		}
	}
	rssA := map[uint32]uint64{old.id: vmRSS(t, old.p), standby.id: vmRSS(t, standby.p)}
	oldStatus := readHostileStatus(t, old)
	if lc.answered() <= hostileWarmup {
		t.Errorf("no answer during the injection: %d answered", lc.answered())
	}

	// The failover: SIGKILL the primary, wait for the standby to lead.
	killProc(t, old.p)
	nw, nst := c.waitLeader(15*time.Second, old.id, ost.Epoch+1)
	if nw != standby {
		t.Fatalf("node %d leads after the kill; want %d", nw.id, standby.id)
	}

	// Phase B: the old epoch's captured frames replayed, old-epoch frames
	// validly signed (a stale ACK from the dead primary's id), and the
	// garbage classes again, at the new primary and the group.
	classesB := map[string][][]byte{"replay-old-epoch": captured}
	for i := range 64 {
		classesB["stale-epoch"] = append(classesB["stale-epoch"],
			f.sign(f.ack(old.id, ost.Epoch, uint64(1+i)), ost.Epoch),
			f.sign(f.heartbeat(old.id, ost.Epoch, uint64(1+i)), ost.Epoch))
	}
	for _, k := range []string{"garbage", "bad-mac", "unsigned", "unknown-epoch"} {
		classesB[k] = classes[k]
	}
	nB := in.run(hostilePhaseB, classesB, nw.addr(), group)
	rssB := vmRSS(t, nw.p)
	lc.finish(t, 60*time.Second)

	// The old primary rejoins as a standby on its disk; phase C sends it
	// the old epoch's frames while it catches up.
	oldFirst := old.p
	startMember(t, old)
	nC := in.run(hostilePhaseC, map[string][][]byte{"replay-old-epoch": captured, "stale-epoch": classesB["stale-epoch"]}, old.addr(), group)
	final := c.waitConverged(20 * time.Second)
	if final != nw {
		t.Errorf("node %d leads at the end; node %d was promoted", final.id, nw.id)
	}
	if c.wit.p.exited() {
		t.Errorf("the witness exited: %v", c.wit.p.err)
	}
	c.stopAll(final)
	requireClean(t, c.verify(final, lc, md))

	// Drops by reason, over every run: the old primary's last status
	// before the kill, and both final statuses.
	tot := map[string]uint64{}
	oldStatus.add(tot)
	readHostileStatus(t, nw).add(tot)
	readHostileStatus(t, old).add(tot)
	t.Logf("injected: phase A %d, B %d, C %d datagrams; by class %v; captured %d frames (%d DATA)", nA, nB, nC, in.sent, len(captured), len(capturedData))
	drops := map[string]uint64{}
	for k, v := range tot {
		if v != 0 && (strings.HasPrefix(k, "Drop") || k == "BusBadHeader") {
			drops[k] = v
		}
	}
	t.Logf("drops by reason, all runs: %v", drops)
	for class, counter := range map[string]string{
		"garbage, truncated, header length lies": "BusBadHeader",
		"message length lies":                    "DropShort",
		"count lies":                             "DropMalformed",
		"bad CRC":                                "DropChecksum",
		"bad MAC":                                "DropBadMAC",
		"unsigned":                               "DropNoMAC",
		"unknown epoch":                          "DropUnknownKey",
		"unknown node":                           "DropUnknownNode",
		"replayed DATA":                          "DropReplay",
		"old epoch after the failover":           "DropStaleEpoch",
	} {
		if tot[counter] == 0 {
			t.Errorf("%s: no drop counted in %s", class, counter)
		}
	}

	// Memory: the flood must not grow a node's resident set.
	for id, before := range rss0 {
		t.Logf("node %d RSS: %d MB before the flood, %d MB after phase A", id, before>>20, rssA[id]>>20)
		if rssA[id] > before+hostileRSSGrowthMax {
			t.Errorf("node %d RSS grew from %d MB to %d MB under the flood", id, before>>20, rssA[id]>>20)
		}
	}
	t.Logf("node %d RSS after phase B (as primary): %d MB", nw.id, rssB>>20)
	if rssB > rss0[nw.id]+hostileRSSGrowthMax {
		t.Errorf("node %d RSS grew from %d MB to %d MB by the end of phase B", nw.id, rss0[nw.id]>>20, rssB>>20)
	}
	for _, p := range []*proc{c.wit.p, nw.p, oldFirst, old.p} {
		requireNoPanic(t, p)
	}
	t.Logf("epochs: %d then %d; wall %v", ost.Epoch, nst.Epoch, time.Since(begin).Round(time.Millisecond))
}
