package witness

import (
	"fmt"
	"math"
	"slices"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/wire"
)

// The lease frames carry durations as uint64 nanoseconds; the cores use
// int64. These conversions are the only place the two meet.

// DurationToWire converts a core duration for the wire. A negative
// duration is a bug on the sending side and is refused with ErrDuration.
func DurationToWire(durationNs int64) (uint64, error) {
	if durationNs < 0 {
		return 0, fmt.Errorf("%w: %d ns is negative", ErrDuration, durationNs)
	}
	return uint64(durationNs), nil
}

// DurationFromWire converts a wire duration that must be exact (a grant's
// duration). Above math.MaxInt64 it is refused with ErrDuration: no witness
// sends that, so it is corruption, and trusting any value from it would be
// a guess.
func DurationFromWire(durationNs uint64) (int64, error) {
	if durationNs > math.MaxInt64 {
		return 0, fmt.Errorf("%w: %d ns exceeds int64", ErrDuration, durationNs)
	}
	return int64(durationNs), nil
}

// SaturateFromWire converts an informational wire duration (a deny's or an
// info's time left), clamping values above math.MaxInt64 to it: the value
// only tells a node when to ask again.
func SaturateFromWire(durationNs uint64) int64 {
	return int64(min(durationNs, math.MaxInt64))
}

// durationToWireClamped is the server's encoding: its own durations are
// never negative (the arbiter guarantees it), and clamping keeps a
// violation from turning into a huge unsigned value.
func durationToWireClamped(durationNs int64) uint64 { return uint64(max(durationNs, 0)) }

// AppendRequest appends the LEASE_ACQUIRE or LEASE_RENEW frame for a
// keeper's request: sender req.Node, the renewed epoch in the header, the
// request ID in the body. stream is echoed by the witness and otherwise
// not interpreted.
func AppendRequest(dst []byte, req arbiter.Request, stream uint16) ([]byte, error) {
	return AppendRequestInSync(dst, req, stream, arbiter.InSyncProposal{})
}

// AppendRequestInSync is AppendRequest with a proposal attached to a
// renew (p.BaseVersion != 0). A proposal on an acquire, or with N out of
// [0, arbiter.MaxInSyncMembers], is refused with ErrRequest; the witness
// judges the set itself.
func AppendRequestInSync(dst []byte, req arbiter.Request, stream uint16, p arbiter.InSyncProposal) ([]byte, error) {
	l := wire.Lease{
		Origin:    wire.Origin{Stream: stream, Node: uint32(req.Node), Epoch: req.Epoch},
		RequestID: req.ID,
		History:   req.History,
	}
	switch {
	case req.Node == arbiter.NodeNone:
		return dst, fmt.Errorf("%w: sender is NodeNone", ErrRequest)
	case req.Kind == arbiter.RequestAcquire:
		l.Type = wire.TypeLeaseAcquire
	case req.Kind == arbiter.RequestRenew:
		l.Type = wire.TypeLeaseRenew
	case req.Kind == arbiter.RequestRelease:
		l.Type = wire.TypeLeaseRelease
		l.Declined = req.Declined
	default:
		return dst, fmt.Errorf("%w: kind %s", ErrRequest, req.Kind)
	}
	if p.BaseVersion != 0 {
		if l.Type != wire.TypeLeaseRenew || p.N < 0 || p.N > arbiter.MaxInSyncMembers {
			return dst, fmt.Errorf("%w: in-sync proposal of %d members on a %s", ErrRequest, p.N, req.Kind)
		}
		l.InSyncVersion = p.BaseVersion
		l.NMembers = p.N
		for i, m := range p.Members[:p.N] {
			l.Members[i] = uint32(m)
		}
	}
	return l.Append(dst), nil
}

// AppendQuery appends a LEASE_QUERY from node (any ID, 0 for an anonymous
// tool) with requestID, which the LEASE_INFO echoes.
func AppendQuery(dst []byte, node arbiter.NodeID, stream uint16, requestID uint64) []byte {
	l := wire.Lease{
		Type:      wire.TypeLeaseQuery,
		Origin:    wire.Origin{Stream: stream, Node: uint32(node)},
		RequestID: requestID,
	}
	return l.Append(dst)
}

// replyKinds maps the reply frame types to the arbiter's reply kinds.
func replyKind(t wire.Type) arbiter.ReplyKind {
	switch t {
	case wire.TypeLeaseGrant:
		return arbiter.ReplyGrant
	case wire.TypeLeaseDeny:
		return arbiter.ReplyDeny
	case wire.TypeLeaseInfo:
		return arbiter.ReplyInfo
	}
	return arbiter.ReplyNone
}

// DecodeReply reads a parsed LEASE_GRANT, LEASE_DENY or LEASE_INFO frame
// into the arbiter's Reply (kind grant, deny or info).
// Any other type, a grant with epoch 0 or a duration of 0 or above
// math.MaxInt64, and an in-sync set that is not sorted, unique and free of
// NodeNone, is refused with ErrReply: a keeper would ignore such a grant
// anyway, and refusing it here lets the caller count it.
func DecodeReply(f *wire.Frame) (arbiter.Reply, error) {
	kind := replyKind(f.Type)
	if kind == arbiter.ReplyNone {
		return arbiter.Reply{}, fmt.Errorf("%w: %s is not a witness reply", ErrReply, f.Type)
	}
	l, err := wire.DecodeLease(f)
	if err != nil {
		return arbiter.Reply{}, fmt.Errorf("%w: %v", ErrReply, err)
	}
	r := arbiter.Reply{
		Kind:      kind,
		Witness:   f.Node,
		RequestID: l.RequestID,
		Epoch:     f.Epoch,
		Holder:    arbiter.NodeID(l.Holder),
		History:   l.History,

		InSyncVersion: l.InSyncVersion,
	}
	var members [wire.MaxMembers]arbiter.NodeID
	for i, m := range l.Members[:l.NMembers] {
		members[i] = arbiter.NodeID(m)
	}
	set, ok := arbiter.MakeInSyncSet(members[:l.NMembers], arbiter.NodeNone)
	if !ok || !slices.Equal(set.Slice(), members[:l.NMembers]) {
		// Only the count goes in the message: passing the array would make
		// it escape, and decoding must not allocate.
		return arbiter.Reply{}, fmt.Errorf("%w: in-sync set of %d members not sorted, unique and non-zero", ErrReply, l.NMembers)
	}
	r.Members = set
	if kind != arbiter.ReplyGrant {
		r.RemainingNs, r.Run = SaturateFromWire(l.RemainingNs), uint64(l.Run)
		return r, nil
	}
	if r.Epoch == 0 || l.DurationNs == 0 {
		return arbiter.Reply{}, fmt.Errorf("%w: grant of epoch %d for %d ns", ErrReply, r.Epoch, l.DurationNs)
	}
	if r.DurationNs, err = DurationFromWire(l.DurationNs); err != nil {
		return arbiter.Reply{}, fmt.Errorf("%w: grant %w", ErrReply, err)
	}
	return r, nil
}

// ParseReply parses and decodes one datagram. A wire error is returned as
// is (matching a wire sentinel); a frame that is not a usable reply
// matches ErrReply.
func ParseReply(pkt []byte) (arbiter.Reply, error) {
	f, n, err := wire.Parse(pkt)
	if err != nil {
		return arbiter.Reply{}, err
	}
	if n != len(pkt) {
		return arbiter.Reply{}, fmt.Errorf("%w: %d bytes after the frame", wire.ErrLength, len(pkt)-n)
	}
	return DecodeReply(&f)
}

// Client is the node side of the lease protocol without the socket: it
// turns the keeper's requests into frames and the witness's replies into
// keeper calls. The runtime owns the socket and the clock:
//
//	nowNs := monotonicNs()
//	if pkt, ok := c.Tick(nowNs); ok { conn.Send([][]byte{pkt}, witnessAddr) }
//	for each datagram from the witness: c.OnDatagram(pkt)
//	if c.Keeper().MayLead(monotonicNs()) { release... }
//
// It is not safe for concurrent use, like the keeper it wraps.
type Client struct {
	keeper *arbiter.Keeper
	stream uint16
	buf    []byte
	// proposal is attached to the next renew Tick produces, then cleared
	// (BaseVersion 0).
	proposal arbiter.InSyncProposal
}

// NewClient wraps keeper; stream is stamped on every request.
func NewClient(keeper *arbiter.Keeper, stream uint16) *Client {
	return &Client{keeper: keeper, stream: stream, buf: make([]byte, 0, wire.HeaderLen+64+4*wire.MaxMembers)}
}

// Keeper returns the wrapped keeper.
func (c *Client) Keeper() *arbiter.Keeper { return c.keeper }

// ProposeInSync attaches a proposal for the in-sync set to the next renew
// that Tick produces, if that renew is of the keeper's epoch now
// (arbiter.InSyncProposal.Take; it replaces an earlier proposal not yet
// sent; an acquire does not consume it). The proposal is sent once: if the reply
// is lost, or the next grant shows another set (a refused or stale
// proposal), the node proposes again based on the version it last saw.
// It returns an error matching both ErrRequest and arbiter.ErrProposal,
// keeping any earlier proposal, for baseVersion 0 or more than
// arbiter.MaxInSyncMembers members; the witness judges the rest
// (duplicates, NodeNone, the proposer itself). It does not allocate.
func (c *Client) ProposeInSync(baseVersion uint64, members []arbiter.NodeID) error {
	p, err := arbiter.NewInSyncProposal(baseVersion, members)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrRequest, err)
	}
	p.Epoch = c.keeper.Epoch()
	c.proposal = p
	return nil
}

// Tick calls the keeper's Tick(nowNs) and, when a request is due, returns
// its encoded frame, with the pending proposal if the request is a renew.
// nowNs must be read just before sending, as the keeper requires. The
// frame aliases a buffer reused by the next Tick.
func (c *Client) Tick(nowNs int64) ([]byte, bool) {
	req, ok := c.keeper.Tick(nowNs)
	if !ok {
		return nil, false
	}
	pkt, err := AppendRequestInSync(c.buf[:0], req, c.stream, c.proposal.Take(req))
	if err != nil {
		// A keeper never has NodeNone (NewKeeper refuses it) nor an
		// unknown kind: this is an invariant violation, not bad input.
		panic(fmt.Sprintf("witness: keeper produced an invalid request: %v", err))
	}
	c.buf = pkt
	return pkt, true
}

// Release encodes a keeper's release request (arbiter.Keeper.Release).
// The frame aliases the buffer the next Tick reuses.
func (c *Client) Release(req arbiter.Request) []byte {
	pkt, err := AppendRequest(c.buf[:0], req, c.stream)
	if err != nil || req.Kind != arbiter.RequestRelease {
		panic(fmt.Sprintf("witness: not a keeper's release: %s %v", req.Kind, err))
	}
	c.buf = pkt
	return pkt
}

// OnDatagram parses a datagram from the witness and, for a grant or deny,
// delivers it to the keeper. used is what the keeper returned (false for
// an info, a late reply or a duplicate). A malformed datagram returns an
// error matching a wire sentinel or ErrReply and changes nothing.
func (c *Client) OnDatagram(pkt []byte) (r arbiter.Reply, used bool, err error) {
	r, err = ParseReply(pkt)
	if err != nil {
		return arbiter.Reply{}, false, err
	}
	return r, r.Deliver(c.keeper), nil
}

// Backend is the UDP witness behind arbiter.Backend, for a node that owns
// the socket: Tick sends the due request with send; the witness's replies
// arrive on the node's socket and go to OnDatagram, which gives them to
// the keeper at once, so Tick delivers none.
type Backend struct {
	c    *Client
	send func(pkt []byte)
}

var _ arbiter.Backend = (*Backend)(nil)

// NewBackend wraps c; send transmits one request frame to the witness (it
// must not block nor keep pkt, which the next Tick reuses).
func NewBackend(c *Client, send func(pkt []byte)) *Backend { return &Backend{c: c, send: send} }

// Client returns the wrapped client.
func (b *Backend) Client() *Client { return b.c }

// Tick sends the keeper's due request, if any. deliver is not called:
// replies come through OnDatagram.
func (b *Backend) Tick(nowNs int64, _ func(arbiter.Reply)) {
	if pkt, ok := b.c.Tick(nowNs); ok {
		b.send(pkt)
	}
}

// ProposeInSync is Client.ProposeInSync.
func (b *Backend) ProposeInSync(baseVersion uint64, members []arbiter.NodeID) error {
	return b.c.ProposeInSync(baseVersion, members)
}

// OnDatagram is Client.OnDatagram.
func (b *Backend) OnDatagram(pkt []byte) (arbiter.Reply, bool, error) { return b.c.OnDatagram(pkt) }

// Release sends the release request at once (one datagram: a lost one
// costs the rest of the lease, as without a release).
func (b *Backend) Release(req arbiter.Request) { b.send(b.c.Release(req)) }

// Close does nothing: the socket is the node's.
func (b *Backend) Close() error { return nil }
