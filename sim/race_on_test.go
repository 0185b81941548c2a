//go:build race

package sim

// raceEnabled sizes the default budget: the race detector slows a seed
// about tenfold, and the seeds are single-goroutine, so racing them finds
// little the plain run does not.
const raceEnabled = true
