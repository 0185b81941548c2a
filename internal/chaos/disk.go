package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seqbus/seqbus/internal/cluster"
)

// Disk faults. They need filesystems of the run's own: with one of them in
// Config.Faults, Run starts the whole run again in a mount namespace of
// its own (unshare CLONE_NEWNS, private propagation, so nothing it mounts
// is seen outside), and gives every node's directory and the witness's
// its own small ext4 filesystem, a loop-mounted image file in the run's
// directory (a real filesystem: real fsync, real ENOSPC). A fault fills
// one of them to the last block, holds it full, and frees it. The nodes
// run with small journal segments (diskSegmentBytes): a journal
// preallocates each segment whole when it rolls to it, so a full disk
// fails the roll; with the default 64 MiB segments a run would rarely
// roll while the disk is full. They snapshot every diskSnapshotEvery
// commands for the same reason.
const (
	// FillPrimaryDisk fills the primary's filesystem for 0.3..3 s. A
	// journal that failed meanwhile (a roll, a write, an fsync) stops the
	// node releasing and sequencing for the rest of its life: its lease
	// lapses and a standby is promoted. Once the space is free, a node
	// whose status counts a journal or sync error is restarted, as an
	// operator would; one whose journal came through is left running.
	FillPrimaryDisk = "fill-primary-disk"
	// FillStandbyDisk fills a standby's filesystem for 0.3..3 s; as for
	// the primary, a standby whose journal failed (its acks stop, it
	// leaves the in-sync set) is restarted once the space is free.
	FillStandbyDisk = "fill-standby-disk"
	// FillWitnessDisk fills the witness's filesystem for 0.3..3 s: it
	// cannot persist a new epoch or in-sync set, so it grants neither
	// meanwhile, and renews what it granted. It is never restarted.
	FillWitnessDisk = "fill-witness-disk"
	// StallPrimaryDisk freezes the primary's filesystem (FIFREEZE, as
	// fsfreeze does: what a SAN or a cloud volume's I/O hang does to its
	// writers) for 0.2 s .. lease+1.5 s, then thaws it. Every write and
	// fsync to it blocks meanwhile, with no error: a stall shorter than
	// the lease may leave the primary leading once it thaws; a longer one
	// must not lose what a client saw, whoever leads after it (stall.go).
	StallPrimaryDisk = "stall-primary-disk"
	// StallStandbyDisk freezes a standby's filesystem for 0.2..3 s.
	StallStandbyDisk = "stall-standby-disk"
	// StallWitnessDisk freezes the witness's filesystem for 0.2..3 s.
	StallWitnessDisk = "stall-witness-disk"
	// HangPrimaryFsync hangs the primary's writeback for 0.3..4 s (its
	// process's writes to its filesystem's device throttled to a byte a
	// second, stall.go): writes still land in the page cache, every
	// fsync blocks. What a device that stopped completing writes does to
	// a node whose fsync runs on its own thread: the node runs on and
	// renews its lease, but nothing becomes durable.
	HangPrimaryFsync = "hang-primary-fsync"
	// HangStandbyFsync hangs a standby's writeback for 0.3..4 s.
	HangStandbyFsync = "hang-standby-fsync"
	// HangWitnessFsync hangs the witness's writeback for 0.3..4 s: its
	// persister blocks, so a new epoch or in-sync set waits for the
	// disk; the renewals, which persist nothing, go on.
	HangWitnessFsync = "hang-witness-fsync"
)

// DiskFaults are the faults that need root, a mount namespace and
// loop-mounted filesystems.
var DiskFaults = []string{FillPrimaryDisk, FillStandbyDisk, FillWitnessDisk, StallPrimaryDisk, StallStandbyDisk, StallWitnessDisk, HangPrimaryFsync, HangStandbyFsync, HangWitnessFsync}

const (
	// diskImageBytes is each filesystem's size (a sparse image: only
	// what is written takes room on the machine's disk).
	diskImageBytes = 256 << 20
	// diskSegmentBytes is the nodes' --segment-bytes in a run with disk
	// faults: 256 KiB rolls every second or two at the runs' rates.
	diskSegmentBytes = 256 << 10
	// diskSnapshotEvery is the nodes' --snapshot-every in a run with
	// disk faults: a snapshot every few seconds, so some are written, and
	// the journal compacted behind them, while a disk is full.
	diskSnapshotEvery = 20_000
	// fillName is the file a fault fills a filesystem with.
	fillName = "chaos-fill"
)

// needsDisk reports whether faults has a disk fault.
func needsDisk(faults []string) bool {
	for _, f := range faults {
		if slices.Contains(DiskFaults, f) {
			return true
		}
	}
	return false
}

// needsIsolation reports whether the run must start again in namespaces
// of its own (network or disk faults).
func needsIsolation(faults []string) bool { return needsNetwork(faults) || needsDisk(faults) }

// CheckDisk says why this process cannot run disk faults (nil when it
// can): they need root (a mount namespace, loop devices) and mkfs.ext4
// mount and fsfreeze (scripts/setup installs them).
func CheckDisk() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("the disk faults (%s) need root: a mount namespace of their own and loop-mounted filesystems", strings.Join(DiskFaults, ", "))
	}
	for _, tool := range []string{"mkfs.ext4", "mount", "umount", "fsfreeze"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("the disk faults need %s (scripts/setup installs it): %v", tool, err)
		}
	}
	return nil
}

// disks are the run's filesystems, by the directory each is mounted on.
type disks struct {
	mounted []string
}

// setUpDisks makes the namespace's mounts private and mounts a fresh
// ext4 filesystem on each of dirs, its image under imageDir.
func setUpDisks(imageDir string, dirs []string) (*disks, error) {
	if err := runTool("mount", "--make-rprivate", "/"); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(imageDir, 0o755); err != nil {
		return nil, err
	}
	d := &disks{}
	for _, dir := range dirs {
		img := filepath.Join(imageDir, filepath.Base(dir)+".img")
		if err := makeImage(img); err != nil {
			d.unmount()
			return nil, err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			d.unmount()
			return nil, err
		}
		if err := runTool("mount", "-o", "loop", img, dir); err != nil {
			d.unmount()
			return nil, err
		}
		d.mounted = append(d.mounted, dir)
	}
	return d, nil
}

// makeImage writes a sparse ext4 image with no blocks reserved for root
// (the nodes run as root here: a reserve would never fill).
func makeImage(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	err = f.Truncate(diskImageBytes)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return runTool("mkfs.ext4", "-q", "-F", "-m", "0", path)
}

// unmount unmounts every filesystem (the loop devices go with them),
// thawing each first in case a stall was cut short (a thawed one refuses
// the thaw, harmlessly).
func (d *disks) unmount() {
	for _, dir := range slices.Backward(d.mounted) {
		_ = exec.Command("fsfreeze", "--unfreeze", dir).Run()
		_ = runTool("umount", dir)
	}
	d.mounted = nil
}

// fill fills the filesystem mounted on dir to its last block with one
// file, and returns how many bytes it took.
func fill(dir string) (int64, error) {
	path := filepath.Join(dir, fillName)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	// The bulk at once, then block by block until the filesystem says
	// ENOSPC (what fallocate left for the extent tree, the last blocks).
	for n := int64(st.Bavail)*st.Bsize - 1<<20; n > 0; n -= 8 << 20 {
		err := unix.Fallocate(int(f.Fd()), 0, 0, n)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.ENOSPC) {
			return 0, fmt.Errorf("fill %s: %w", dir, err)
		}
	}
	off, _ := f.Seek(0, 2)
	block := make([]byte, 4096)
	for range (2 << 30) / len(block) { // bounded: the image is far smaller
		k, err := f.WriteAt(block, off)
		off += int64(k)
		if errors.Is(err, unix.ENOSPC) {
			return off, nil
		}
		if err != nil {
			return off, fmt.Errorf("fill %s: %w", dir, err)
		}
	}
	return off, fmt.Errorf("fill %s: no ENOSPC after %d bytes", dir, off)
}

// unfill frees what fill took.
func unfill(dir string) error { return os.Remove(filepath.Join(dir, fillName)) }

// diskDirs are the directories that get a filesystem of their own: every
// node's and, with the witness as the arbiter, the witness's.
func (r *run) diskDirs() []string {
	var dirs []string
	for _, id := range r.IDs() {
		dirs = append(dirs, r.NodeDir(id))
	}
	if r.cfg.arbiter() == ArbiterWitness {
		dirs = append(dirs, r.WitnessDir())
	}
	return dirs
}

// diskFault fills a filesystem for st.hold (a node's, with
// st.untilFailed, on until its journal fails, at most fillMax) and frees
// it, or freezes it for st.hold and thaws it (stall.go); then a node
// whose journal failed meanwhile is restarted, as an operator would
// (after the primary's, the run waits for a primary at a newer epoch).
func (r *run) diskFault(ctx context.Context, st step, p uint32, epoch uint64) (string, error) {
	if r.disks == nil {
		return st.fault, errors.New("a disk fault outside filesystems of the run's own")
	}
	id, dir, who := uint32(0), r.WitnessDir(), "the witness's"
	switch st.fault {
	case FillPrimaryDisk, StallPrimaryDisk, HangPrimaryFsync:
		id, who = p, fmt.Sprintf("node%d's (primary, epoch %d)", p, epoch)
	case FillStandbyDisk, StallStandbyDisk, HangStandbyFsync:
		id = r.standby(p, st.standby)
		who = fmt.Sprintf("node%d's", id)
	}
	if id != 0 {
		dir = r.NodeDir(id)
	}
	before := r.journalFailures(id)
	var line string
	var err error
	switch {
	case slices.Contains(stallFaults, st.fault):
		line, err = r.stall(ctx, st, dir, who)
	case slices.Contains(hangFaults, st.fault):
		line, err = r.hang(ctx, st, id, dir, who)
	default:
		line, err = r.fill(ctx, st, id, dir, who, before)
	}
	if err != nil || id == 0 {
		return line, err
	}
	if r.journalFailures(id) == before {
		if st.fault == StallPrimaryDisk || st.fault == HangPrimaryFsync {
			return r.afterStall(ctx, line, p, epoch)
		}
		return line + "; its journal came through, left running", nil
	}
	line += "; its journal failed: restarted"
	r.Dead[id] = true
	if _, err := r.Stop(cluster.NodeName(id), 5*time.Second); err != nil {
		line += " (SIGKILLed: no exit within 5 s of SIGTERM)"
	}
	if err := r.startNode(id); err != nil {
		return line, err
	}
	if id == p {
		return r.afterPrimaryFault(ctx, line, epoch)
	}
	return line, nil
}

// fill fills the filesystem on dir for st.hold, with st.untilFailed on
// until node id's journal failed (more failures than before), and frees
// it.
func (r *run) fill(ctx context.Context, st step, id uint32, dir, who string, before int) (string, error) {
	start := time.Now()
	warned := r.logLines(id, spareWarning)
	took, err := fill(dir)
	if err != nil {
		_ = unfill(dir)
		return fmt.Sprintf("%s: fill %s disk", st.fault, who), err
	}
	sleep(ctx, st.hold)
	if id != 0 && st.untilFailed {
		_ = cluster.Poll(ctx, fillMax-st.hold, 20*time.Millisecond, func() bool { return r.journalFailures(id) > before })
	}
	if err := unfill(dir); err != nil {
		return st.fault, err
	}
	line := fmt.Sprintf("%s: fill %s disk (%d MiB) for %v", st.fault, who, took>>20, time.Since(start).Round(time.Millisecond))
	if id != 0 && r.logLines(id, spareWarning) > warned {
		line += ", warned of the next segment first"
	}
	return line, nil
}

// spareWarning is the line a node logs when its journal cannot prepare
// the next segment (a segment before a full disk fails the journal).
const spareWarning = "JOURNAL CANNOT PREPARE ITS NEXT SEGMENT"

// fillMax bounds a disk fault that waits for the journal to fail: a
// segment rolls within a few seconds at any rate a run uses, and the
// journal fails at the second roll in a full disk at the latest (the
// first may take the segment prepared ahead).
const fillMax = 10 * time.Second

// journalFailures counts the journal failures node id logged (0 for the
// witness, id 0): its log is in the run's directory, not on the disk
// that fills, and every failure of its journal (a write, a roll, an
// fsync, at promotion too) is an ERROR line naming the journal.
func (r *run) journalFailures(id uint32) int {
	n := 0
	for _, line := range strings.Split(r.nodeLog(id), "\n") {
		if strings.Contains(line, "level=ERROR") && strings.Contains(line, "journal") {
			n++
		}
	}
	return n
}

// logLines counts the lines of node id's log (0: none for the witness)
// that hold text.
func (r *run) logLines(id uint32, text string) int { return strings.Count(r.nodeLog(id), text) }

// nodeLog is node id's log so far ("" for the witness, id 0, or a node
// not started).
func (r *run) nodeLog(id uint32) string {
	if id == 0 {
		return ""
	}
	c := r.Get(cluster.NodeName(id))
	if c == nil {
		return ""
	}
	return c.Log()
}
