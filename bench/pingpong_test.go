package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"testing"
	"time"

	"github.com/seqbus/seqbus/bus"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// RunFloor's tests exec this test binary as the hop processes.
	if len(os.Args) > 1 && os.Args[1] == "bench-echo" {
		if err := EchoMain(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "bench-echo:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// TestPingPong: every recorded ping is sent and comes back, for each hop
// count and a blocking and a spinning receiver; the histogram holds
// exactly the received ones. No assertion on speed.
func TestPingPong(t *testing.T) {
	cases := []struct {
		name string
		cfg  PingPongConfig
	}{
		{"2hop-block", PingPongConfig{Hops: 2, Count: 300, Warmup: 20, Idle: bus.Idle{Kind: bus.IdleBlock}}},
		{"4hop-block", PingPongConfig{Hops: 4, Count: 300, Warmup: 20, Idle: bus.Idle{Kind: bus.IdleBlock}}},
		{"2hop-backoff", PingPongConfig{Hops: 2, Count: 300, Idle: bus.Idle{Kind: bus.IdleBackoff, Spins: 20, Yields: 5}}},
		// SO_BUSY_POLL: lo has no NAPI queue, so it changes nothing here,
		// but the option must pass through (Report says what was granted).
		{"2hop-busypoll", PingPongConfig{Hops: 2, Count: 100, Tuning: bus.Tuning{BusyPollUs: 50}, Idle: bus.Idle{Kind: bus.IdleBlock}}},
		{"2hop-rate", PingPongConfig{Hops: 2, Count: 200, RatePerSecond: 20_000, MessageBytes: 200, Idle: bus.Idle{Kind: bus.IdleBlock}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			res, err := PingPong(ctx, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.Sent != tc.cfg.Count || res.Received != res.Sent || res.Lost != 0 {
				t.Fatalf("sent %d received %d lost %d, want %d", res.Sent, res.Received, res.Lost, tc.cfg.Count)
			}
			if res.Histogram.TotalCount() != int64(res.Received) {
				t.Fatalf("histogram has %d values for %d replies", res.Histogram.TotalCount(), res.Received)
			}
			if res.Histogram.Min() <= 0 || res.Elapsed <= 0 || res.Report.Local.Addr().String() != "127.0.0.1" {
				t.Fatalf("min %d elapsed %v local %v", res.Histogram.Min(), res.Elapsed, res.Report.Local)
			}
			s := res.Summary(tc.name, tc.cfg)
			if s.Count != int64(tc.cfg.Count) || s.PercentilesUs["p50"] <= 0 || s.PercentilesUs["max"] < s.PercentilesUs["p99"] || s.Config["hops"] == "" {
				t.Fatalf("summary %+v", s)
			}
		})
	}
}

// TestPingPongRateSchedule: at a fixed rate the run cannot be shorter than
// its schedule (count-1 intervals), which shows sends wait for their
// intended times. A lower bound only: no assertion on speed.
func TestPingPongRateSchedule(t *testing.T) {
	cfg := PingPongConfig{Count: 50, RatePerSecond: 1000, Idle: bus.Idle{Kind: bus.IdleBlock}}
	res, err := PingPong(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if min := 49 * time.Millisecond; res.Elapsed < min {
		t.Fatalf("50 pings at 1000/s took %v, less than the schedule's %v", res.Elapsed, min)
	}
}

// TestCoordinatedOmission: a late send is charged from its intended time.
// The client's clock is moved so the ping is 10 ms behind schedule: its
// latency must include those 10 ms.
func TestCoordinatedOmission(t *testing.T) {
	cfg, _ := PingPongConfig{Count: 1, RatePerSecond: 100, Idle: bus.Idle{Kind: bus.IdleBlock}}.withDefaults()
	net, err := startHops(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer net.close()
	c := newPingClient(cfg, net.client, net.first, false)
	c.scheduleStartNs = c.nowNs() - int64(10*time.Millisecond) // ping 0 was due 10 ms ago
	latencyNs, late, err := c.roundTrip(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if !late || latencyNs < int64(10*time.Millisecond) {
		t.Fatalf("late %v latency %v: the schedule's delay was not charged", late, time.Duration(latencyNs))
	}
	// Back to back, the same client charges from the actual send.
	c.intervalNs = 0
	if _, late, err = c.roundTrip(context.Background(), 1); err != nil || late {
		t.Fatalf("back to back: late %v, %v", late, err)
	}
}

// TestPingPongLost: a ping whose reply is dropped counts as lost after
// ReplyTimeout and the run goes on; a stale reply is not taken for a new
// ping.
func TestPingPongLost(t *testing.T) {
	cfg, _ := PingPongConfig{Count: 1, ReplyTimeout: 20 * time.Millisecond, Idle: bus.Idle{Kind: bus.IdleBlock, Park: 5 * time.Millisecond}}.withDefaults()
	net, err := startHops(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer net.close()
	// A silent peer: nothing answers.
	silent, err := bus.ListenUnicast(bus.UnicastConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	c := newPingClient(cfg, net.client, silent.LocalAddr(), false)
	if _, _, err := c.roundTrip(context.Background(), 7); err != errNoReply {
		t.Fatalf("no reply: %v", err)
	}
	// A stale reply (seq 7) waits in the client's socket; ping 8 goes to
	// the echo and must match its own reply, not the stale one.
	stale := [][]byte{make([]byte, cfg.MessageBytes)}
	stale[0][0] = 7
	if err := silent.Send(stale, net.client.LocalAddr()); err != nil {
		t.Fatal(err)
	}
	c.to = net.first
	if _, _, err := c.roundTrip(context.Background(), 8); err != nil {
		t.Fatalf("after a stale reply: %v", err)
	}
	// Had the stale reply been taken for ping 8, ping 8's own reply would
	// still be on its way: nothing may be left to read.
	if n, err := net.client.Receive(c.bufs, c.sizes, c.from, 100*time.Millisecond); n != 0 || err != nil {
		t.Fatalf("a reply was left unread (%d, %v): the stale one was taken for ping 8", n, err)
	}
}

func TestPingPongCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := PingPong(ctx, PingPongConfig{Count: 10})
	if !errors.Is(err, context.Canceled) || res == nil || res.Sent != 0 {
		t.Fatalf("cancelled run: %v %+v", err, res)
	}
}

// TestPingPongIntervalLog: the run's interval log slices back to the
// whole run.
func TestPingPongIntervalLog(t *testing.T) {
	var log bytes.Buffer
	cfg := PingPongConfig{Count: 200, RatePerSecond: 2000, Idle: bus.Idle{Kind: bus.IdleBlock}, IntervalLog: &log, IntervalLogInterval: 40 * time.Millisecond}
	res, err := PingPong(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	h, intervals, dropped, err := SliceIntervalLog(&log, 0, math.Inf(1))
	if err != nil {
		t.Fatal(err)
	}
	if intervals < 2 || dropped != 0 || h.TotalCount() != res.Histogram.TotalCount() || h.Max() != res.Histogram.Max() {
		t.Fatalf("%d intervals, %d values (run %d), max %d (run %d)", intervals, h.TotalCount(), res.Histogram.TotalCount(), h.Max(), res.Histogram.Max())
	}
}

func TestPingPongConfigRejects(t *testing.T) {
	cases := map[string]PingPongConfig{
		"no count":         {},
		"negative count":   {Count: -1},
		"too many":         {Count: PingPongCountMax, Warmup: 1},
		"count overflows":  {Count: math.MaxInt, Warmup: 1000},
		"warmup overflows": {Count: 1, Warmup: math.MaxInt},
		"tiny message":     {Count: 1, MessageBytes: MessageBytesMin - 1},
		"huge message":     {Count: 1, MessageBytes: MessageBytesMax + 1},
		"three hops":       {Count: 1, Hops: 3},
		"negative rate":    {Count: 1, RatePerSecond: -1},
		"NaN rate":         {Count: 1, RatePerSecond: math.NaN()},
		"rate too high":    {Count: 1, RatePerSecond: RatePerSecondMax + 1},
		"negative wait":    {Count: 1, ReplyTimeout: -1},
	}
	for name, cfg := range cases {
		if _, err := PingPong(context.Background(), cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestRoundTripAllocs: the client's round trip allocates nothing, so the
// floor is not the garbage collector's.
func TestRoundTripAllocs(t *testing.T) {
	cfg, _ := PingPongConfig{Count: 1, Idle: bus.Idle{Kind: bus.IdleBlock}}.withDefaults()
	net, err := startHops(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer net.close()
	c := newPingClient(cfg, net.client, net.first, false)
	h := newLatencyHistogram()
	ctx := context.Background()
	seq := uint64(0)
	allocs := testing.AllocsPerRun(200, func() {
		seq++
		latencyNs, _, err := c.roundTrip(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		recordClamped(h, latencyNs)
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per round trip", allocs)
	}
}

// TestFourHopTopology: in a 4-hop run every ping crosses A twice and B
// once each way: A receives 2 per round trip (from the client and from
// B), B receives 1, and the client 1.
func TestFourHopTopology(t *testing.T) {
	cfg, _ := PingPongConfig{Count: 1, Hops: 4, Idle: bus.Idle{Kind: bus.IdleBlock}}.withDefaults()
	net, err := startHops(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer net.close()
	if len(net.sockets) != 3 {
		t.Fatalf("%d sockets, want client, A, B", len(net.sockets))
	}
	c := newPingClient(cfg, net.client, net.first, false)
	const trips = 20
	for seq := uint64(0); seq < trips; seq++ {
		if _, _, err := c.roundTrip(context.Background(), seq); err != nil {
			t.Fatal(err)
		}
	}
	a, b := net.sockets[1].Counters(), net.sockets[2].Counters()
	if net.client.Counters().DatagramsReceived != trips || a.DatagramsReceived != 2*trips || b.DatagramsReceived != trips {
		t.Fatalf("received: client %d, A %d, B %d; want %d, %d, %d",
			net.client.Counters().DatagramsReceived, a.DatagramsReceived, b.DatagramsReceived, trips, 2*trips, trips)
	}
}

// TestBackoffClientNotLocked: the in-process floor's client locks its
// thread only for the strategies that yield with sched_yield. Locked with
// back-off (Gosched, then a netpoller park) every poll was a thread
// hand-off and the 4-hop floor at 10k/s fell behind its schedule (p50
// 443–704 ms). Fails on the old rule (lock for every kind but block).
func TestBackoffClientNotLocked(t *testing.T) {
	for kind, want := range map[bus.IdleKind]bool{bus.IdleBlock: false, bus.IdleBackoff: false, bus.IdleBusySpin: true, bus.IdleYield: true} {
		if got := lockClientThread(bus.Idle{Kind: kind}); got != want {
			t.Errorf("%v: lock %v, want %v", kind, got, want)
		}
	}
}
