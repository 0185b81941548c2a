package session

// Protocol limits (the wire's and the engine's) and implementation limits
// (this package's bounds, each with its behaviour when reached).
const (
	// MaxOutputBytes is the largest output the history keeps (a gate
	// slot's size, nodeconfig.MaxOutputBytes): a larger one is not recorded.
	MaxOutputBytes = 128

	// DefaultHistory is the default history size: 64k outputs, several
	// seconds of a busy session's outputs at the rates measured here, far
	// more than a failover's in-flight window (the publisher's 64k bound
	// on outputs waiting for release is the same size, so everything a
	// dead primary can have held back fits).
	DefaultHistory = 1 << 16
	// MaxHistory bounds the history size (16M outputs, ~2.4 GB).
	MaxHistory = 1 << 24

	// MaxReplayOutputs bounds the outputs one answer sends (the client
	// asks on from where it stopped).
	MaxReplayOutputs = 4096
	// RequestBudget requests per RequestBudgetNs: 8 per 10 ms. A request
	// scans the history's session column (8 bytes an entry, ~30 µs for
	// 64k), so the worst case is a few percent of the agent. Over it:
	// Refused, counted.
	RequestBudget   = 8
	RequestBudgetNs = 10_000_000

	// MaxRecomputeRecords bounds the journal records one recompute reads:
	// 1M, well under a second of applying. Reached before the asked
	// output: TooOld.
	MaxRecomputeRecords = 1 << 20
	// MaxRebuildRecords bounds the commands a rebuild replays a second
	// time to fill the history below its snapshot: 1M, a fraction of a
	// second. Over it: the history starts at the snapshot (older outputs
	// are recomputed on request or TooOld).
	MaxRebuildRecords = 1 << 20
)
