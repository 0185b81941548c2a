package journal

import (
	"fmt"
	"io"
)

// OpenSnapshotReadOnly opens the snapshot at seq in dir for reading
// without changing anything (every access goes through ReadOnly), as the
// inspection tools do: it returns the snapshot's epoch and a reader of the
// decompressed state, which returns ErrCorrupt instead of io.EOF when the
// state does not match its recorded length and CRC. The caller closes it.
// Inspect lists the snapshots and which of them verify.
func OpenSnapshotReadOnly(fsys FS, dir string, seq uint64) (epoch uint64, r io.ReadCloser, err error) {
	j := &Journal{fs: ReadOnly(fsys), dir: dir}
	sr, err := j.openSnapshot(snapshotName(seq))
	if err != nil {
		return 0, nil, err
	}
	if sr.seq != seq {
		sr.Close()
		return 0, nil, &CorruptError{File: snapshotName(seq), Reason: fmt.Sprintf("header says seq %d, name says %d", sr.seq, seq)}
	}
	return sr.epoch, sr, nil
}
