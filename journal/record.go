package journal

import (
	"encoding/binary"
	"hash/crc32"
)

// Record layout, little endian, no padding:
//
//	offset size field
//	0      4    payload length in bytes
//	4      4    CRC32C over bytes 0..4 and 8..end (length, epoch, seq, payload)
//	8      8    epoch
//	16     8    seq (never 0, so a valid header is never all zeros)
//	24     n    payload
//
// Segments are preallocated with zeros, so an all-zero header marks the end
// of the written data.
const recordHeaderBytes = 24

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func recordCRC(record []byte) uint32 {
	crc := crc32.Update(0, castagnoli, record[0:4])
	return crc32.Update(crc, castagnoli, record[8:])
}

// encodeRecord writes the record into dst, which must have room for
// recordHeaderBytes+len(payload) bytes, and returns the record length.
func encodeRecord(dst []byte, epoch, seq uint64, payload []byte) int {
	n := recordHeaderBytes + len(payload)
	rec := dst[:n]
	binary.LittleEndian.PutUint32(rec[0:4], uint32(len(payload)))
	binary.LittleEndian.PutUint64(rec[8:16], epoch)
	binary.LittleEndian.PutUint64(rec[16:24], seq)
	copy(rec[recordHeaderBytes:], payload)
	binary.LittleEndian.PutUint32(rec[4:8], recordCRC(rec))
	return n
}

type recordHeader struct {
	payloadBytes int64
	crc          uint32
	epoch        uint64
	seq          uint64
}

func decodeHeader(hdr []byte) recordHeader {
	return recordHeader{
		payloadBytes: int64(binary.LittleEndian.Uint32(hdr[0:4])),
		crc:          binary.LittleEndian.Uint32(hdr[4:8]),
		epoch:        binary.LittleEndian.Uint64(hdr[8:16]),
		seq:          binary.LittleEndian.Uint64(hdr[16:24]),
	}
}

func allZero(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// firstNonZero returns the index of the first non-zero byte of b, or -1.
func firstNonZero(b []byte) int {
	i := 0
	for ; i+8 <= len(b); i += 8 {
		if binary.LittleEndian.Uint64(b[i:]) != 0 {
			break
		}
	}
	for ; i < len(b); i++ {
		if b[i] != 0 {
			return i
		}
	}
	return -1
}
