// Package auth authenticates seqbus frames: HMAC-SHA256 tags truncated to
// 16 bytes, keys derived per stream and per epoch from one master key with
// HKDF-SHA256, bounded caches of pre-keyed MAC states so that a frame costs
// one HMAC and no allocation, and a sliding-window replay filter. It has no
// opinion about frame layout (package wire owns that) and, apart from
// keyfile.go, no I/O: no clock, socket, goroutine or file.
//
// # What is authenticated, and what is not
//
// With a key configured, every frame of every type carries a tag over its
// whole header and payload. A receiver that verifies it knows the frame was
// produced by a holder of the cluster's master key, unchanged, for this
// stream, under this epoch (replication frames) or for this node pair
// (lease frames). That stops forged, altered and cross-stream frames, old
// epochs' frames once their key has left the Keyring, and lease replies
// redirected to another node.
//
// Not provided:
//   - Confidentiality. Frames are readable by anyone on the venue LAN; this
//     package signs, it does not encrypt.
//   - Per-node or per-client identity. Every node of a stream shares the
//     data key, and every client shares the client key, so the header's node
//     ID is integrity-protected but not proven: a holder of the master key
//     can sign as anyone. The master key is a cluster secret; protect it as
//     one (LoadKeyFile refuses group- or world-accessible files).
//   - Availability. A flood of forged frames is dropped cheaply (a CRC and
//     one HMAC each, no allocation), but it still uses the link and CPU.
//   - Replay on its own. A valid frame replayed is still valid; see Replay
//     below for what stops which replays.
//
// # Key hierarchy
//
//	master key (32 bytes from crypto/rand, the key file; signs nothing)
//	 ├─ DataKey(master, stream, epoch)   info "seqbus data v1"   0 stream epoch
//	 ├─ LeaseKey(master, stream, node)   info "seqbus lease v1"  0 stream node
//	 └─ ClientKey(master, stream)        info "seqbus client v1" 0 stream
//
// Each is HKDF-SHA256 (crypto/hkdf, RFC 5869) of the master key with no
// salt and the info string shown: the label, a zero byte, and fixed-width
// little-endian fields. Labels and info lengths all differ, so keys of
// different kinds cannot coincide.
//
// Which key signs which frame type. The epoch is the header's epoch field,
// except for a RETRANSMIT: it carries the (possibly much older) epoch its
// records were sequenced in, and is signed under its sender's current
// epoch, so a node refetching history needs no old epoch's key and a
// captured RETRANSMIT of an old epoch verifies under nothing current. A
// verifier takes a RETRANSMIT below the highest epoch it accepted under
// that epoch's key, and counts one whose tag fails there as an unknown
// key (it names no signing epoch).
// The node of a lease key is the requesting node: the header's node ID in a
// request, and the receiving node's own ID in a reply (a reply's header
// carries the witness's ID).
//
//	frame types                                    key                      held in
//	DATA HEARTBEAT RETRANSMIT HASH NEW_EPOCH       DataKey(stream, epoch)   Keyring
//	NEED_SNAPSHOT SNAPSHOT_REQUEST SNAPSHOT_CHUNK
//	NAK ACK
//	LEASE_ACQUIRE LEASE_RENEW and the LEASE_GRANT  LeaseKey(stream, node)   PeerRing (witness),
//	LEASE_DENY answering them; a node's                                     MAC (node)
//	LEASE_QUERY and its LEASE_INFO
//	a client's or tool's LEASE_QUERY and its       ClientKey(stream)        MAC
//	LEASE_INFO; COMMAND, OUTPUT (market data too)
//
// A witness verifies a LEASE_QUERY under the PeerRing when the header's
// node is a configured peer and under ClientKey otherwise, and answers
// under the key that verified it. A node applies the table through Frames:
// Seal, Verify (with the bounded derivation of a new epoch's key, or of
// the highest accepted epoch's again after a restart: keys live in memory)
// and Fresh (the DATA replay window below).
//
// # Rotation
//
// Per-epoch data keys rotate by themselves: every failover raises the epoch,
// and with it the key. A Keyring holds the current epoch and at most
// KeyringEpochs-1 before it; RetireBelow drops old ones once a failover has
// settled. Lease and client keys change only with the master key. A new
// master key means a restart of the whole cluster (nodes, witness, clients)
// with the new file: this version carries no key identifier on the wire and
// accepts one master key at a time (the key file's version tag leaves room
// for a key id later).
//
// # Wire placement (proposal for the wire package)
//
//  1. Flags bit 0 (0x0001, FlagMAC) says a tag is present; other flag bits
//     stay reserved and refused.
//  2. The frame on the wire is header (40) | payload (Length) | tag (16).
//     Length keeps its meaning, payload bytes only, without the tag: every
//     type's payload validation in Parse stays as it is, and a receiver
//     without auth refuses FlagMAC (ErrFlags) instead of misreading the tag
//     as payload. The frame occupies HeaderLen + Length + TagLen bytes.
//  3. The CRC32C is computed as today, with FlagMAC already set, over
//     header bytes 0..36 and the payload. It does not cover the tag.
//  4. The tag is the MAC of bytes [0, HeaderLen+Length): the whole header,
//     CRC field included, and the payload. Including the CRC makes the
//     covered bytes one contiguous slice, so signing is one HMAC pass over
//     the finished frame, with no header copy, no zeroed field and no
//     allocation, and the encoder's order stays append → finish (CRC) →
//     Sign (tag). It weakens nothing: the CRC is a function of the other
//     covered bytes.
//  5. A receiver checks the CRC first and the tag second. The CRC is far
//     cheaper than the HMAC (see the benchmarks), and the order separates
//     two drop counters an operator needs apart: ErrChecksum is a damaged
//     frame, ErrBadMAC with a good CRC is a forged frame or a node with the
//     wrong key file.
//  6. No downgrade: a receiver with a key configured drops every frame
//     without FlagMAC (count it as a bad MAC), so stripping the tag and
//     clearing the flag does not get a frame through. A receiver without a
//     key drops FlagMAC frames (ErrFlags). A mixed cluster fails loudly.
//  7. Budgets shrink by TagLen: MaxPayloadLen is MaxFrameLen - HeaderLen -
//     TagLen for signed frames, and a Batch for a 1472-byte datagram must
//     stop at 1456 bytes of header and payload.
//  8. Suggested API: the encoder appends as today and the runtime calls
//     ring.Sign(b, b[start:], epoch); Parse accepts FlagMAC, requires
//     len(b) >= HeaderLen+Length+TagLen, returns n including the tag, and
//     exposes Frame.Signed (b[:HeaderLen+Length]) and Frame.Tag.
//
// # Replay
//
// Old epochs die at the MAC: once an epoch's key is out of the Keyring its
// frames fail with ErrUnknownKey, and frames of older epochs still in the
// ring are refused by the cores' highest-epoch rule (arbiter.Fence, the
// standby window). Within an epoch, the header's seq is not a per-frame
// counter for most types (a HEARTBEAT repeats its seq while idle, ACK and
// NAK repeat, RETRANSMIT reuses DATA's numbers), so a replay filter keyed on
// it would drop genuine frames. Those types are idempotent by protocol:
// DATA and RETRANSMIT are applied by seq with duplicates ignored, ACK and
// HEARTBEAT are maxima, NAKs are bounded by the primary's retransmit
// limits, HASH is a comparison, COMMANDs are deduplicated by (session,
// client order id). Where replay filtering applies:
//
//   - DATA at a standby: EpochFilter.Accept(epoch, first seq) after Verify
//     and before the standby core, as a cheap early drop (ReplayWindow says
//     how much reordering it tolerates; what it drops is NAKed and
//     retransmitted).
//   - Lease requests at the witness: the one replay that changes state. A
//     witness's reply cache answers only each node's last request ID from
//     the cache and decides any other afresh, so two captured LEASE_RENEWs
//     of a primary that has since died, replayed in turn every few hundred
//     milliseconds, keep extending its lease and block failover forever. Keep a Filter per
//     configured node over RequestID, checked after Verify and after the
//     reply-cache lookup (so a duplicated datagram of the last request is
//     still answered from the cache), before the arbiter decides.
//   - Lease replies at the node: no NonceTable is needed. arbiter.Keeper
//     already remembers its last MaxOutstandingRequests (8) request IDs and
//     consumes each on its first reply (takeOutstanding), and the pairwise
//     LeaseKey stops a reply from being forged or redirected. One gap
//     remains, and it needs a small change in arbiter: a Keeper numbers
//     requests from 1 in every process, so after a node restart a captured
//     grant to request 1 of an earlier run verifies and matches, and the
//     node believes it holds a lease under an old epoch. Seed the first
//     request ID from a value that grows across restarts, for example the
//     wall-clock nanoseconds the runtime reads once at start-up (64 bits of
//     nanoseconds last 584 years). The same seed keeps the witness's
//     per-node Filter working across node restarts. A witness restart
//     empties its filters; each captured request can then be replayed once,
//     costing at most one lease duration of liveness each, never a second
//     leader (persisting each node's highest request ID with the witness
//     state would close that too).
//
// # Concurrency and cost
//
// MAC, Keyring, PeerRing, Filter and EpochFilter hold mutable state and are
// not safe for concurrent use; give each goroutine that signs or verifies
// its own. On these 2-core machines (SHA-NI) one Sign or Verify costs about
// 0.28 µs for a 64-byte frame, 0.44 µs for 256 bytes and 1.3 µs for 1400
// bytes, with no allocation, against 0.02-0.16 µs for the CRC32C every
// frame already pays (bench_test.go). At 300k full datagrams a second that
// is about 0.4 of a core on each side: the MAC is the price of the feature,
// and packing many messages per datagram keeps it per datagram, not per
// message. Deriving a key and building its MAC costs about 4 µs and 27
// allocations, which is why it happens only in NewMAC, Install,
// VerifyInstall and NewPeerRing.
//
// # Usage contract
//
//  1. Load the master key once at start with LoadKeyFile (created by
//     Keygen); an error stops the process. Never log the key (its String
//     method redacts it, but its bytes do not).
//  2. Make one Keyring per stream per goroutine that signs or verifies
//     replication frames, one PeerRing (witness) or MAC (node) for lease
//     frames, and one MAC for client frames.
//  3. A primary calls Install(epoch) when it promotes, before its first
//     Sign; a standby calls Install for the epoch it starts in and learns
//     later ones with VerifyInstall, rate-limited, after Verify returned
//     ErrUnknownKey for an epoch above every epoch it accepted.
//  4. Send: encode the frame with FlagMAC set, then Sign appends the tag.
//  5. Receive: CRC (wire.Parse), then Verify with the key of the frame's
//     type, then the replay check, then the core. Nothing unverified may
//     reach a replay filter (it would let a forger slide the window) or a
//     core.
//  6. Sign, Verify and Accept do not allocate and return bare sentinel
//     errors: drop the frame and count the error.
package auth
