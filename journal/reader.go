package journal

import (
	"errors"
	"io"
)

// errBeyondEnd means a read would cross the end of the scanned range: a
// format condition (a short tail), not an I/O error.
var errBeyondEnd = errors.New("journal: read beyond end")

// readChunkBytes is the read size: large enough to amortise the syscall
// over many records, small enough that a retransmit of a few records does
// not read far past them.
const readChunkBytes = 64 << 10

// chunkReader reads a file sequentially in chunks through one reusable
// buffer. The buffer grows only for a record larger than it, and that
// growth is bounded by the scanned range (a segment).
type chunkReader struct {
	file      File
	sizeBytes int64
	buf       []byte
	start     int64
	n         int
}

func (r *chunkReader) reset(f File, sizeBytes int64) {
	r.file, r.sizeBytes, r.start, r.n = f, sizeBytes, 0, 0
	if r.buf == nil {
		r.buf = make([]byte, readChunkBytes)
	}
}

// bytesAt returns file[off:off+want], valid until the next call.
func (r *chunkReader) bytesAt(off int64, want int) ([]byte, error) {
	if off < 0 || want < 0 || off+int64(want) > r.sizeBytes {
		return nil, errBeyondEnd
	}
	if off >= r.start && off+int64(want) <= r.start+int64(r.n) {
		i := int(off - r.start)
		return r.buf[i : i+want], nil
	}
	if want > len(r.buf) {
		r.buf = make([]byte, want)
	}
	n := int(min(int64(len(r.buf)), r.sizeBytes-off))
	m, err := r.file.ReadAt(r.buf[:n], off)
	if m < n {
		r.n = 0
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	r.start, r.n = off, n
	return r.buf[:want], nil
}

// nextNonZero returns the offset of the first non-zero byte at or after off.
func (r *chunkReader) nextNonZero(off int64) (int64, bool, error) {
	for off < r.sizeBytes {
		want := int(min(int64(readChunkBytes), r.sizeBytes-off))
		b, err := r.bytesAt(off, want)
		if err != nil {
			return 0, false, err
		}
		if i := firstNonZero(b); i >= 0 {
			return off + int64(i), true, nil
		}
		off += int64(want)
	}
	return 0, false, nil
}

// recordAt decodes and verifies the record at off. ok is false when the
// bytes there are not a valid record; err is set only for I/O errors.
func (r *chunkReader) recordAt(off int64) (h recordHeader, rec []byte, ok bool, err error) {
	hdr, err := r.bytesAt(off, recordHeaderBytes)
	if err == errBeyondEnd {
		return h, nil, false, nil
	}
	if err != nil {
		return h, nil, false, err
	}
	h = decodeHeader(hdr)
	if h.seq == 0 || h.payloadBytes > r.sizeBytes-off-recordHeaderBytes {
		return h, nil, false, nil
	}
	rec, err = r.bytesAt(off, recordHeaderBytes+int(h.payloadBytes))
	if err != nil {
		return h, nil, false, err
	}
	if recordCRC(rec) != h.crc {
		return h, nil, false, nil
	}
	return h, rec, true, nil
}
