//go:build race

package node

// raceEnabled: the race detector turns off the compiler's append(b,
// make(...)...) optimisation the journal's Append relies on, so allocation
// counts do not hold under it.
const raceEnabled = true
