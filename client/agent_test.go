package client

import (
	"context"
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
	p := startFakePrimary(t)
	cl, err := Dial(Options{Core: Config{Session: 9}, Primary: p.u.LocalAddr(), Poll: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	u := cl.uc.(*bus.UDP)
	const count = 2_000
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
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
