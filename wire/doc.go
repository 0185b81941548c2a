// Package wire is the seqbus frame format: a fixed 40-byte little-endian
// header followed by a type-specific payload, checksummed with CRC32C.
//
// Every frame, whatever its type, starts with the same header:
//
//	offset size field
//	0      2    magic        0x5342 ("SB")
//	2      1    version      1
//	3      1    type         DATA, HEARTBEAT, NAK, ...
//	4      2    flags        bit 0 FlagMAC: a 16-byte MAC tag follows the payload; other bits refused
//	6      2    stream id    which replicated stream this frame belongs to
//	8      4    node id      the sender
//	12     2    count        messages (DATA...), ranges (NAK), members (LEASE)
//	14     2    reserved     0
//	16     8    epoch        the sender's fencing epoch
//	24     8    seq          first seq (DATA), highest (HEARTBEAT, ACK), ...
//	32     4    length       payload bytes after the header
//	36     4    crc32c       over header bytes 0..36 and the payload
//
// The API has the quic-go shape: every frame type has Append(dst) that
// appends its encoding to dst and Len() that says how long it will be; Parse
// validates a whole frame (header, checksum and the payload layout of its
// type) and returns a Frame whose Payload aliases the input, plus the bytes
// consumed. Typed decoders (DecodeNak, DecodeLease, ...) read a parsed Frame
// without allocating. DATA frames are built with a Batch, which packs
// length-prefixed messages into one datagram up to a configured size
// (MoldUDP64 style: first seq + count), and read back with Messages.
//
// Usage contract:
//
//  1. Parse every datagram with Parse before looking at it; a non-nil error
//     is one of the sentinel errors below (wrapped with detail), never a
//     panic, and the datagram must be dropped and counted.
//  2. A Frame's Payload and every message slice yielded by Messages alias the
//     receive buffer: copy what you keep before the buffer is reused.
//  3. Encoders never allocate when dst has capacity; Parse, the decoders and
//     the message iterator never allocate.
//  4. Parse checks the layout of each type, so a decoder called on a frame
//     of the right type cannot fail and a Messages iterator cannot over-read.
package wire
