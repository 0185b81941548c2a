package engine

import (
	"bytes"
	"testing"
)

type recordEmitter struct {
	to  []uint64
	out []Output
}

func (r *recordEmitter) Emit(to uint64, payload []byte) {
	o, err := ParseOutput(payload)
	if err != nil {
		panic(err)
	}
	r.to = append(r.to, to)
	r.out = append(r.out, o)
}

// TestNop: an Ack per command to its session, none for a bad header, the
// same hash on two replicas and after a snapshot, and none allocated.
func TestNop(t *testing.T) {
	var a, b Nop
	var e recordEmitter
	cmds := [][]byte{AppendCommand(nil, 3, 7, []byte{1, 2, 3}), {1, 2}, AppendCommand(nil, 4, 8, nil)}
	for i, c := range cmds {
		a.Apply(uint64(i+1), c, &e)
		b.Apply(uint64(i+1), c, nil)
	}
	if len(e.out) != 2 || e.to[0] != 3 || e.out[0].Kind != KindAck || e.out[0].ClientOrderID != 7 || e.out[0].OrderID != 1 ||
		e.to[1] != 4 || e.out[1].ClientOrderID != 8 || e.out[1].OrderID != 3 {
		t.Fatalf("outputs %v to %v", e.out, e.to)
	}
	if a.StateHash() != b.StateHash() || a.AppliedSeq() != 3 {
		t.Fatalf("hashes %x %x applied %d", a.StateHash(), b.StateHash(), a.AppliedSeq())
	}
	var c Nop
	c.Apply(1, AppendCommand(nil, 3, 7, []byte{1, 2, 4}), nil)
	if c.StateHash() == func() uint64 { var d Nop; d.Apply(1, cmds[0], nil); return d.StateHash() }() {
		t.Fatal("different commands, same hash")
	}
	var snap bytes.Buffer
	if err := a.Snapshot(&snap); err != nil {
		t.Fatal(err)
	}
	var r Nop
	if err := r.Restore(&snap); err != nil || r.StateHash() != a.StateHash() || r.AppliedSeq() != 3 {
		t.Fatalf("restore: %v", err)
	}
	if err := r.Restore(bytes.NewReader([]byte("garbage"))); err == nil {
		t.Fatal("garbage restored")
	}
	cmd := AppendCommand(nil, 3, 9, make([]byte, 16))
	seq := uint64(10)
	discard := discardEmitter{}
	if n := testing.AllocsPerRun(100, func() { seq++; a.Apply(seq, cmd, discard) }); n != 0 {
		t.Fatalf("%v allocations per Apply", n)
	}
}

type discardEmitter struct{}

func (discardEmitter) Emit(uint64, []byte) {}

// TestNopHashIsStable pins Nop's state hash: replicas of different builds
// compare it, and a snapshot carries it, so a faster fold must give the
// same value for commands of every length (word-sized, with a tail, and
// shorter than a word).
func TestNopHashIsStable(t *testing.T) {
	var n Nop
	for i := range 40 {
		n.Apply(uint64(i+1), AppendCommand(nil, uint64(i%3), uint64(i), bytes.Repeat([]byte{byte(i)}, i)), nil)
	}
	n.Apply(41, []byte{1, 2, 3}, nil) // shorter than a word and than a header
	n.Apply(42, nil, nil)
	if got, want := n.StateHash(), uint64(0xf91b151f173e4b2a); got != want {
		t.Fatalf("StateHash %#x, want %#x", got, want)
	}
}

// BenchmarkNopApply is the bench's `--engine none` per command: a
// 32-byte order's header and body hashed, its Ack encoded and emitted.
func BenchmarkNopApply(b *testing.B) {
	var n Nop
	cmd := AppendCommand(nil, 3, 9, make([]byte, 32))
	out := discardEmitter{}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		n.Apply(uint64(i+1), cmd, out)
	}
}
