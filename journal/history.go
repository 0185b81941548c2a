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

// ReadHistoryID reads dir's history id: 0 and no error when the directory
// has none (new, or from before history ids), an error when the file
// cannot be read or does not hold an id.
func ReadHistoryID(fsys FS, dir string) (uint64, error) {
	f, err := fsys.OpenFile(dir+"/"+HistoryFile, os.O_RDONLY, 0)
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
		return 0, fmt.Errorf("%s: %w", HistoryFile, err)
	}
	id, perr := strconv.ParseUint(strings.TrimSpace(string(b[:n])), 16, 64)
	if perr != nil || id == 0 {
		return 0, fmt.Errorf("%s holds %q, not a history id", HistoryFile, b[:n])
	}
	return id, nil
}

// WriteHistoryID records id as dir's history id, durably: written to a
// temporary file, fsynced, renamed over HistoryFile, and the directory
// synced. An error means the id on disk is unknown.
func WriteHistoryID(fsys FS, dir string, id uint64) error {
	if id == 0 {
		return errors.New("journal: history id 0")
	}
	tmp := dir + "/" + HistoryFile + ".tmp"
	f, err := fsys.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "%016x\n", id)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, dir+"/"+HistoryFile)
	}
	if err != nil {
		return err
	}
	return fsys.SyncDir(dir)
}
