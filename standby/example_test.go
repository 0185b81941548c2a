package standby_test

import (
	"fmt"

	"github.com/seqbus/seqbus/standby"
)

func Example() {
	w, err := standby.New(standby.Config{MaxPending: 1024, MaxMessageBytes: 256},
		func(seq uint64, payload []byte) { fmt.Printf("apply %d %s\n", seq, payload) })
	if err != nil {
		panic(err)
	}
	var rejects standby.Rejects
	recv := make([]byte, 256) // the runtime's reused receive buffer
	for _, m := range []struct {
		seq uint64
		cmd string
	}{{1, "buy"}, {3, "cancel"}, {2, "sell"}, {2, "sell"}} {
		n := copy(recv, m.cmd)
		gap, hasGap, err := w.OnMessage(m.seq, recv[:n])
		rejects.Count(err)
		if hasGap {
			fmt.Printf("nak %d-%d\n", gap.From, gap.To)
		}
	}
	w.ObserveHighest(5) // a heartbeat: 4 and 5 exist
	var nak [16]standby.Range
	fmt.Println("gaps", w.Gaps(nak[:0]), "ack", w.Ack(), "duplicates", w.Stats().Duplicates)
	// Output:
	// apply 1 buy
	// nak 2-2
	// apply 2 sell
	// apply 3 cancel
	// gaps [{4 5}] ack 3 duplicates 1
}
