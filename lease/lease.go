// Package lease is a node's side of the lease at run time: the
// arbiter.Link (the keeper and the backend it drives) over the UDP
// witness (witness.Backend, whose replies arrive on the node's own
// socket) or another backend (Config.NewArbiter, e.g. etcdarb), and the
// log lines of an arbiter gone silent or answering again. What the lease
// decides (promote, step down, stop releasing) is the node's, through
// the keeper (replica.PrimaryLease, replica.StandbyLease).
//
// A static node (no witness, no arbiter) has no Client: New returns nil,
// and a nil *Client answers as a node without a lease.
package lease

import (
	"errors"
	"log/slog"
	"net/netip"
	"time"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/witness"
)

// ErrUnexpected is a lease frame from anyone but the configured UDP
// witness (or to a node that has none).
var ErrUnexpected = errors.New("lease: frame not from the configured witness")

// Config is a Client's node, backend and hooks.
type Config struct {
	Node   uint32
	Stream uint16
	Lease  arbiter.Config
	// Witness is the UDP witness's address; NewArbiter builds another
	// backend. They are exclusive; with neither, New returns nil.
	Witness    netip.AddrPort
	NewArbiter func(*arbiter.Keeper) (arbiter.Backend, error)
	// After: request IDs start above it, unique to this process run
	// (arbiter.NewLink).
	After uint64
	// Send sends a request to the UDP witness on the node's socket.
	Send func(pkt []byte, to netip.AddrPort)
	// OnReply acts on a reply another backend gave the keeper during
	// Tick (the UDP witness's come back from OnDatagram instead).
	OnReply func(r arbiter.Reply, nowNs int64)
	NowNs   func() int64 // monotonic nanoseconds
	// RestampOnReply (UNSAFE, a mutation test's): time the lease from
	// when a grant arrived, not from when its request left.
	RestampOnReply bool
	Log            *slog.Logger // nil: slog.Default()
}

// Client is the node's side of the lease.
type Client struct {
	cfg     Config
	link    *arbiter.Link
	udp     *witness.Backend // the UDP witness (nil otherwise)
	deliver func(arbiter.Reply)
	// notInSync: the last reply refused the lease by the in-sync rule
	// (noteReply), logged once an episode.
	notInSync bool
	// leaseDiffers: a grant's lease was not this node's --lease (logged
	// once).
	leaseDiffers bool
}

// New builds the link and its backend, or returns nil for a static node.
func New(cfg Config) (*Client, error) {
	if !cfg.Witness.IsValid() && cfg.NewArbiter == nil {
		return nil, nil
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	c := &Client{cfg: cfg}
	l, err := arbiter.NewLink(arbiter.NodeID(cfg.Node), cfg.Lease, cfg.After, c.newBackend)
	if err != nil {
		return nil, err
	}
	c.link = l
	c.deliver = c.delivered // one func value, not one per tick
	return c, nil
}

func (c *Client) newBackend(k *arbiter.Keeper) (arbiter.Backend, error) {
	if c.cfg.NewArbiter != nil {
		return c.cfg.NewArbiter(k)
	}
	c.udp = witness.NewBackend(witness.NewClient(k, c.cfg.Stream), c.sendWitness)
	return c.udp, nil
}

// sendWitness sends a request to the UDP witness (the witness.Backend's
// send, from Tick).
func (c *Client) sendWitness(pkt []byte) { c.cfg.Send(pkt, c.cfg.Witness) }

// Keeper is the link's keeper (nil for a static node).
func (c *Client) Keeper() *arbiter.Keeper {
	if c == nil {
		return nil
	}
	return c.link.Keeper()
}

// Tick sends the keeper's due request (wantLead: this node may and
// would lead); another backend delivers its replies from here, through
// Config.OnReply. It reports whether the arbiter just went silent for
// three lease durations (logged once per episode: an unreachable or
// misconfigured witness otherwise looks like a node that simply never
// leads).
func (c *Client) Tick(nowNs int64, wantLead bool) (wentSilent bool) {
	if c == nil {
		return false
	}
	rd := c.link.Tick(nowNs, wantLead, c.deliver)
	if !rd.WentSilent {
		return false
	}
	if c.udp != nil {
		c.cfg.Log.Error("witness unreachable: no reply; nobody leads without it (is `seqbus witness` running there, with the same --lease, --stream and --key?)",
			"witness", c.cfg.Witness, "silent", time.Duration(rd.SilentNs))
	} else {
		c.cfg.Log.Error("arbiter unreachable: no lease reply; nobody leads without it", "silent", time.Duration(rd.SilentNs))
	}
	return true
}

func (c *Client) delivered(r arbiter.Reply) {
	now := c.cfg.NowNs()
	c.replied(now)
	c.noteReply(&r)
	c.cfg.OnReply(r, now)
}

// noteReply logs what a reply says that the node's operator must hear:
// a grant of another lease than --lease (noteLeaseDuration), and, once
// an episode, a refusal only the in-sync rule explains: nobody holds the lease, no restart quarantine is left, and
// this node is not in the set the reply carries. Without it a standby
// that never leads says nothing of why. A grant, or a refusal for
// another reason, ends the episode. A refusal of a node whose requests
// name another history than the arbiter pinned is not the in-sync rule's
// (the node logs FOREIGN HISTORY itself: replica.Identity).
func (c *Client) noteReply(r *arbiter.Reply) {
	if r.Kind != arbiter.ReplyGrant && r.Kind != arbiter.ReplyDeny {
		return
	}
	c.noteLeaseDuration(r)
	ours := c.link.Keeper().History()
	foreign := r.History != 0 && ours != 0 && r.History != ours
	refused := r.Kind == arbiter.ReplyDeny && r.Holder == arbiter.NodeNone && r.RemainingNs == 0 &&
		!r.Members.Contains(arbiter.NodeID(c.cfg.Node)) && !foreign
	if refused && !c.notInSync {
		c.cfg.Log.Warn("the arbiter refuses this node the lease: it is not in the in-sync set, so it may lack output the last primary released; "+
			"a member or the last primary leads (if none is left, an operator decides: seqbus witness override, docs/witness.md)",
			"in_sync", r.Members.Slice(), "epoch", r.Epoch)
	}
	c.notInSync = refused
}

// noteLeaseDuration warns, once, of a grant for another lease than this
// node's --lease: they must match. The keeper times its view by the
// shorter of the two, so it stays safe, but a node whose --renew is
// longer than the arbiter's lease loses the lease before each renewal
// and is granted a new term every time: a failover a second, with no
// fault.
func (c *Client) noteLeaseDuration(r *arbiter.Reply) {
	if r.Kind != arbiter.ReplyGrant || r.DurationNs == 0 || r.DurationNs == c.cfg.Lease.LeaseDurationNs || c.leaseDiffers {
		return
	}
	c.leaseDiffers = true
	c.cfg.Log.Warn("the arbiter grants another lease than this node's --lease: they must match (witness --lease, node --lease); "+
		"with a --renew past the arbiter's lease every renewal comes too late and each costs a new term",
		"arbiter_lease", time.Duration(r.DurationNs), "node_lease", time.Duration(c.cfg.Lease.LeaseDurationNs),
		"node_renew", time.Duration(c.cfg.Lease.RenewIntervalNs))
}

func (c *Client) replied(nowNs int64) {
	if c.link.Replied(nowNs) {
		c.cfg.Log.Info("arbiter answering again")
	}
}

// OnDatagram takes a lease frame from the node's socket: a reply of the
// UDP witness, already given to the keeper. ErrUnexpected: not from the
// witness; another error: the frame did not decode.
func (c *Client) OnDatagram(pkt []byte, from netip.AddrPort, nowNs int64) (arbiter.Reply, error) {
	if c == nil || c.udp == nil || from != c.cfg.Witness {
		return arbiter.Reply{}, ErrUnexpected
	}
	r, used, err := c.udp.OnDatagram(pkt)
	if err != nil {
		return arbiter.Reply{}, err
	}
	c.replied(nowNs)
	c.noteReply(&r)
	if used && r.Granted() && c.cfg.RestampOnReply {
		c.link.Keeper().UnsafeRestamp(nowNs) // UNSAFE (mutation test)
	}
	return r, nil
}

// ProposeInSync hands a primary's in-sync proposal to the arbiter.
func (c *Client) ProposeInSync(base uint64, members []arbiter.NodeID, nowNs int64) error {
	return c.link.ProposeInSync(base, members, nowNs)
}

// Lease is the lease as the keeper holds it, for status.
func (c *Client) Lease(nowNs int64) (held bool, remainingNs int64, epoch uint64) {
	return c.link.Lease(nowNs)
}

// Release gives the lease up (arbiter.Link.Release): the node has
// stopped leading for good, so the arbiter may grant the next epoch at
// once. declined says the node never led under it and holds nothing (its
// directory is new): the arbiter may undo the grant (arbiter.Link.Release).
// It reports whether a release was sent (false: no lease was held, or a
// static node).
func (c *Client) Release(nowNs int64, declined bool) bool {
	if c == nil {
		return false
	}
	return c.link.Release(nowNs, declined)
}

// Close closes the backend (the UDP witness's socket is the node's); a
// failure is logged as well as returned.
func (c *Client) Close() error {
	if c == nil {
		return nil
	}
	err := c.link.Close()
	if err != nil {
		c.cfg.Log.Warn("closing the arbiter client", "err", err)
	}
	return err
}
