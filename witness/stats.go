package witness

import (
	"errors"
	"fmt"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/wire"
)

// DropReason says why the server dropped a datagram without answering.
type DropReason uint8

// Drop reasons. The first ones mirror the wire package's sentinel errors
// (what Parse refused); the last ones are the server's own.
const (
	DropShort      DropReason = iota // wire.ErrShort
	DropMagic                        // wire.ErrMagic
	DropVersion                      // wire.ErrVersion
	DropType                         // wire.ErrType
	DropFlags                        // wire.ErrFlags
	DropLength                       // wire.ErrLength
	DropCount                        // wire.ErrCount
	DropChecksum                     // wire.ErrChecksum
	DropSeq                          // wire.ErrSeq
	DropParseOther                   // a Parse error matching no sentinel (should not happen)
	// DropNotRequest: a valid frame that is not LEASE_ACQUIRE, RENEW or
	// QUERY (a reply looped back, a DATA frame sent to the wrong port).
	DropNotRequest
	// DropTrailing: bytes after the frame; a lease datagram is one frame.
	DropTrailing
	// DropNoAddress: no valid sender address to reply to.
	DropNoAddress
	// DropPersistFailed: the grant was withheld because its epoch could
	// not be made durable (also counted in Stats.PersistFailures).
	DropPersistFailed
	// DropResendExpired: a resend of a cached grant whose lease has since
	// run out; answering it would describe a lease that no longer exists,
	// and asking the arbiter again could grant a second epoch.
	DropResendExpired
	// DropNoMAC: a key is configured and the frame carries no MAC.
	DropNoMAC
	// DropBadMAC: the MAC does not verify (forged, corrupted, or a node
	// with another key file).
	DropBadMAC
	// DropUnknownNode: a lease request from a node id the witness was not
	// configured with (--nodes), so it holds no key for it.
	DropUnknownNode
	// DropReplay: a verified request whose request ID was already decided
	// (a captured request replayed).
	DropReplay
	// DropPersistPending: a request that may need a state write while
	// another write is still under way (the request that started it, sent
	// again, or an acquire, left undecided). It is not answered; the
	// requester's retry finds the write done.
	DropPersistPending
	// DropTooLong: a datagram longer than any lease frame and than the
	// receive buffer (1,500 bytes); the socket cuts it, and the server
	// counts it from the socket's truncations, never parsing it.
	DropTooLong

	// DropReasonsMax bounds the drop counter array.
	DropReasonsMax
)

var dropReasonNames = [DropReasonsMax]string{
	"short", "magic", "version", "type", "flags", "length", "count", "checksum", "seq", "parse-other",
	"not-request", "trailing-bytes", "no-address", "persist-failed", "resend-expired",
	"no-mac", "bad-mac", "unknown-node", "replay", "persist-pending", "too-long",
}

func (r DropReason) String() string {
	if r < DropReasonsMax {
		return dropReasonNames[r]
	}
	return fmt.Sprintf("DropReason(%d)", uint8(r))
}

// parseDropReason maps a wire.Parse error to its drop reason.
func parseDropReason(err error) DropReason {
	for i, sentinel := range [...]error{
		wire.ErrShort, wire.ErrMagic, wire.ErrVersion, wire.ErrType, wire.ErrFlags,
		wire.ErrLength, wire.ErrCount, wire.ErrChecksum, wire.ErrSeq,
	} {
		if errors.Is(err, sentinel) {
			return DropReason(i)
		}
	}
	return DropParseOther
}

// denyReasonsMax bounds Stats.Denies; a reason the arbiter adds later is
// counted in slot 0 (arbiter.ReasonNone never denies) rather than lost.
const denyReasonsMax = int(arbiter.ReasonForeignHistory) + 1

// Stats is a snapshot of the server's counters.
type Stats struct {
	// Requests by type, counting resends.
	Acquires, Renews, Queries uint64
	// Releases counts LEASE_RELEASEs; ReleasesTaken those that ended the
	// sender's live lease.
	Releases, ReleasesTaken uint64
	// GrantsUndone counts releases of a declined grant that undid it
	// (arbiter.Arbiter.Decline): the previous holder may lead again.
	GrantsUndone uint64
	// Decisions counts calls to the arbiter's Acquire or Renew: requests
	// that were not answered from the reply cache.
	Decisions uint64
	// Grants counts grants sent (fresh and resent); GrantsNewEpoch the
	// fresh ones that started a new epoch.
	Grants, GrantsNewEpoch uint64
	// AcquireGrants and RenewGrants split Grants by the request's kind.
	AcquireGrants, RenewGrants uint64
	// Denies counts denies sent, indexed by arbiter.DenyReason (resends
	// counted under their original reason).
	Denies [denyReasonsMax]uint64
	// Infos counts LEASE_INFO replies sent.
	Infos uint64
	// ResendsAnswered counts resends answered from the cache.
	ResendsAnswered uint64
	// CacheEvictions counts nodes forgotten at the NodeTableMax bound;
	// CacheNodes is how many are remembered now.
	CacheEvictions uint64
	CacheNodes     int
	// Persists counts epoch records made durable; PersistFailures the
	// attempts that failed (each withholding one grant).
	Persists, PersistFailures uint64
	// DurableEpoch and DurableInSyncVersion are the highest epoch and
	// in-sync version known durable.
	DurableEpoch, DurableInSyncVersion uint64
	// InSyncProposals counts renews carrying a proposal that reached the
	// arbiter; InSyncRefused those granted with the proposal refused
	// (stale version or invalid set).
	InSyncProposals, InSyncRefused uint64
	// GrantsWhilePersisting counts extensions of a durable epoch granted
	// while a state write was under way, with the durable in-sync set
	// (also counted in Grants).
	GrantsWhilePersisting uint64
	// Drops by reason.
	Drops [DropReasonsMax]uint64
	// ReceiveErrors and SendErrors count transport failures of the loop.
	ReceiveErrors, SendErrors uint64
}

// Dropped is the sum of Drops.
func (s *Stats) Dropped() uint64 {
	var n uint64
	for _, d := range s.Drops {
		n += d
	}
	return n
}

// Denied is the sum of Denies.
func (s *Stats) Denied() uint64 {
	var n uint64
	for _, d := range s.Denies {
		n += d
	}
	return n
}
