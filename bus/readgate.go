package bus

// ReadGate pairs a Parker with the receive it saves: after a park that
// ended with the socket empty (its timeout), the poll right after it need
// not read, so a parked loop makes no empty receives. The client's and the
// raw floor's parked generators share it.
type ReadGate struct {
	P    *Parker // nil: never parks, always reads
	idle bool    // the last park found the socket empty
}

// ParkNs parks on the socket for at most timeoutNs (pace.WaiterConfig's
// ParkNs) and reports whether it is readable. A park that ends without
// the socket readable closes the gate for one read; an error leaves it
// open, so the socket's error surfaces at the read.
func (g *ReadGate) ParkNs(timeoutNs int64) bool {
	ready, err := g.P.ParkNs(timeoutNs)
	g.idle = !ready && err == nil
	return ready
}

// ReadNow reports whether to read the socket: always, except once right
// after a park that found it empty.
func (g *ReadGate) ReadNow() bool {
	if g.idle {
		g.idle = false
		return false
	}
	return true
}

// Reset opens the gate (a run ends).
func (g *ReadGate) Reset() { g.idle = false }

// Closed reports whether the next ReadNow would skip the read.
func (g *ReadGate) Closed() bool { return g.idle }
