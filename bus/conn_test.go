package bus

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"
	"time"
)

// receiveN receives until want datagrams arrived, bounded in calls and time.
func receiveN(t *testing.T, r Receiver, want int, size int) [][]byte {
	t.Helper()
	b := newBatch(BatchSizeMax, size)
	var got [][]byte
	deadline := time.Now().Add(5 * time.Second)
	for len(got) < want && time.Now().Before(deadline) {
		n, err := r.Receive(b.bufs, b.sizes, b.from, 100*time.Millisecond)
		if err != nil {
			t.Fatalf("Receive: %v", err)
		}
		for i := 0; i < n; i++ {
			got = append(got, append([]byte(nil), b.bufs[i][:b.sizes[i]]...))
		}
	}
	return got
}

func TestSendReceiveBatch(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			a, b := genPair(t, tr.real, nil)
			// 100 = one full chunk of 64 plus 36: Send must loop.
			msgs := payloads(100)
			if err := a.Send(msgs, b.LocalAddr()); err != nil {
				t.Fatal(err)
			}
			got := receiveN(t, b, len(msgs), 128)
			if len(got) != len(msgs) {
				t.Fatalf("received %d of %d", len(got), len(msgs))
			}
			var total uint64
			for i := range msgs {
				if !bytes.Equal(got[i], msgs[i]) {
					t.Fatalf("datagram %d = %q, want %q", i, got[i], msgs[i])
				}
				total += uint64(len(msgs[i]))
			}
			sc, rc := a.Counters(), b.Counters()
			if sc.DatagramsSent != 100 || sc.BytesSent != total {
				t.Errorf("sent %d datagrams %d bytes, want 100, %d", sc.DatagramsSent, sc.BytesSent, total)
			}
			// 64 lands in bucket 6, 36 in bucket 5 (32..63).
			if sc.SendBatches[6] != 1 || sc.SendBatches[5] != 1 {
				t.Errorf("send histogram %v, want one 64 and one 32..63", sc.SendBatches)
			}
			if rc.DatagramsReceived != 100 || rc.BytesReceived != total || rc.Delivered() != 100 {
				t.Errorf("received %+v", rc)
			}
			var batches uint64
			for _, c := range rc.ReceiveBatches {
				batches += c
			}
			if batches == 0 || batches > 100 {
				t.Errorf("receive histogram %v", rc.ReceiveBatches)
			}
		})
	}
}

func TestReceiveWaitModes(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			_, b := genPair(t, tr.real, nil)
			bt := newBatch(4, 64)
			for _, wait := range []time.Duration{0, 5 * time.Millisecond} {
				n, err := b.Receive(bt.bufs, bt.sizes, bt.from, wait)
				if n != 0 || err != nil {
					t.Errorf("wait %v on empty: %d, %v; want 0, nil", wait, n, err)
				}
			}
			// Empty inputs read nothing.
			if n, err := b.Receive(nil, nil, nil, WaitForever); n != 0 || err != nil {
				t.Errorf("empty batch: %d, %v", n, err)
			}
		})
	}
}

func TestReceiveAfterTimedWait(t *testing.T) {
	// A timed park leaves a deadline behind; the next poll must not see it
	// as expired.
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			a, b := genPair(t, tr.real, nil)
			bt := newBatch(4, 64)
			if n, err := b.Receive(bt.bufs, bt.sizes, bt.from, time.Millisecond); n != 0 || err != nil {
				t.Fatalf("timed wait: %d, %v", n, err)
			}
			time.Sleep(2 * time.Millisecond)
			if err := a.Send([][]byte{[]byte("x")}, b.LocalAddr()); err != nil {
				t.Fatal(err)
			}
			got := receiveN(t, b, 1, 64)
			if len(got) != 1 {
				t.Fatalf("got %d datagrams after a timed wait", len(got))
			}
		})
	}
}

func TestReceiveTruncation(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			a, b := genPair(t, tr.real, nil)
			long := bytes.Repeat([]byte("L"), 100)
			if err := a.Send([][]byte{long, []byte("short")}, b.LocalAddr()); err != nil {
				t.Fatal(err)
			}
			got := receiveN(t, b, 1, 10)
			if len(got) != 1 || string(got[0]) != "short" {
				t.Fatalf("got %q, want only %q", got, "short")
			}
			c := b.Counters()
			if c.ReceiveTruncations != 1 || c.DatagramsReceived != 2 || c.Delivered() != 1 {
				t.Errorf("counters %+v", c)
			}
		})
	}
}

// reasonFilter drops a datagram whose first byte is a digit d with reason d.
func reasonFilter(pkt []byte, _ netip.AddrPort) DropReason {
	if len(pkt) > 0 && pkt[0] >= '0' && pkt[0] <= '9' {
		return DropReason(pkt[0] - '0')
	}
	return Accept
}

func TestFilterDropsByReason(t *testing.T) {
	cases := []struct {
		name      string
		send      []string
		delivered []string
		drops     map[DropReason]uint64
	}{
		{"all accepted", []string{"a", "b"}, []string{"a", "b"}, nil},
		{"bad header", []string{"2x", "ok"}, []string{"ok"}, map[DropReason]uint64{DropBadHeader: 1}},
		{"unknown sender between", []string{"a", "3", "b"}, []string{"a", "b"}, map[DropReason]uint64{DropUnknownSender: 1}},
		{"custom reason kept", []string{"7", "z"}, []string{"z"}, map[DropReason]uint64{7: 1}},
		{"out of range is other", []string{"9", "9", "k"}, []string{"k"}, map[DropReason]uint64{DropOther: 2}},
		{"all dropped", []string{"1", "2"}, nil, map[DropReason]uint64{DropWrongGroup: 1, DropBadHeader: 1}},
	}
	for _, tr := range transports {
		for _, tc := range cases {
			t.Run(tr.name+"/"+tc.name, func(t *testing.T) {
				a, b := genPair(t, tr.real, reasonFilter)
				var msgs [][]byte
				for _, s := range tc.send {
					msgs = append(msgs, []byte(s))
				}
				// A sentinel ends the run so the test knows all arrived.
				msgs = append(msgs, []byte("end"))
				if err := a.Send(msgs, b.LocalAddr()); err != nil {
					t.Fatal(err)
				}
				got := receiveN(t, b, len(tc.delivered)+1, 64)
				var gotS []string
				for _, g := range got {
					gotS = append(gotS, string(g))
				}
				want := append(append([]string(nil), tc.delivered...), "end")
				if len(gotS) != len(want) {
					t.Fatalf("delivered %q, want %q", gotS, want)
				}
				for i := range want {
					if gotS[i] != want[i] {
						t.Fatalf("delivered %q, want %q", gotS, want)
					}
				}
				c := b.Counters()
				for r := DropReason(0); r < DropReasonsMax; r++ {
					if c.Drops[r] != tc.drops[r] {
						t.Errorf("drops[%v] = %d, want %d", r, c.Drops[r], tc.drops[r])
					}
				}
				if c.Delivered() != uint64(len(want)) {
					t.Errorf("Delivered() = %d, want %d", c.Delivered(), len(want))
				}
			})
		}
	}
}

func TestCloseUnblocksReceive(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			a, b := genPair(t, tr.real, nil)
			done := make(chan error, 1)
			go func() {
				bt := newBatch(4, 64)
				_, err := b.Receive(bt.bufs, bt.sizes, bt.from, WaitForever)
				done <- err
			}()
			time.Sleep(10 * time.Millisecond)
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if !errors.Is(err, ErrClosed) {
					t.Fatalf("parked Receive after Close: %v, want ErrClosed", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Close did not unblock Receive")
			}
			if err := b.Close(); !errors.Is(err, ErrClosed) {
				t.Errorf("second Close: %v, want ErrClosed", err)
			}
			if err := b.Send([][]byte{[]byte("x")}, a.LocalAddr()); !errors.Is(err, ErrClosed) {
				t.Errorf("Send after Close: %v, want ErrClosed", err)
			}
			if c := b.Counters(); c.SendErrors != 1 || c.ReceiveErrors != 0 {
				t.Errorf("counters after Close: %+v", c)
			}
		})
	}
}
