package wire

import (
	"encoding/binary"
	"fmt"
)

// MaxMembers bounds the in-sync set a lease frame can carry.
const MaxMembers = 8

const leaseFixedLen = 48

// Lease is the body of every lease-protocol frame:
//
//   - LEASE_ACQUIRE / LEASE_RENEW (node -> witness): RequestID is the
//     node's nonce, echoed in the reply so an old reply cannot be replayed
//     to a newer request; Epoch is the epoch the node holds (renew) or 0;
//     Members, when InSyncVersion is non-zero, is the in-sync set the
//     primary proposes with this renew.
//   - LEASE_GRANT (witness -> node): Epoch and DurationNs of the lease, the
//     echoed RequestID, the in-sync set now in force.
//   - LEASE_DENY: Holder and Epoch of the live lease and RemainingNs of it.
//   - LEASE_QUERY / LEASE_INFO: who holds the lease, at which epoch.
//   - LEASE_RELEASE (node -> witness): the holder of Epoch gives it up;
//     Declined (FlagDeclined) says it never led under it, so the witness
//     may undo the grant (arbiter.Arbiter.Decline).
//
// History is, on a request, the id of the history the node's directory
// holds (0: none yet), and on a reply the history the witness has pinned
// for the cluster (0: none yet): a node of another history is refused
// the lease (arbiter.ReasonForeignHistory), so a directory copied from
// another cluster never leads this one's.
//
// Seq in the header carries the sender's highest applied seq (0 for the
// witness); it is informational.
type Lease struct {
	Type Type
	Origin
	Seq           uint64
	RequestID     uint64
	Holder        uint32
	DurationNs    uint64
	RemainingNs   uint64
	InSyncVersion uint64
	NMembers      int
	Members       [MaxMembers]uint32
	// Declined: FlagDeclined, on a LEASE_RELEASE only.
	Declined bool
	// Run, on a LEASE_DENY to the last holder: how many of the newest
	// epochs were all granted to it (arbiter.Decision.Run); 0 on every
	// other frame. The payload's word at 12, reserved (zero) before.
	Run uint32
	// History: the node's history id (requests) or the cluster's pinned
	// one (replies); the payload's word at 40.
	History uint64
}

// FlagDeclined marks a LEASE_RELEASE of a grant its node declined to lead
// under (its directory is new): it led, sequenced and released nothing.
const FlagDeclined uint16 = 0x0010

// IsLease reports whether t is a lease-protocol frame type.
func IsLease(t Type) bool {
	return (t >= TypeLeaseAcquire && t <= TypeLeaseInfo) || t == TypeLeaseRelease
}

// Len is the encoded size.
func (l *Lease) Len() int { return HeaderLen + leaseFixedLen + 4*l.NMembers }

// Append appends the encoded frame to dst. It panics on a non-lease Type or
// an out-of-range NMembers, both programmer errors.
func (l *Lease) Append(dst []byte) []byte {
	if !IsLease(l.Type) || l.NMembers < 0 || l.NMembers > MaxMembers {
		panic(fmt.Sprintf("wire: lease frame of type %s with %d members", l.Type, l.NMembers))
	}
	if (l.Declined && l.Type != TypeLeaseRelease) || (l.Run != 0 && l.Type != TypeLeaseDeny) {
		panic(fmt.Sprintf("wire: declined flag or run on a %s", l.Type))
	}
	b, start := appendHeader(dst, l.Type, l.Origin, uint16(l.NMembers), l.Seq)
	if l.Declined {
		binary.LittleEndian.PutUint16(b[start+offFlags:], FlagDeclined)
	}
	b = binary.LittleEndian.AppendUint64(b, l.RequestID)
	b = binary.LittleEndian.AppendUint32(b, l.Holder)
	b = binary.LittleEndian.AppendUint32(b, l.Run)
	b = binary.LittleEndian.AppendUint64(b, l.DurationNs)
	b = binary.LittleEndian.AppendUint64(b, l.RemainingNs)
	b = binary.LittleEndian.AppendUint64(b, l.InSyncVersion)
	b = binary.LittleEndian.AppendUint64(b, l.History)
	for _, m := range l.Members[:l.NMembers] {
		b = binary.LittleEndian.AppendUint32(b, m)
	}
	return finish(b, start)
}

func validateLease(f *Frame) error {
	if f.Count > MaxMembers {
		return fmt.Errorf("%w: %s with %d members (max %d)", ErrCount, f.Type, f.Count, MaxMembers)
	}
	if len(f.Payload) != leaseFixedLen+4*int(f.Count) {
		return fmt.Errorf("%w: %s payload %d bytes for %d members", ErrLength, f.Type, len(f.Payload), f.Count)
	}
	if r := binary.LittleEndian.Uint32(f.Payload[12:]); r != 0 && f.Type != TypeLeaseDeny {
		return fmt.Errorf("%w: %s reserved word %#x", ErrFlags, f.Type, r)
	}
	return nil
}

// DecodeLease reads a parsed lease-protocol frame.
func DecodeLease(f *Frame) (Lease, error) {
	if !IsLease(f.Type) {
		return Lease{}, fmt.Errorf("%w: %s is not a lease frame", ErrType, f.Type)
	}
	p := f.Payload
	l := Lease{
		Type:          f.Type,
		Origin:        f.Origin(),
		Seq:           f.Seq,
		RequestID:     binary.LittleEndian.Uint64(p),
		Holder:        binary.LittleEndian.Uint32(p[8:]),
		Run:           binary.LittleEndian.Uint32(p[12:]),
		DurationNs:    binary.LittleEndian.Uint64(p[16:]),
		RemainingNs:   binary.LittleEndian.Uint64(p[24:]),
		InSyncVersion: binary.LittleEndian.Uint64(p[32:]),
		History:       binary.LittleEndian.Uint64(p[40:]),
		NMembers:      int(f.Count),
		Declined:      f.Flags&FlagDeclined != 0,
	}
	for i := 0; i < l.NMembers; i++ {
		l.Members[i] = binary.LittleEndian.Uint32(p[leaseFixedLen+4*i:])
	}
	return l, nil
}
