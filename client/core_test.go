package client

import (
	"errors"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/seqbus/seqbus/engine"
)

var order = engine.Request{Op: engine.OpNewOrder, Side: engine.Buy, Type: engine.Limit, Price: 10, Qty: 1}

func TestCoreMatchesAnswers(t *testing.T) {
	c := NewCore(Config{Session: 5, MaxInFlight: 4, ResendAfterNs: 100})
	id, cmd, err := c.Next(&order, 0, 10)
	if err != nil || id != 1 {
		t.Fatalf("%d %v", id, err)
	}
	h, err := engine.ParseCommand(cmd)
	if err != nil || h.Session != 5 || h.ClientOrderID != 1 {
		t.Fatalf("command header %+v %v", h, err)
	}
	res, ok := c.OnOutput(&engine.Output{Kind: engine.KindAck, ClientOrderID: 1}, 60)
	if !ok || res.Kind != engine.KindAck || res.LatencyNs != 60 || res.Duplicate {
		t.Fatalf("%+v %v", res, ok)
	}
	if _, ok := c.OnOutput(&engine.Output{Kind: engine.KindAck, ClientOrderID: 1}, 70); ok {
		t.Fatal("a second answer matched")
	}
	if _, ok := c.OnOutput(&engine.Output{Kind: engine.KindExecution, ClientOrderID: 1}, 70); ok {
		t.Fatal("an execution completed a command")
	}
	if st := c.Stats(); st.Acks != 1 || st.Unmatched != 1 || st.Executions != 1 {
		t.Fatalf("%+v", st)
	}
}

func TestCoreDuplicateIsTheOriginal(t *testing.T) {
	c := NewCore(Config{Session: 5})
	c.Next(&order, 0, 0)
	res, ok := c.OnOutput(&engine.Output{Kind: engine.KindDuplicate, Original: engine.KindReject, ClientOrderID: 1}, 5)
	if !ok || !res.Duplicate || res.Kind != engine.KindReject {
		t.Fatalf("%+v", res)
	}
}

func TestCoreWindowAndResend(t *testing.T) {
	c := NewCore(Config{Session: 5, MaxInFlight: 2, ResendAfterNs: 100})
	c.Next(&order, 0, 0)
	c.Next(&order, 0, 50)
	if _, _, err := c.Next(&order, 0, 50); !errors.Is(err, ErrWindowFull) {
		t.Fatalf("%v", err)
	}
	var resent []uint64
	collect := func(cmd []byte) {
		h, _ := engine.ParseCommand(cmd)
		resent = append(resent, h.ClientOrderID)
	}
	if c.Poll(99, collect) != 0 {
		t.Fatal("resent before the timeout")
	}
	c.Poll(100, collect)
	if len(resent) != 1 || resent[0] != 1 {
		t.Fatalf("resent %v, want [1]", resent)
	}
	c.OnOutput(&engine.Output{Kind: engine.KindAck, ClientOrderID: 1}, 120)
	resent = nil
	if c.ResendAll(130, collect) != 1 || resent[0] != 2 {
		t.Fatalf("ResendAll resent %v", resent)
	}
	if id, _, err := c.Next(&order, 0, 140); err != nil || id != 3 {
		t.Fatalf("after an answer the window has room: %d %v", id, err)
	}
}

// TestPropertyEveryCommandAnsweredOnce: whatever the order of answers,
// losses (answered later by resend) and duplicate answers, each command
// completes exactly once and in-flight returns to zero.
func TestPropertyEveryCommandAnsweredOnce(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := NewCore(Config{Session: 1, MaxInFlight: 16, ResendAfterNs: 10})
		n := rapid.IntRange(1, 200).Draw(t, "n")
		completed := map[uint64]int{}
		var open []uint64
		now := int64(0)
		sent := 0
		for sent < n || len(open) > 0 {
			now++
			if sent < n && rapid.Bool().Draw(t, "send") {
				if id, _, err := c.Next(&order, now, now); err == nil {
					open = append(open, id)
					sent++
				}
				continue
			}
			if len(open) == 0 {
				continue
			}
			i := rapid.IntRange(0, len(open)-1).Draw(t, "answer")
			id := open[i]
			kind := engine.KindAck
			if rapid.Bool().Draw(t, "dup") {
				kind = engine.KindDuplicate
			}
			if res, ok := c.OnOutput(&engine.Output{Kind: kind, Original: engine.KindAck, ClientOrderID: id}, now); ok {
				completed[res.ClientOrderID]++
			}
			if rapid.Bool().Draw(t, "keep") {
				continue // answer lost or repeated: the id stays open once more
			}
			open = append(open[:i], open[i+1:]...)
		}
		if c.InFlight() != 0 || len(completed) != n {
			t.Fatalf("in flight %d, completed %d of %d", c.InFlight(), len(completed), n)
		}
		for id, k := range completed {
			if k != 1 {
				t.Fatalf("id %d completed %d times", id, k)
			}
		}
	})
}

// TestNextPayload: an opaque body is sent under the next id with the
// session's header, resent byte for byte, and refused over MaxCommandLen.
func TestNextPayload(t *testing.T) {
	c := NewCore(Config{Session: 4, ResendAfterNs: 10})
	body := make([]byte, 1000)
	body[0] = 0xEE
	id, cmd, err := c.NextPayload(body, 1, 2)
	if err != nil || id != 1 || len(cmd) != engine.CommandHeaderLen+1000 {
		t.Fatalf("id %d, %d bytes, %v", id, len(cmd), err)
	}
	h, err := engine.ParseCommand(cmd)
	if err != nil || h.Session != 4 || h.ClientOrderID != 1 || h.Body[0] != 0xEE {
		t.Fatalf("header %+v, %v", h, err)
	}
	var resent []byte
	c.Poll(100, func(b []byte) { resent = append([]byte(nil), b...) })
	if string(resent) != string(cmd) {
		t.Fatal("resend differs from the original")
	}
	if _, _, err := c.NextPayload(make([]byte, MaxCommandLen), 1, 2); err != ErrTooLong {
		t.Fatalf("oversized body: %v", err)
	}
}

// TestPropertyResendWhereMatchesAFullScan: the resend scan that stops at
// the first command never resent and not yet due resends exactly what a
// scan of every command in flight would: the oldest `limit` of those sent
// at least `age` ago, in id order, whatever the answers, resends and ages
// before.
func TestPropertyResendWhereMatchesAFullScan(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		window := rapid.IntRange(1, 64).Draw(t, "window")
		c := NewCore(Config{Session: 1, MaxInFlight: window, ResendAfterNs: 1})
		type model struct{ sentNs int64 }
		live := map[uint64]*model{}
		now := int64(0)
		for step := rapid.IntRange(1, 300).Draw(t, "steps"); step > 0; step-- {
			now += rapid.Int64Range(0, 20).Draw(t, "dt")
			switch rapid.IntRange(0, 2).Draw(t, "op") {
			case 0:
				if id, _, err := c.Next(&order, now, now); err == nil {
					live[id] = &model{sentNs: now}
				}
			case 1:
				if len(live) == 0 {
					continue
				}
				ids := make([]uint64, 0, len(live))
				for id := range live {
					ids = append(ids, id)
				}
				slices.Sort(ids)
				id := ids[rapid.IntRange(0, len(ids)-1).Draw(t, "answer")]
				if _, ok := c.OnOutput(&engine.Output{Kind: engine.KindAck, ClientOrderID: id}, now); !ok {
					t.Fatalf("answer to live id %d not matched", id)
				}
				delete(live, id)
			case 2:
				age := rapid.Int64Range(0, 60).Draw(t, "age")
				limit := rapid.IntRange(1, window+1).Draw(t, "limit")
				var want []uint64
				for id, m := range live {
					if now-m.sentNs >= age {
						want = append(want, id)
					}
				}
				slices.Sort(want)
				want = want[:min(len(want), limit)]
				var got []uint64
				n := c.resendWhere(now, age, limit, func(cmd []byte) {
					h, _ := engine.ParseCommand(cmd)
					got = append(got, h.ClientOrderID)
				})
				if n != len(got) || !slices.Equal(got, want) {
					t.Fatalf("at %d, age %d, limit %d: resent %v (n %d), a full scan resends %v", now, age, limit, got, n, want)
				}
				for _, id := range got {
					live[id].sentNs = now
				}
			}
		}
	})
}
