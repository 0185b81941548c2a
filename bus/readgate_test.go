package bus

import "testing"

// TestReadGate: a park that times out closes the gate for exactly one
// read; Reset opens it.
func TestReadGate(t *testing.T) {
	var g ReadGate
	if !g.ReadNow() || g.Closed() {
		t.Fatal("a fresh gate must read")
	}
	g.idle = true // what a park that timed out leaves
	if g.ReadNow() {
		t.Fatal("read right after an empty park")
	}
	if !g.ReadNow() {
		t.Fatal("the gate stayed closed for a second read")
	}
	g.idle = true
	g.Reset()
	if g.Closed() || !g.ReadNow() {
		t.Fatal("Reset left the gate closed")
	}
}
