package etcdarb

import (
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/seqbus/seqbus/arbiter"
)

// Defaults for the Config fields left zero.
const (
	// DefaultPrefix is the root of the key space: keys are
	// <prefix>/<stream>/{leader,term,insync}.
	DefaultPrefix = "/seqbus"

	// DefaultDialTimeoutNs bounds New: 2 s is long against a LAN round
	// trip and a TLS-free gRPC handshake, short enough that a node started
	// with a wrong endpoint list fails fast with a clear error.
	DefaultDialTimeoutNs = int64(2 * time.Second)

	// DefaultRequestTimeoutNs bounds one acquire or renew (two or three
	// etcd round trips). 200 ms is below the default 250 ms renew interval,
	// so a request stuck on a dead member (or an election) gives way to the
	// next one instead of holding the single worker for most of a lease;
	// a healthy LAN etcd answers in about a millisecond.
	DefaultRequestTimeoutNs = int64(200 * time.Millisecond)
)

// Config configures a Client. Zero durations and an empty Prefix take the
// defaults above.
type Config struct {
	// Endpoints are the etcd client URLs, e.g. "http://10.0.0.3:2379".
	// At least one.
	Endpoints []string
	// Prefix is the key space root, an absolute path without a trailing
	// slash (default "/seqbus"). Every node of a cluster must use the same
	// prefix and stream.
	Prefix string
	// Stream selects the lease within the prefix: one leader per stream.
	Stream uint16
	// Node is this node's ID; never arbiter.NodeNone.
	Node arbiter.NodeID
	// LeaseDurationNs must equal the keeper's arbiter.Config
	// LeaseDurationNs. The etcd lease TTL is this rounded UP to whole
	// seconds (etcd counts TTLs in seconds), and grants report the smaller
	// of this and the TTL etcd granted, so the keeper never believes in a
	// longer lease than etcd keeps.
	LeaseDurationNs int64
	// DialTimeoutNs bounds New's connection check; RequestTimeoutNs bounds
	// each acquire, renew and (without a deadline of its own) Query.
	DialTimeoutNs    int64
	RequestTimeoutNs int64
	// Logger receives connection-state changes and corrupt values (once
	// per episode, never per request). nil discards them.
	Logger *slog.Logger
}

// withDefaults fills zero fields and validates the rest.
func (c Config) withDefaults() (Config, error) {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.DialTimeoutNs == 0 {
		c.DialTimeoutNs = DefaultDialTimeoutNs
	}
	if c.RequestTimeoutNs == 0 {
		c.RequestTimeoutNs = DefaultRequestTimeoutNs
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case len(c.Endpoints) == 0:
		return c, fmt.Errorf("%w: no endpoints", ErrConfig)
	case c.Node == arbiter.NodeNone:
		return c, fmt.Errorf("%w: node ID must not be NodeNone", ErrConfig)
	case c.LeaseDurationNs <= 0:
		return c, fmt.Errorf("%w: LeaseDurationNs %d must be > 0", ErrConfig, c.LeaseDurationNs)
	case c.DialTimeoutNs < 0 || c.RequestTimeoutNs < 0:
		return c, fmt.Errorf("%w: timeouts (dial %d ns, request %d ns) must be >= 0", ErrConfig, c.DialTimeoutNs, c.RequestTimeoutNs)
	case !strings.HasPrefix(c.Prefix, "/") || strings.HasSuffix(c.Prefix, "/"):
		return c, fmt.Errorf("%w: prefix %q must start with / and not end with /", ErrConfig, c.Prefix)
	}
	return c, nil
}

// ttlSeconds is the etcd lease TTL for a lease of leaseDurationNs: rounded
// UP to whole seconds, at least 1. Rounding up keeps etcd's lease at least
// as long as the keeper's view (the safe direction: others wait longer);
// the keeper itself is told the smaller of the two (grantDurationNs).
func ttlSeconds(leaseDurationNs int64) int64 {
	const second = int64(time.Second)
	return max(1, (leaseDurationNs+second-1)/second)
}

// grantDurationNs is the duration a grant reports: etcd's TTL in seconds
// (which may exceed what was asked: etcd raises every TTL to its minimum,
// 1.5 election timeouts rounded up), capped at our lease. A TTL that is not
// positive is no lease at all.
func grantDurationNs(ttlS, leaseDurationNs int64) int64 {
	if ttlS <= 0 {
		return 0
	}
	const second = int64(time.Second)
	if ttlS > leaseDurationNs/second {
		// Also keeps ttlS*second from overflowing for a huge TTL.
		return leaseDurationNs
	}
	return ttlS * second
}

// keys is the key layout for one stream.
type keys struct {
	leader, term, inSync string
}

func makeKeys(prefix string, stream uint16) keys {
	base := fmt.Sprintf("%s/%d/", prefix, stream)
	return keys{leader: base + "leader", term: base + "term", inSync: base + "insync"}
}

// ParseURL turns an arbiter URL, etcd://h1:2379,h2:2379, into the
// client's endpoints (http://h1:2379, ...): what `seqbus node --arbiter`
// and `seqbus client --arbiter` take.
func ParseURL(u string) ([]string, error) {
	rest, ok := strings.CutPrefix(u, "etcd://")
	if !ok || rest == "" {
		return nil, fmt.Errorf("want etcd://host:port[,host:port...], got %q", u)
	}
	var eps []string
	for _, h := range strings.Split(rest, ",") {
		if _, _, err := net.SplitHostPort(h); err != nil {
			return nil, fmt.Errorf("bad endpoint %q: %v", h, err)
		}
		eps = append(eps, "http://"+h)
	}
	return eps, nil
}
