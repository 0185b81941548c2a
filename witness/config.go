package witness

import (
	"github.com/seqbus/seqbus/auth"
	"log/slog"

	"github.com/seqbus/seqbus/arbiter"
)

// Implementation limits (not protocol constants).
const (
	// NodeTableMax bounds the reply cache: the last request and reply of at
	// most 64 nodes (a venue cluster has two or three nodes plus a few
	// tools that only query, and queries are not cached). At the bound the
	// node heard from least recently is forgotten. A forgotten node's
	// resend of the same request is then decided afresh by the arbiter,
	// which is safe: a resend of the acquire that started the live term
	// gets that term's grant again (arbiter.AcquireRequest), and anything
	// else grants a new epoch that the node's keeper ignores because it
	// already answered (or forgot) that request ID. It costs at most a
	// lease duration of unused lease, never a duplicated epoch.
	NodeTableMax = 64

	// receiveBatch is how many datagrams one Receive call reads. Lease
	// traffic is a few datagrams a second per node; 16 is plenty.
	receiveBatch = 16

	// datagramBytes is each receive buffer: the largest valid lease frame
	// is 112 bytes; anything longer than one MTU is not ours and the bus
	// drops it as a truncation.
	datagramBytes = 1500
)

// Config configures a witness Core and the Server around it.
type Config struct {
	// Arbiter is the lease configuration. The witness uses only
	// LeaseDurationNs, but the whole Config is validated, because nodes
	// must run with the same values (see arbiter.Config.Validate).
	Arbiter arbiter.Config
	// Node is the witness's own node ID, stamped in the header of every
	// reply. It is informational: replies are matched by request ID.
	Node uint32
	// Logger receives start-up, restore and persistence-failure records.
	// nil discards them. Per-datagram drops are never logged, only
	// counted, so a flood cannot fill a disk.
	Logger *slog.Logger
	// Key, when set, turns on authentication: requests must carry a MAC
	// under the key the witness shares with their node (auth.LeaseKey),
	// queries under the stream's client key; replies are sealed the same
	// way. Nodes lists the node ids it holds keys for (required with Key).
	Key    *auth.MasterKey
	Nodes  []uint32
	Stream uint16 // the stream whose keys it holds (0: 1)
	// Unsafe disables a safety rule. It exists for the simulator's
	// mutation tests (package sim), which prove the checker catches the
	// anomaly; no command-line flag sets it.
	Unsafe Unsafe
}

// Unsafe holds the witness's test-only switches.
type Unsafe struct {
	// NoQuarantine: a restarted witness grants at once instead of waiting
	// one lease duration, so it can grant a new holder while the old
	// holder's lease (granted before the restart) is still live.
	NoQuarantine bool
}

// DefaultConfig returns arbiter.DefaultConfig() and witness node ID 0.
func DefaultConfig() Config {
	return Config{Arbiter: arbiter.DefaultConfig()}
}
