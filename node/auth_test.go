package node

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/auth"
	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/nodeconfig"
	"github.com/seqbus/seqbus/wire"
	"github.com/seqbus/seqbus/witness"
)

// TestAuthenticatedReplication: with a key on both nodes and the client,
// commands are replicated, gated and answered; frames injected without a
// MAC, with a bad MAC, from an unknown node, or a captured DATA frame
// replayed, change nothing and are counted by reason.
func TestAuthenticatedReplication(t *testing.T) {
	defer goleak.VerifyNone(t)
	key, err := auth.GenerateMasterKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, 2)
	defer c.closeAll()
	withKey := func(cfg *nodeconfig.Config) { cfg.Key = &key }
	p := c.start(1, withKey)
	s := c.start(2, withKey)

	// A raw socket captures what the primary multicasts, to replay it.
	cap, err := bus.ListenMulticast(bus.MulticastReceiverConfig{Group: c.group, Interface: "lo"})
	if err != nil {
		t.Fatal(err)
	}
	defer cap.Close()

	cl, err := client.Dial(client.Options{Core: client.Config{Session: 3}, Primary: c.addrs[1], Idle: testIdle, Key: &key, Stream: 9})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := cl.Load(ctx, client.LoadConfig{Rate: 5000, Count: 2000, Seed: 1}, nil)
	if err != nil || rep.Stats.Answered != 2000 {
		t.Fatalf("load: %v, answered %d", err, rep.Stats.Answered)
	}
	bufs := [][]byte{make([]byte, wire.MaxFrameLen)}
	sizes, from := make([]int, 1), make([]netip.AddrPort, 1)
	var captured []byte
	for captured == nil {
		n, err := cap.Receive(bufs, sizes, from, time.Second)
		if err != nil || n == 0 {
			t.Fatalf("capture: %v", err)
		}
		if f, _, err := wire.Parse(bufs[0][:sizes[0]]); err == nil && f.Type == wire.TypeData {
			captured = append([]byte(nil), bufs[0][:sizes[0]]...)
		}
	}
	c.waitConverged(10 * time.Second)
	before := s.Status()

	inj, err := bus.ListenUnicast(bus.UnicastConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer inj.Close()
	send := func(pkt []byte) {
		if err := inj.Send([][]byte{pkt}, c.addrs[2]); err != nil {
			t.Fatal(err)
		}
	}
	// Unsigned DATA claiming to be the primary, at a seq just ahead.
	b := wire.NewBatch(0)
	b.Reset(wire.TypeData, wire.Origin{Stream: 9, Node: 1, Epoch: 1}, before.Applied+1)
	b.Add([]byte("forged command payload"))
	unsigned := append([]byte(nil), b.Bytes()...)
	send(unsigned)
	// The same sealed with a made-up tag.
	forged := append(wire.Seal(nil, unsigned), make([]byte, wire.TagLen)...)
	send(forged)
	// Sealed correctly but from a node id outside the cluster.
	ring := auth.NewKeyring(&key, 9)
	if err := ring.Install(1); err != nil {
		t.Fatal(err)
	}
	b.Reset(wire.TypeData, wire.Origin{Stream: 9, Node: 77, Epoch: 1}, before.Applied+1)
	b.Add([]byte("stranger"))
	stranger := wire.Seal(nil, b.Bytes())
	stranger, _ = ring.Sign(stranger, stranger, 1)
	send(stranger)
	// A captured genuine frame, replayed.
	send(captured)

	deadline := time.Now().Add(5 * time.Second)
	for {
		st := s.Status()
		n := st.Node
		if n.DropNoMAC >= 1 && n.DropBadMAC >= 1 && n.DropUnknownNode >= 1 && n.DropReplay >= 1 {
			if st.Applied != before.Applied || st.StateHash != before.StateHash {
				t.Fatalf("injected frames changed the standby: applied %d -> %d", before.Applied, st.Applied)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("drops: no-mac %d bad-mac %d unknown-node %d replay %d", n.DropNoMAC, n.DropBadMAC, n.DropUnknownNode, n.DropReplay)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if p.Status().Node.DropBadMAC != 0 || s.Status().Node.DropUnknownKey != 0 {
		t.Fatalf("genuine frames were refused: primary bad-mac %d standby unknown-key %d", p.Status().Node.DropBadMAC, s.Status().Node.DropUnknownKey)
	}
}

// TestAuthenticatedLease: with keys, the witness grants the lease to a
// node holding its pairwise key, and a node with another key file is
// never granted anything (its requests fail the MAC at the witness).
func TestAuthenticatedLease(t *testing.T) {
	defer goleak.VerifyNone(t)
	key, err := auth.GenerateMasterKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := auth.GenerateMasterKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	lease := arbiter.DefaultConfig()
	w, waddr := startWitnessWith(t, lease, func(cfg *witness.Config) { cfg.Key, cfg.Nodes, cfg.Stream = &key, []uint32{1, 2}, 9 })
	defer w.Close()
	c := newCluster(t, 2)
	defer c.closeAll()
	// Node 2 alone first, with the wrong key: nothing is granted.
	c.start(2, func(cfg *nodeconfig.Config) { cfg.Witness, cfg.Lease, cfg.Key = waddr, lease, &other })
	// Wait (bounded) until the witness has refused its requests: a fixed
	// 300 ms could pass on a loaded machine before node 2 sent any.
	deadline := time.Now().Add(10 * time.Second)
	for w.Stats().Drops[witness.DropBadMAC] < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("the witness counted %d bad MACs from the wrong-key node in 10 s", w.Stats().Drops[witness.DropBadMAC])
		}
		time.Sleep(5 * time.Millisecond)
	}
	if c.nodes[2].Role() == nodeconfig.RolePrimary {
		t.Fatal("a node with the wrong key became primary")
	}
	c.start(1, func(cfg *nodeconfig.Config) { cfg.Witness, cfg.Lease, cfg.Key = waddr, lease, &key })
	if p := c.waitPrimary(5*time.Second, 0); p != 1 {
		t.Fatalf("primary %d, want node 1 (the one with the key)", p)
	}
}

// TestRefetchOfOlderEpochs: after a failover to epoch 2, a node with an
// empty journal joins. The new primary resends the history under the
// epoch each record was sequenced in, so the joiner takes RETRANSMIT
// frames of epoch 1 although it already accepted epoch 2 (the fence
// judges them by NEW_EPOCH's history), and with a key it derives epoch
// 1's key for them. Otherwise it drops them (stale epoch, unknown key)
// and never catches up.
func TestRefetchOfOlderEpochs(t *testing.T) {
	for _, keyed := range []bool{false, true} {
		t.Run(fmt.Sprintf("keyed=%v", keyed), func(t *testing.T) { testRefetchOfOlderEpochs(t, keyed) })
	}
}

func testRefetchOfOlderEpochs(t *testing.T, keyed bool) {
	defer goleak.VerifyNone(t)
	var key *auth.MasterKey
	if keyed {
		key = newTestKey(t)
	}
	lease := arbiter.DefaultConfig()
	w, waddr := startWitnessWith(t, lease, func(cfg *witness.Config) { cfg.Key, cfg.Nodes, cfg.Stream = key, []uint32{1, 2, 3}, 9 })
	defer w.Close()
	c := newCluster(t, 3)
	defer c.closeAll()
	withKey := func(cfg *nodeconfig.Config) { cfg.Key, cfg.Witness, cfg.Lease = key, waddr, lease }
	c.start(1, withKey)
	c.start(2, withKey)
	first := c.waitPrimary(5*time.Second, 0)
	cl, err := client.Dial(client.Options{Core: client.Config{Session: 3}, Primary: c.addrs[first], Idle: testIdle, Key: key, Stream: 9})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := cl.Load(ctx, client.LoadConfig{Rate: 5000, Count: 500, Seed: 1}, nil)
	cl.Close()
	if err != nil || rep.Stats.Answered != 500 {
		t.Fatalf("load: %v, answered %d", err, rep.Stats.Answered)
	}
	c.waitConverged2(first, 10*time.Second)
	// Only a member of the in-sync set the witness confirmed may take
	// over: wait for the standby's confirmation (a slow run can stop the
	// primary before its proposal was granted, and then, rightly, nobody
	// leads).
	other := arbiter.NodeID(3 - first)
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Contains(c.nodes[first].Status().InSync.Members, other) {
		if time.Now().After(deadline) {
			t.Fatalf("node %d never confirmed in sync: %v", other, c.nodes[first].Status().InSync.Members)
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.stop(first)
	second := c.waitPrimary(10*time.Second, first)
	if e := c.nodes[second].Status().Epoch; e < 2 {
		t.Fatalf("new primary at epoch %d", e)
	}

	joiner := c.start(3, withKey) // an empty journal
	c.waitConverged2(second, 15*time.Second)
	st := joiner.Status()
	if st.Applied < 500 || st.Node.DropBadMAC != 0 || st.Node.RetransmitsReceived == 0 {
		t.Fatalf("joiner applied %d, retransmits %d, bad-mac drops %d", st.Applied, st.Node.RetransmitsReceived, st.Node.DropBadMAC)
	}
}

// TestAuthenticatedStandbyRestart: a keyed standby restarted while the
// same epoch leads (its journal already holds that epoch, so the fence's
// highest is the primary's epoch) derives the epoch's key again, which
// the restart lost with the process, and catches up. Otherwise it drops
// every frame of its own epoch as unknown-key and never acks again.
func TestAuthenticatedStandbyRestart(t *testing.T) {
	defer goleak.VerifyNone(t)
	key := newTestKey(t)
	c := newCluster(t, 2)
	defer c.closeAll()
	withKey := func(cfg *nodeconfig.Config) { cfg.Key = key }
	c.start(1, withKey)
	c.start(2, withKey)
	// One client per load: its session's answers are counted alone.
	load := func(session uint64) {
		t.Helper()
		cl, err := client.Dial(client.Options{Core: client.Config{Session: session}, Primary: c.addrs[1], Idle: testIdle, Key: key, Stream: 9})
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		rep, err := cl.Load(ctx, client.LoadConfig{Rate: 5000, Count: 300, Seed: session}, nil)
		if err != nil || rep.Stats.Answered != 300 {
			t.Fatalf("load: %v, answered %d", err, rep.Stats.Answered)
		}
	}
	load(1)
	c.waitConverged(10 * time.Second)
	c.stop(2)
	c.start(2, withKey) // the same journal: epoch 1 already accepted
	load(2)             // released only once the restarted standby acks
	c.waitConverged(10 * time.Second)
	if st := c.nodes[2].Status(); st.Applied < 600 {
		t.Fatalf("restarted standby applied %d of 600", st.Applied)
	}
}

// newTestKey is a fresh random master key.
func newTestKey(t testing.TB) *auth.MasterKey {
	t.Helper()
	k, err := auth.GenerateMasterKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &k
}
