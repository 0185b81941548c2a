package session

// Budget is the request rate bound: at most RequestBudget requests per
// RequestBudgetNs window, the window starting at the first request after
// the previous one ended. Its zero value is ready.
type Budget struct {
	windowNs int64
	used     int
}

// Allow spends one of the window's tokens at nowNs (monotonic); false: the
// window's tokens are spent (the request is refused, the client retries).
func (b *Budget) Allow(nowNs int64) bool {
	if nowNs-b.windowNs >= RequestBudgetNs {
		b.windowNs, b.used = nowNs, 0
	}
	if b.used >= RequestBudget {
		return false
	}
	b.used++
	return true
}
