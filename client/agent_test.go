package client

import (
	"context"
	"errors"
	"math"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/seqbus/seqbus/bus"
)

// TestLoadPollParksOnSocket: a poll-mode Load with Park parks on its socket between
// sends instead of polling it, so it reads the socket about once per
// answer: the receive calls (counted by the socket: batches that read
// something plus the polls that found it empty) stay within a small
// margin of the answers, and few are empty. Before the parked
// waits the generator polled the socket on every spin and yield pass (20+
// empty receives per command at this rate). Counted by the bus, not by
// the wall clock.
func TestLoadPollParksOnSocket(t *testing.T) {
	cl, u, ctx := pollClientOnFake(t)
	const count = 2_000
	rep, err := cl.Load(ctx, LoadConfig{Rate: 5_000, Count: count, Seed: 1, Drain: 5 * time.Second, Park: true}, nil)
	if err != nil {
		t.Fatalf("%v: %+v", err, rep)
	}
	if rep.Answered != count {
		t.Fatalf("answered %d of %d", rep.Answered, count)
	}
	c := u.Counters()
	var reads uint64
	for _, b := range c.ReceiveBatches {
		reads += b
	}
	calls := reads + c.EmptyReceives
	t.Logf("%d answers: %d receive calls (%d empty)", count, calls, c.EmptyReceives)
	if c.EmptyReceives > count/4 { // a generator behind its schedule reads after each send
		t.Fatalf("%d empty receives for %d answers, want at most %d", c.EmptyReceives, count, count/4)
	}
	if calls > count+count/2 {
		t.Fatalf("%d receive calls for %d answers, want at most %d", calls, count, count+count/2)
	}
	if cl.rx.Closed() {
		t.Fatal("Load left the read gate closed")
	}
}

// TestLoadWindowFullParks: with the in-flight window full and no answer
// coming, a poll-mode Load parks on its socket (bounded, so it still sees
// ctx and runs its timers) instead of polling it in a loop. The receive
// calls are counted by the socket, over two waits of different lengths
// (the difference leaves out the start, when Load polls until its first
// send time): 300 ms more of a full window make about one receive per
// millisecond parked. The old back-pressure loop polled the empty socket
// every few microseconds, tens of thousands of receives in that time.
func TestLoadWindowFullParks(t *testing.T) {
	silent, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close() // receives the commands, never answers
	to := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), silent.LocalAddr().(*net.UDPAddr).AddrPort().Port())
	calls := func(wait time.Duration) uint64 {
		cl, err := Dial(Options{Core: Config{Session: 3, MaxInFlight: 16}, Primary: to, Poll: true})
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		rep, err := cl.Load(ctx, LoadConfig{Rate: RateMax, Count: 1_000, Drain: time.Second}, nil)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want the context's deadline (report %+v)", err, rep)
		}
		if rep.Sent != 16 {
			t.Fatalf("sent %d, want the window of 16", rep.Sent)
		}
		c := cl.uc.(*bus.UDP).Counters()
		n := c.EmptyReceives
		for _, b := range c.ReceiveBatches {
			n += b
		}
		t.Logf("window full for %v: %d receive calls (%d empty)", wait, n, c.EmptyReceives)
		return n
	}
	short, long := calls(100*time.Millisecond), calls(400*time.Millisecond)
	if long > short && long-short > 1_500 {
		t.Fatalf("%d more receive calls in 300 ms more of a full window, want at most 1500 (parked, not polling)", long-short)
	}
}

// TestLoadCoalesceSendsBursts: with CoalesceNs the generator waits until
// the oldest unsent command is that late and then sends all that are due,
// so a 50,000/s load with a 1 ms window leaves in bursts of ~50 commands
// (two datagrams of real orders each), not one datagram per 20 µs; every
// command is still answered and its lateness is still counted from its
// intended time. Counted by the socket, not by the wall clock.
//
// The in-flight window holds the whole run and nothing is resent within
// it: a fake primary stalled past 20 ms on a loaded machine (CI runs the
// packages side by side under -race) otherwise filled the default window
// of 1,024, and the generator then sent a few commands per answer (528
// datagrams once): back-pressure, which is not what this test measures.
func TestLoadCoalesceSendsBursts(t *testing.T) {
	const count = 5_000
	cl, u, ctx := pollClientOnFakeWith(t, Config{Session: 9, MaxInFlight: count, ResendAfterNs: int64(time.Minute)})
	var lateMax int64
	rep, err := cl.Load(ctx, LoadConfig{Rate: 50_000, Count: count, Seed: 1, Drain: 5 * time.Second, Park: true, CoalesceNs: 1_000_000}, func(r Result) {
		lateMax = max(lateMax, r.SentNs-r.IntendedNs)
	})
	if err != nil {
		t.Fatalf("%v: %+v", err, rep)
	}
	if rep.Answered != count {
		t.Fatalf("answered %d of %d", rep.Answered, count)
	}
	sent := u.Counters().DatagramsSent
	t.Logf("%d commands in %d datagrams; latest send %v after its intended time", count, sent, time.Duration(lateMax))
	if sent > count/10 {
		t.Fatalf("%d datagrams for %d commands: the load was not sent in bursts", sent, count)
	}
	if lateMax < 500_000 {
		t.Fatalf("no command left more than 0.5 ms after its intended time (latest %v): the wait was not charged to the commands", time.Duration(lateMax))
	}
	if _, err := cl.Load(ctx, LoadConfig{Rate: 1000, Count: 1, CoalesceNs: CoalesceNsMax + 1}, nil); err == nil {
		t.Fatal("a coalesce window over CoalesceNsMax was accepted")
	}
}

// TestLoadRefusesBadRates: a rate that is not a number, infinite, zero,
// negative or over RateMax is refused before anything is sent.
func TestLoadRefusesBadRates(t *testing.T) {
	cl, u, ctx := pollClientOnFake(t)
	for _, rate := range []float64{math.NaN(), math.Inf(1), 0, -1, RateMax * 2} {
		if _, err := cl.Load(ctx, LoadConfig{Rate: rate, Count: 1}, nil); err == nil {
			t.Errorf("rate %v accepted", rate)
		}
	}
	for _, spin := range []int64{-1, SpinNsMax + 1} {
		if _, err := cl.Load(ctx, LoadConfig{Rate: 1000, Count: 1, SpinNs: spin}, nil); err == nil {
			t.Errorf("spin window %v accepted", time.Duration(spin))
		}
	}
	if sent := u.Counters().DatagramsSent; sent != 0 {
		t.Fatalf("%d datagrams sent for refused loads", sent)
	}
}

// pollClientOnFake dials a poll-mode client to a fake primary and returns
// it, its UDP socket (for the bus's counters) and a 30 s context; all are
// closed when the test ends.
func pollClientOnFake(t *testing.T) (*Client, *bus.UDP, context.Context) {
	t.Helper()
	return pollClientOnFakeWith(t, Config{Session: 9})
}

// pollClientOnFakeWith is pollClientOnFake with the client core's config.
func pollClientOnFakeWith(t *testing.T, core Config) (*Client, *bus.UDP, context.Context) {
	t.Helper()
	p := startFakePrimary(t)
	cl, err := Dial(Options{Core: core, Primary: p.u.LocalAddr(), Poll: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return cl, cl.uc.(*bus.UDP), ctx
}
