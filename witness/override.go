package witness

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/internal/dirlock"
)

// Override is an operator's change of a stopped witness's record, for the
// in-sync rule's one dead end: the last holder is lost for good and no
// other node may be promoted (docs/witness.md, "When no node may be
// promoted"). Exactly one of Allow and Epoch is set.
type Override struct {
	// Allow: the nodes that may be promoted next, as the in-sync set
	// (arbiter.OverrideInSync). Needs a readable record.
	Allow []arbiter.NodeID
	// Epoch: rewrite the record at this epoch with no holder and no set,
	// so any node may acquire Epoch+1 after the quarantine
	// (arbiter.RewriteEpoch): for a corrupt or lost record. It must be
	// above every epoch any node or journal ever used.
	Epoch uint64
	// DryRun: say what would be written, write nothing.
	DryRun bool
}

// OverrideResult is what an override found and wrote.
type OverrideResult struct {
	Dir string
	// Found: a record was there; Corrupt: why it could not be read (nil:
	// it could, or there was none).
	Found   bool
	Corrupt error
	Before  arbiter.PersistentState
	After   arbiter.PersistentState
	Written bool
	// StatusEpoch is the highest epoch the witness's last status file
	// reported (0: none readable): a rewritten epoch must be above it too,
	// which guards a corrupt record's rewrite against a typo.
	StatusEpoch uint64
}

// statusEpoch is the highest epoch dir's status file reports (0: none).
func statusEpoch(dir string) uint64 {
	b, err := os.ReadFile(filepath.Join(dir, StatusFileName))
	if err != nil {
		return 0
	}
	var r StatusReport
	if json.Unmarshal(b, &r) != nil || r.Role != "witness" {
		return 0
	}
	return max(r.Epoch, r.DurableEpoch)
}

// ApplyOverride changes the record in dir as o says, holding the
// directory's lock: it fails while a witness runs on dir (stop it first).
// The new record is written as every record is (temp file, fsync, rename,
// directory fsync). Refusals wrap arbiter.ErrOverride, ErrCorruptState
// (Allow over an unreadable record) or dirlock.ErrLocked.
func ApplyOverride(dir string, o Override) (OverrideResult, error) {
	res := OverrideResult{Dir: dir}
	if (len(o.Allow) == 0) == (o.Epoch == 0) {
		return res, fmt.Errorf("%w: give the nodes to allow or a new epoch, exactly one", arbiter.ErrOverride)
	}
	if _, err := os.Stat(dir); err != nil {
		return res, fmt.Errorf("witness: state directory: %w", err)
	}
	lock, err := dirlock.Acquire(dir, LockFileName)
	if err != nil {
		return res, fmt.Errorf("witness: stop the witness on %s first: %w", dir, err)
	}
	defer lock.Release()
	store := &fileStore{dir: dir}
	res.StatusEpoch = statusEpoch(dir)
	res.Before, res.Found, err = store.Load()
	if errors.Is(err, ErrCorruptState) {
		res.Corrupt, err = err, nil
	}
	if err != nil {
		return res, err
	}
	switch {
	case o.Epoch != 0:
		known := res.StatusEpoch
		if res.Corrupt == nil {
			known = max(known, res.Before.Epoch)
		}
		res.After, err = arbiter.RewriteEpoch(known, o.Epoch)
	case res.Corrupt != nil:
		err = fmt.Errorf("%w (rewrite it with an epoch above every epoch used instead)", res.Corrupt)
	case !res.Found:
		err = fmt.Errorf("%w: %s holds no record: a fresh witness grants to any node", arbiter.ErrOverride, dir)
	default:
		res.After, err = arbiter.OverrideInSync(res.Before, o.Allow)
	}
	if err != nil || o.DryRun {
		return res, err
	}
	if err := store.Save(res.After); err != nil {
		return res, err
	}
	res.Written = true
	return res, nil
}

// Report is the result for an operator: the record before and after, and
// what the witness does with it on its next start.
func (r *OverrideResult) Report() string {
	var b strings.Builder
	switch {
	case r.Corrupt != nil:
		fmt.Fprintf(&b, "before: unreadable (%v)\n", r.Corrupt)
	case r.Found:
		fmt.Fprintf(&b, "before: %s\n", describeState(&r.Before))
	default:
		b.WriteString("before: no record\n")
	}
	fmt.Fprintf(&b, "after:  %s\n", describeState(&r.After))
	if !r.Written {
		b.WriteString("dry run: nothing written\n")
		return b.String()
	}
	who := "any node"
	if r.After.LastHolder != arbiter.NodeNone {
		who = fmt.Sprintf("node %d (the last holder) or %v", r.After.LastHolder, r.After.Members.Slice())
	}
	fmt.Fprintf(&b, "written to %s. Start the witness: after one lease of quarantine it grants epoch %d to %s.\n", r.Dir, r.After.Epoch+1, who)
	return b.String()
}

func describeState(s *arbiter.PersistentState) string {
	holder := "none"
	if s.LastHolder != arbiter.NodeNone {
		holder = fmt.Sprint(s.LastHolder)
	}
	return fmt.Sprintf("epoch %d, last holder %s, in-sync set version %d %v", s.Epoch, holder, s.InSyncVersion, s.Members.Slice())
}
