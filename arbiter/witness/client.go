package witness

import (
	"fmt"
	"math"

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
	l := wire.Lease{
		Origin:    wire.Origin{Stream: stream, Node: uint32(req.Node), Epoch: req.Epoch},
		RequestID: req.ID,
	}
	switch {
	case req.Node == arbiter.NodeNone:
		return dst, fmt.Errorf("%w: sender is NodeNone", ErrRequest)
	case req.Kind == arbiter.RequestAcquire:
		l.Type = wire.TypeLeaseAcquire
	case req.Kind == arbiter.RequestRenew:
		l.Type = wire.TypeLeaseRenew
	default:
		return dst, fmt.Errorf("%w: kind %s", ErrRequest, req.Kind)
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

// Reply is a decoded witness reply in core types.
type Reply struct {
	// Type is wire.TypeLeaseGrant, TypeLeaseDeny or TypeLeaseInfo.
	Type wire.Type
	// Witness is the node ID the witness stamped (informational).
	Witness uint32
	// RequestID is the echoed request ID.
	RequestID uint64
	// Epoch is the granted epoch (grant), or the highest epoch issued
	// (deny, info).
	Epoch uint64
	// Holder is the live holder (deny, info; NodeNone if none).
	Holder arbiter.NodeID
	// DurationNs is the granted duration (grant only; > 0).
	DurationNs int64
	// RemainingNs is the live lease's time left, or with no holder the
	// witness's restart quarantine left (deny, info).
	RemainingNs int64
}

// Granted reports whether r is a grant.
func (r *Reply) Granted() bool { return r.Type == wire.TypeLeaseGrant }

// DecodeReply reads a parsed LEASE_GRANT, LEASE_DENY or LEASE_INFO frame.
// Any other type, and a grant with epoch 0 or a duration of 0 or above
// math.MaxInt64, is refused with ErrReply: a keeper would ignore such a
// grant anyway, and refusing it here lets the caller count it.
func DecodeReply(f *wire.Frame) (Reply, error) {
	switch f.Type {
	case wire.TypeLeaseGrant, wire.TypeLeaseDeny, wire.TypeLeaseInfo:
	default:
		return Reply{}, fmt.Errorf("%w: %s is not a witness reply", ErrReply, f.Type)
	}
	l, err := wire.DecodeLease(f)
	if err != nil {
		return Reply{}, fmt.Errorf("%w: %v", ErrReply, err)
	}
	r := Reply{
		Type:      f.Type,
		Witness:   f.Node,
		RequestID: l.RequestID,
		Epoch:     f.Epoch,
		Holder:    arbiter.NodeID(l.Holder),
	}
	if f.Type != wire.TypeLeaseGrant {
		r.RemainingNs = SaturateFromWire(l.RemainingNs)
		return r, nil
	}
	if r.Epoch == 0 || l.DurationNs == 0 {
		return Reply{}, fmt.Errorf("%w: grant of epoch %d for %d ns", ErrReply, r.Epoch, l.DurationNs)
	}
	if r.DurationNs, err = DurationFromWire(l.DurationNs); err != nil {
		return Reply{}, fmt.Errorf("%w: grant %w", ErrReply, err)
	}
	return r, nil
}

// ParseReply parses and decodes one datagram. A wire error is returned as
// is (matching a wire sentinel); a frame that is not a usable reply
// matches ErrReply.
func ParseReply(pkt []byte) (Reply, error) {
	f, n, err := wire.Parse(pkt)
	if err != nil {
		return Reply{}, err
	}
	if n != len(pkt) {
		return Reply{}, fmt.Errorf("%w: %d bytes after the frame", wire.ErrLength, len(pkt)-n)
	}
	return DecodeReply(&f)
}

// Deliver passes a grant or deny to the keeper (OnGrant or OnDeny with the
// echoed request ID) and returns what the keeper returned: whether it used
// the reply. An info is not for a keeper and returns false.
func (r *Reply) Deliver(k *arbiter.Keeper) bool {
	switch r.Type {
	case wire.TypeLeaseGrant:
		return k.OnGrant(r.RequestID, r.Epoch, r.DurationNs)
	case wire.TypeLeaseDeny:
		return k.OnDeny(r.RequestID, r.Holder, r.Epoch, r.RemainingNs)
	}
	return false
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
}

// NewClient wraps keeper; stream is stamped on every request.
func NewClient(keeper *arbiter.Keeper, stream uint16) *Client {
	return &Client{keeper: keeper, stream: stream, buf: make([]byte, 0, wire.HeaderLen+64)}
}

// Keeper returns the wrapped keeper.
func (c *Client) Keeper() *arbiter.Keeper { return c.keeper }

// Tick calls the keeper's Tick(nowNs) and, when a request is due, returns
// its encoded frame. nowNs must be read just before sending, as the keeper
// requires. The frame aliases a buffer reused by the next Tick.
func (c *Client) Tick(nowNs int64) ([]byte, bool) {
	req, ok := c.keeper.Tick(nowNs)
	if !ok {
		return nil, false
	}
	pkt, err := AppendRequest(c.buf[:0], req, c.stream)
	if err != nil {
		// A keeper never has NodeNone (NewKeeper refuses it) nor an
		// unknown kind: this is an invariant violation, not bad input.
		panic(fmt.Sprintf("witness: keeper produced an invalid request: %v", err))
	}
	c.buf = pkt
	return pkt, true
}

// OnDatagram parses a datagram from the witness and, for a grant or deny,
// delivers it to the keeper. used is what the keeper returned (false for
// an info, a late reply or a duplicate). A malformed datagram returns an
// error matching a wire sentinel or ErrReply and changes nothing.
func (c *Client) OnDatagram(pkt []byte) (r Reply, used bool, err error) {
	r, err = ParseReply(pkt)
	if err != nil {
		return Reply{}, false, err
	}
	return r, r.Deliver(c.keeper), nil
}
