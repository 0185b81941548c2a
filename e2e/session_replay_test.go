package e2e

import (
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/journal"
)

// sessionHistory replays a stopped node's journal (from seq 1) and returns
// loadSession's outputs in its history, in output-seq order (index
// OutSeq-1).
func sessionHistory(t *testing.T, dir string) []engine.Output {
	t.Helper()
	eng, err := engine.New(engine.NodeConfig())
	if err != nil {
		t.Fatal(err)
	}
	j, _, err := journal.Open(journal.OSFS{}, dir, journal.Options{})
	if err != nil {
		t.Fatalf("open journal %s: %v", dir, err)
	}
	defer j.Close()
	if j.First() != 1 {
		t.Fatalf("journal %s starts at %d", dir, j.First())
	}
	em := &historyEmitter{}
	if err := j.ReadFrom(1, func(_, seq uint64, payload []byte) bool {
		eng.Apply(seq, payload, em)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if em.err != "" {
		t.Fatal(em.err)
	}
	return em.outs
}

type historyEmitter struct {
	outs []engine.Output
	err  string
}

func (e *historyEmitter) Emit(to uint64, payload []byte) {
	if to != loadSession {
		return
	}
	o, err := engine.ParseOutput(payload)
	if err != nil || o.OutSeq == 0 || o.Kind == engine.KindDuplicate {
		return
	}
	if o.OutSeq != uint64(len(e.outs))+1 && e.err == "" {
		e.err = "history: out seq gap"
	}
	e.outs = append(e.outs, o)
}

// TestFailoverSessionReplay: the primary is SIGKILLed under load, with
// outputs in flight (applied by both nodes, not all released); the client
// follows the witness to the new primary and asks it to replay its session
// from the last output it delivered. Every output of the session in the
// final primary's history is delivered to the application exactly once
// and in order: 0 missing, 0 duplicated, 0 out of order. The outputs the
// old primary never released (executions of resting orders among them)
// come from the new primary's history.
func TestFailoverSessionReplay(t *testing.T) { sessionReplayRun(t, 0) }

// TestFailoverSessionReplayLoss is the same with 1 % of the datagrams to
// the client dropped (nftables on the client's host): gaps, lost tails and
// lost REPLAY_ENDs are repaired by replay too.
func TestFailoverSessionReplayLoss(t *testing.T) { sessionReplayRun(t, 100) }

// clientPort is the client's fixed port when loss is injected on it.
const clientPort = 7300

// sessionReplayRun: the scenario, with 1/lossMod of the datagrams to the
// client dropped (0: none).
func sessionReplayRun(t *testing.T, lossMod int) {
	c := newFailoverCluster(t, failoverOptions{})
	if lossMod > 0 {
		c.client.DropRandom(t, clientPort, lossMod)
	}
	c.startAll()
	old, ost := c.waitLeader(10*time.Second, 0, 1)

	// The client, as dialClient makes it, plus the application's view:
	// every output OnOutput delivers, in order.
	var mu sync.Mutex
	var delivered []engine.Output
	lc := &loadClient{done: make(chan struct{})}
	err := c.client.Do(func() error {
		port := uint16(0)
		if lossMod > 0 {
			port = clientPort
		}
		u, err := bus.ListenUnicast(bus.UnicastConfig{Addr: netip.AddrPortFrom(c.client.Addr, port), Tuning: bus.Tuning{RecvBufferBytes: 4 << 20}})
		if err != nil {
			return err
		}
		lc.tap = newTapConn(u)
		lc.cl, err = client.Dial(client.Options{
			Core:    client.Config{Session: loadSession},
			Primary: old.addr(), Idle: bus.Idle{Kind: bus.IdleBlock}, Conn: lc.tap,
			Witness: c.wit.addr(),
			Nodes:   map[uint32]netip.AddrPort{1: c.node(1).addr(), 2: c.node(2).addr()},
			OnOutput: func(o *engine.Output) {
				if o.Kind != engine.KindMarketData && o.OutSeq != 0 {
					mu.Lock()
					delivered = append(delivered, *o)
					mu.Unlock()
				}
			},
		})
		if err != nil {
			u.Close()
		}
		return err
	})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	t.Cleanup(func() { lc.cl.Close() })
	lc.start(failoverRate, failoverCount)
	lc.waitAnswered(t, failoverWarmup, 30*time.Second)
	killProc(t, old.p)
	nw, _ := c.waitLeader(10*time.Second, old.id, ost.Epoch+1)
	lc.finish(t, 60*time.Second)
	// Let the probes and replays settle (a replay is asked for at most
	// every 50 ms, a probe every second): the client's timers run in Poll,
	// which Load called while it ran. Settled is 2.5 s (two probes) with
	// nothing new delivered, within a 30 s bound; a fixed 2.5 s could end
	// while a loaded machine still held the replays back.
	deliveredCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(delivered)
	}
	quietSince, lastCount := time.Now(), deliveredCount()
	for bound := time.Now().Add(30 * time.Second); time.Since(quietSince) < 2500*time.Millisecond && time.Now().Before(bound); time.Sleep(10 * time.Millisecond) {
		lc.cl.Poll()
		if n := deliveredCount(); n != lastCount {
			quietSince, lastCount = time.Now(), n
		}
	}
	startMember(t, old)
	final := c.waitConverged(20 * time.Second)
	if final != nw {
		t.Errorf("node %d leads at the end; node %d was promoted", final.id, nw.id)
	}
	st := lc.cl.SessionStats()
	c.stopAll(final)
	hist := sessionHistory(t, final.dir)

	mu.Lock()
	got := delivered
	mu.Unlock()
	var outOfOrder, dup int
	seen := make(map[uint64]int, len(got))
	var last uint64
	for _, o := range got {
		seen[o.OutSeq]++
		if seen[o.OutSeq] == 2 {
			dup++
		}
		if o.OutSeq != last+1 {
			outOfOrder++
		}
		last = o.OutSeq
		if o.Kind == engine.KindDuplicate {
			o.Kind, o.Original = o.Original, 0
		}
		if o.OutSeq > uint64(len(hist)) || hist[o.OutSeq-1] != o {
			t.Errorf("delivered output %d differs from the final history's", o.OutSeq)
		}
	}
	missing := 0
	for i := range hist {
		if seen[uint64(i+1)] == 0 {
			missing++
		}
	}
	executions := 0
	for _, o := range hist {
		if o.Kind == engine.KindExecution {
			executions++
		}
	}
	t.Logf("session %d: history %d outputs (%d executions), delivered %d: missing %d, duplicated %d, out of order %d; "+
		"gaps %d repeats %d, replay requests %d, replayed %d (executions %d), too old %d skipped %d",
		loadSession, len(hist), executions, len(got), missing, dup, outOfOrder,
		st.Gaps, st.Repeats, st.ReplayRequests, st.ReplayDelivered, st.ReplayExecutions, st.TooOld, st.Skipped)
	if lossMod > 0 {
		dropped := c.client.Dropped(t)
		t.Logf("nft dropped %d datagrams to the client", dropped)
		if dropped == 0 {
			t.Errorf("nftables dropped nothing on the client's host")
		}
	}
	if missing != 0 || dup != 0 || outOfOrder != 0 {
		t.Fatalf("session outputs: %d missing, %d duplicated, %d out of order", missing, dup, outOfOrder)
	}
	if len(hist) < int(failoverCount) {
		t.Fatalf("history holds %d outputs for %d commands", len(hist), failoverCount)
	}
}
