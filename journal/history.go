package journal

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// HistoryFile is the name of the file that holds the id of the history
// the directory's records belong to: made at random by the first node to
// lead the history, taken by every node that follows it (package replica,
// Identity), and the same for the history's life. Epoch numbers are not
// an identity: two clusters started apart both lead epoch 1, and a
// directory copied from one into the other would pass every epoch check.
// It holds the id as 16 hex digits and a newline. A corrupt journal set
// aside keeps it (SetAside): the node refetches the same history.
const HistoryFile = "HISTORY-ID"

// FenceFile is the name of the file that holds the highest epoch the
// directory's node led or followed, as soon as it does, before it
// releases or acknowledges anything under it. The journal's records
// carry their epochs, but a node that led (or followed) an epoch and
// crashed before it wrote a record of it would come back fenced at an
// older epoch; it could then follow a deposed primary's older epoch and
// cut records it had released under the newer one (sim seed 2634484).
// The file keeps the fence. SetAside keeps it too.
const FenceFile = "EPOCH-FENCE"

// ReadHistoryID reads dir's history id: 0 and no error when the directory
// has none (new, or from before history ids), an error when the file
// cannot be read or does not hold an id.
func ReadHistoryID(fsys FS, dir string) (uint64, error) { return readU64(fsys, dir, HistoryFile) }

// WriteHistoryID records id as dir's history id, durably (writeU64). An
// error means the id on disk is unknown.
func WriteHistoryID(fsys FS, dir string, id uint64) error {
	return writeU64(fsys, dir, HistoryFile, id)
}

// ReadFence reads dir's recorded epoch fence (FenceFile): 0 and no error
// when there is none.
func ReadFence(fsys FS, dir string) (uint64, error) { return readU64(fsys, dir, FenceFile) }

// WriteFence records epoch as dir's fence, durably (writeU64).
func WriteFence(fsys FS, dir string, epoch uint64) error {
	return writeU64(fsys, dir, FenceFile, epoch)
}

// readU64 reads the file name of dir, 16 hex digits and a newline: 0 and
// no error when it does not exist, an error when it cannot be read or
// does not hold a non-zero value.
func readU64(fsys FS, dir, name string) (uint64, error) {
	f, err := fsys.OpenFile(dir+"/"+name, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var b [32]byte
	n, err := f.ReadAt(b[:], 0)
	if n == 0 && err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	v, perr := strconv.ParseUint(strings.TrimSpace(string(b[:n])), 16, 64)
	if perr != nil || v == 0 {
		return 0, fmt.Errorf("%s holds %q, not a 16-hex-digit value", name, b[:n])
	}
	return v, nil
}

// writeU64 records v (not 0) in the file name of dir, durably: written to
// a temporary file, fsynced, renamed over name, and the directory synced.
func writeU64(fsys FS, dir, name string, v uint64) error {
	if v == 0 {
		return fmt.Errorf("journal: %s: value 0", name)
	}
	tmp := dir + "/" + name + ".tmp"
	f, err := fsys.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "%016x\n", v)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, dir+"/"+name)
	}
	if err != nil {
		return err
	}
	return fsys.SyncDir(dir)
}
