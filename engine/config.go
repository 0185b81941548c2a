package engine

// Config holds the engine's limits. Every replica of one state machine must
// use the same Config: the limits decide which commands are rejected.
// Memory is allocated once, in New, from these limits.
type Config struct {
	// MaxInstruments bounds instrument ids: valid ids are
	// 0..MaxInstruments-1; others get ReasonUnknownInstrument.
	MaxInstruments uint32
	// MaxOrders bounds the resting orders over all instruments. A limit
	// order that would rest beyond it gets ReasonBookFull.
	MaxOrders uint32
	// MaxSessions bounds the dedup table. Sessions are never evicted (that
	// would forget which of their commands were applied), so a command from
	// a new session beyond the bound gets ReasonTooManySessions. Size it for
	// a whole trading day; a new day starts a new engine.
	MaxSessions uint32
	// DedupWindow is how many of a session's most recent client order ids
	// the engine remembers (a power of two). Clients must use increasing
	// ids per session (gaps allowed) and keep at most DedupWindow commands
	// unacknowledged: an id at or below highest-DedupWindow gets
	// ReasonTooOld and is not applied; an id inside the window is applied
	// once and answered with KindDuplicate afterwards.
	DedupWindow uint32
	// MaxOrderQty bounds one order's qty; with MaxOrders it keeps level
	// totals far from overflow.
	MaxOrderQty uint64
}

// Limits of the limits: they keep the preallocated memory sane and the
// arithmetic in range.
const (
	maxMaxInstruments = 1 << 20
	maxMaxOrders      = 1 << 24
	maxMaxSessions    = 1 << 20
	maxDedupWindow    = 1 << 16
	// maxDedupEntries bounds MaxSessions*DedupWindow, the dedup table's
	// preallocated entries (64 bytes each).
	maxDedupEntries = 1 << 24
)

// DefaultConfig is a modest configuration: about 12 MB preallocated.
func DefaultConfig() Config {
	return Config{
		MaxInstruments: 256,
		MaxOrders:      1 << 16,
		MaxSessions:    1024,
		DedupWindow:    64,
		MaxOrderQty:    1 << 32,
	}
}

// NodeDedupWindow is the dedup window every seqbus node runs the engine
// with: a client may keep this many commands in flight (the client's
// default window) and still resend any of them safely after a failover.
const NodeDedupWindow = 1024

// NodeConfig is the configuration every seqbus node runs (`seqbus node
// --engine matching`), and so every tool that replays a node's journal
// (verify, the demo's and drills' checks, the tests' replays): all
// replicas of one state machine must use the same one. It is
// DefaultConfig with a dedup window of NodeDedupWindow.
func NodeConfig() Config {
	cfg := DefaultConfig()
	cfg.DedupWindow = NodeDedupWindow
	return cfg
}

func (c *Config) validate() error {
	switch {
	case c.MaxInstruments == 0 || c.MaxInstruments > maxMaxInstruments,
		c.MaxOrders == 0 || c.MaxOrders > maxMaxOrders,
		c.MaxSessions == 0 || c.MaxSessions > maxMaxSessions,
		c.DedupWindow == 0 || c.DedupWindow > maxDedupWindow,
		c.DedupWindow&(c.DedupWindow-1) != 0,
		uint64(c.MaxSessions)*uint64(c.DedupWindow) > maxDedupEntries,
		c.MaxOrderQty == 0,
		c.MaxOrderQty > ^uint64(0)/uint64(c.MaxOrders):
		return ErrBadConfig
	}
	return nil
}

func (c *Config) digest() uint64 {
	h := fold(tagConfig, uint64(c.MaxInstruments))
	h = fold(h, uint64(c.MaxOrders))
	h = fold(h, uint64(c.MaxSessions))
	h = fold(h, uint64(c.DedupWindow))
	return fold(h, c.MaxOrderQty)
}
