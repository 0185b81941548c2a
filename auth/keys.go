package auth

import (
	"bytes"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
)

// KeyLen is the size in bytes of a master key and of every derived key.
const KeyLen = 32

// keyFileTag is the first token of the key file's single line. The version
// lets a later format (another hash, a key id) be told apart instead of
// misread.
const keyFileTag = "seqbus-master-key v1 "

// KeyFileLen is the exact size of a key file written by FormatKeyFile: the
// tag, 64 hex digits and a newline. ParseKeyFile accepts it with or without
// the newline and nothing else; LoadKeyFile reads at most maxKeyFileLen.
const KeyFileLen = len(keyFileTag) + 2*KeyLen + 1

// maxKeyFileLen bounds what LoadKeyFile reads: anything longer than a key
// file plus a CR is not a key file.
const maxKeyFileLen = KeyFileLen + 1

// Domain-separation labels for HKDF-SHA256. Each derived key's info string
// is label || 0x00 || fixed-width little-endian fields. The labels differ,
// and so do the total info lengths (data 25, lease 22, client 19 bytes), so
// no key of one kind can equal a key of another kind.
const (
	labelData   = "seqbus data v1"
	labelLease  = "seqbus lease v1"
	labelClient = "seqbus client v1"
)

// MasterKey is the cluster's shared secret, loaded from the key file. Every
// key a frame is signed with is derived from it; it never signs anything
// itself. Its String and Format methods redact it, so no fmt verb in a log
// line can leak it.
type MasterKey [KeyLen]byte

// Key is a derived key: DataKey, LeaseKey or ClientKey. It is redacted
// like MasterKey.
type Key [KeyLen]byte

func (MasterKey) String() string { return "auth.MasterKey(redacted)" }

func (Key) String() string { return "auth.Key(redacted)" }

// Format redacts the key for every verb (%d, %x and %#v too, which String
// alone would not cover).
func (k MasterKey) Format(f fmt.State, _ rune) { io.WriteString(f, k.String()) }

// Format redacts the key for every verb.
func (k Key) Format(f fmt.State, _ rune) { io.WriteString(f, k.String()) }

// GenerateMasterKey reads KeyLen bytes from r, or from crypto/rand when r
// is nil. Tests pass a deterministic reader; production passes nil.
func GenerateMasterKey(r io.Reader) (MasterKey, error) {
	var k MasterKey
	if r == nil {
		r = rand.Reader
	}
	if _, err := io.ReadFull(r, k[:]); err != nil {
		return MasterKey{}, fmt.Errorf("%w: reading random bytes: %w", ErrKeyFile, err)
	}
	return k, nil
}

// FormatKeyFile returns the key file text for k: one line,
// "seqbus-master-key v1 " followed by 64 lowercase hex digits and "\n".
func FormatKeyFile(k MasterKey) []byte {
	b := make([]byte, 0, KeyFileLen)
	b = append(b, keyFileTag...)
	b = hex.AppendEncode(b, k[:])
	return append(b, '\n')
}

// ParseKeyFile parses the text of a key file. It accepts exactly the tag,
// 64 hex digits (either case) and an optional "\n" or "\r\n"; anything else
// is an error wrapping ErrKeyFile. The error never quotes the key material.
// An all-zero key is refused: it is what an unfilled buffer looks like, not
// what crypto/rand produces.
func ParseKeyFile(data []byte) (MasterKey, error) {
	var k MasterKey
	line, ok := bytes.CutSuffix(data, []byte("\r\n"))
	if !ok {
		line = bytes.TrimSuffix(data, []byte("\n"))
	}
	// Anything else (a second line, spaces, a BOM) makes the length or the
	// hex check below fail.
	rest, ok := bytes.CutPrefix(line, []byte(keyFileTag))
	if !ok {
		return MasterKey{}, fmt.Errorf("%w: does not start with %q", ErrKeyFile, keyFileTag)
	}
	if len(rest) != 2*KeyLen {
		return MasterKey{}, fmt.Errorf("%w: key is %d characters, want %d hex digits", ErrKeyFile, len(rest), 2*KeyLen)
	}
	if _, err := hex.Decode(k[:], rest); err != nil {
		return MasterKey{}, fmt.Errorf("%w: key is not hex", ErrKeyFile)
	}
	if k == (MasterKey{}) {
		return MasterKey{}, fmt.Errorf("%w: key is all zeros", ErrKeyFile)
	}
	return k, nil
}

// DataKey is the key for every replication frame of stream under epoch:
// DATA, HEARTBEAT, NAK, ACK, RETRANSMIT, HASH, snapshot frames, NEW_EPOCH,
// NEED_SNAPSHOT. A new epoch means a new key, so a frame captured under an
// old epoch verifies under no key a current node holds once that epoch has
// left its Keyring.
func DataKey(master *MasterKey, stream uint16, epoch uint64) Key {
	var info [len(labelData) + 1 + 2 + 8]byte
	n := copy(info[:], labelData)
	n++ // the 0x00 separator
	binary.LittleEndian.PutUint16(info[n:], stream)
	binary.LittleEndian.PutUint64(info[n+2:], epoch)
	return derive(master, info[:])
}

// LeaseKey is the pairwise key between the witness and node for the lease
// protocol of stream (requests from node, the witness's replies to node).
// It does not change with the epoch: an acquire is sent before the node
// knows any epoch. Replies do not name their recipient in the header, so
// the pairwise key is what stops a grant meant for node 1 from being
// delivered to node 2. Freshness comes from the echoed request ID (see the
// package documentation).
func LeaseKey(master *MasterKey, stream uint16, node uint32) Key {
	var info [len(labelLease) + 1 + 2 + 4]byte
	n := copy(info[:], labelLease)
	n++
	binary.LittleEndian.PutUint16(info[n:], stream)
	binary.LittleEndian.PutUint32(info[n+2:], node)
	return derive(master, info[:])
}

// ClientKey is the key for client traffic of stream: COMMAND frames to the
// primary, OUTPUT frames from it (including the market-data group), and a
// client's LEASE_QUERY and the LEASE_INFO answering it. It is one key per
// stream, shared by every client and both nodes, and it does not change
// with the epoch (clients follow the primary across failovers). It proves a
// frame came from a holder of the master key, not which client sent it.
func ClientKey(master *MasterKey, stream uint16) Key {
	var info [len(labelClient) + 1 + 2]byte
	n := copy(info[:], labelClient)
	n++
	binary.LittleEndian.PutUint16(info[n:], stream)
	return derive(master, info[:])
}

// derive is HKDF-SHA256 (RFC 5869) with no salt: the master key is already
// uniformly random, so extraction only has to be the standard one.
func derive(master *MasterKey, info []byte) Key {
	b, err := hkdf.Key(sha256.New, master[:], nil, string(info), KeyLen)
	if err != nil {
		// hkdf.Key fails only for lengths over 255*32 bytes or under FIPS
		// 140-only mode with a short key; neither can happen with 32 bytes.
		panic(fmt.Sprintf("auth: HKDF-SHA256 failed: %v", err))
	}
	var k Key
	copy(k[:], b)
	return k
}
