package journal

import (
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
)

// The journal directory's durable flags a node keeps beside its journal:
// the refetch marker, the new-directory and joined markers, and the sets
// of files put aside as corrupt.
// They are functions over the FS seam, so the simulator's MemFS crashes
// them like any journal file; what to do about a failure (stop leading,
// log, count) is the caller's decision.

// RefetchMarker is the name of the file that, present in a journal
// directory, says the node threw its history away and has not yet caught
// up with a primary. It survives a crash, so a restarted node that is
// still in the in-sync set does not ask for the lease with an empty or
// partial state (sim bug E). Open and Inspect ignore it.
const RefetchMarker = "REFETCHING"

// LockFileName is the lock file a node's storage holds in its journal
// directory while it runs (package storage): a second node on the
// directory is refused. SetAside leaves it where it is, so the lock the
// running process holds stays the one the next process meets.
const LockFileName = "node.lock" // dirlock.NodeLockName (storage TestLockNames)

// NewDirMarker is the name of the file that, present in a journal
// directory, says the directory was empty when its node first opened it
// and the node has since neither led nor caught up with a primary: it
// holds nothing anybody relies on. Its absence, once JoinedMarker is
// written, is what lets the node lead an epoch above the first (package
// storage: a directory replaced or wiped while its node was in the
// in-sync set must not lead with an empty history).
const NewDirMarker = "NEW-DIRECTORY"

// JoinedMarker is the name of the file that says the directory's node
// led, or caught up with a primary, at least once: a directory holding it
// is never taken for a new one, even with no record in it.
const JoinedMarker = "JOINED"

// SetRefetchMarker creates (on) or removes (off) the refetch marker in dir
// durably (SetMarker).
func SetRefetchMarker(fsys FS, dir string, on bool) error {
	return SetMarker(fsys, dir, RefetchMarker, on)
}

// SetMarker creates (on) or removes (off) the marker file name in dir
// durably: the file is created and fsynced, or removed (a missing one is
// not an error), and then the directory is synced. An error means the
// marker's state on disk is unknown.
func SetMarker(fsys FS, dir, name string, on bool) error {
	path := dir + "/" + name
	var err error
	if on {
		var f File
		if f, err = fsys.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			if err = f.Sync(); err == nil {
				err = f.Close()
			} else {
				f.Close()
			}
		}
	} else if err = fsys.Remove(path); errors.Is(err, os.ErrNotExist) {
		err = nil
	}
	if err != nil {
		return err
	}
	return fsys.SyncDir(dir)
}

// HasRefetchMarker reports whether dir holds the refetch marker. A
// directory that cannot be read has none.
func HasRefetchMarker(fsys FS, dir string) bool {
	names, err := fsys.ReadDir(dir)
	return err == nil && slices.Contains(names, RefetchMarker)
}

// HoldsHistory reports whether the names of a journal directory's files
// show any history: a segment, a snapshot, a set put aside or the refetch
// marker (a node lock, the spare segment, a status file or anything else
// are not history).
func HoldsHistory(names []string) bool {
	for _, name := range names {
		if _, ok := parseSegmentName(name); ok {
			return true
		}
		if _, ok := parseSnapshotName(name); ok {
			return true
		}
		if name == RefetchMarker || strings.Contains(name, AsideMarker) {
			return true
		}
	}
	return false
}

// SetAside renames every file in dir but the markers (refetch, new
// directory, joined), the history id (HistoryFile), the fence (FenceFile), the spare
// segment (SpareSegmentName: no record, reused) and the files already set
// aside with the suffix AsideMarker+"<nowUnix>" (kept for an operator's
// post-mortem; Open ignores them, so it then finds an empty journal),
// syncs the directory and returns how many it renamed. nowUnix is the
// wall clock in Unix seconds, passed in so that the journal reads no
// clock. On an error the files renamed so far are counted and stay
// renamed.
func SetAside(fsys FS, dir string, nowUnix int64) (int, error) {
	names, err := fsys.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	suffix := AsideMarker + strconv.FormatInt(nowUnix, 10)
	moved := 0
	for _, name := range names {
		if strings.Contains(name, AsideMarker) || name == RefetchMarker || name == NewDirMarker || name == JoinedMarker ||
			name == HistoryFile || name == FenceFile || name == SpareSegmentName || name == LockFileName {
			continue
		}
		from := dir + "/" + name
		if err := fsys.Rename(from, from+suffix); err != nil {
			return moved, err
		}
		moved++
	}
	return moved, fsys.SyncDir(dir)
}
