package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seqbus/seqbus/internal/cluster"
)

// Disk stalls: a filesystem frozen (the FIFREEZE ioctl, through
// fsfreeze), so every write and fsync to it blocks until it is thawed,
// with no error to act on: what a SAN path failover, a cloud volume's
// I/O hang or a saturated device does to its writers. Reads of what is
// cached go on. A node whose journal write blocks stops in the middle of
// its pass (its agent, the lease renewals with it); the fsync thread and
// the status writer block as well. The witness blocks on what it must
// persist before it answers (a new epoch, an in-sync set).

// stallFaults are the disk faults that freeze rather than fill.
var stallFaults = []string{StallPrimaryDisk, StallStandbyDisk, StallWitnessDisk}

// thawGuard is how long past a stall's hold a guard process thaws the
// filesystem on its own: should this process die in the middle of a
// stall, the nodes blocked on the frozen filesystem (unkillable until it
// thaws) do not outlive it.
const thawGuard = 10 * time.Second

// stall freezes the filesystem on dir for st.hold and thaws it.
func (r *run) stall(ctx context.Context, st step, dir, who string) (string, error) {
	return holdFor(ctx, st.hold, fmt.Sprintf("%s: freeze %s disk", st.fault, who), func() (func() error, error) {
		return freeze(dir, st.hold+thawGuard)
	})
}

// holdFor starts a fault (start returns the call that ends it), waits
// hold (or for ctx) and ends it; the line says how long it held.
func holdFor(ctx context.Context, hold time.Duration, line string, start func() (end func() error, err error)) (string, error) {
	t0 := time.Now()
	end, err := start()
	if err != nil {
		return line, err
	}
	sleep(ctx, hold)
	if err := end(); err != nil {
		return line, err
	}
	return fmt.Sprintf("%s for %v", line, time.Since(t0).Round(time.Millisecond)), nil
}

// startGuard starts a process of the run's own that runs script (sh, with
// args as $0, $1, ...) after d: the undoing of a fault, should this
// process die before it undoes it itself. stop ends the guard.
func startGuard(d time.Duration, script string, args ...string) (stop func(), err error) {
	g := exec.Command("/bin/sh", append([]string{"-c", "sleep " + strconv.FormatFloat(d.Seconds(), 'f', 3, 64) + "; " + script}, args...)...)
	if err := g.Start(); err != nil {
		return nil, err
	}
	return func() {
		_ = g.Process.Kill() // ours, by pid
		_ = g.Wait()
	}, nil
}

// freeze freezes the filesystem mounted on dir and returns the call that
// thaws it. A guard thaws it guard later should the call never come (this
// process killed in the middle of a stall); thaw ends the guard.
func freeze(dir string, guard time.Duration) (thaw func() error, err error) {
	stop, err := startGuard(guard, `exec fsfreeze --unfreeze "$0"`, dir)
	if err != nil {
		return nil, err
	}
	if err := runTool("fsfreeze", "--freeze", dir); err != nil {
		stop()
		return nil, err
	}
	return func() error {
		defer stop()
		return runTool("fsfreeze", "--unfreeze", dir)
	}, nil
}

// afterStall waits for the cluster to be whole after a stall of primary
// p's disk and says who leads: p at its epoch (a stall shorter than its
// lease) or a standby promoted meanwhile.
func (r *run) afterStall(ctx context.Context, line string, p uint32, epoch uint64) (string, error) {
	t0 := time.Now()
	if why, err := r.untilWhole(ctx); err != nil {
		if ctx.Err() != nil {
			return line, nil
		}
		return line + "; not whole again", fmt.Errorf("the cluster did not recover within %v of a stall of node%d's disk: %s", RecoverMax, p, why)
	}
	id, st := r.Primary()
	if id == p && st.Epoch == epoch {
		return fmt.Sprintf("%s; node%d leads on at epoch %d (answers %v after the thaw)", line, p, epoch, time.Since(t0).Round(time.Millisecond)), nil
	}
	return fmt.Sprintf("%s; node%d leads epoch %d (whole %v after the thaw)", line, id, st.Epoch, time.Since(t0).Round(time.Millisecond)), nil
}

// Writeback hangs: node id's process is moved to a blkio cgroup of the
// run's own whose writes to the node's filesystem's device are throttled
// to a byte a second, for st.hold. The cgroup v1 throttle applies to the
// I/O the process itself submits: its buffered writes still land in the
// page cache at once, but an fsync, which submits the dirty pages and
// waits for them, blocks until the throttle is lifted. A guard process
// lifts it thawGuard after the hold should this process die meanwhile.

// blkioRoot is the cgroup v1 blkio hierarchy (a variable for the tests).
var blkioRoot = "/sys/fs/cgroup/blkio"

// hangFaults need the blkio controller besides what every disk fault
// needs.
var hangFaults = []string{HangPrimaryFsync, HangStandbyFsync, HangWitnessFsync}

// CheckHang says why this process cannot hang a node's writeback (nil
// when it can): what CheckDisk says, or no cgroup v1 blkio controller (a
// host with cgroup v2 only). The disk and all groups leave the hang
// faults out then (ParseFaults); named, they are refused.
func CheckHang() error {
	if err := CheckDisk(); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(blkioRoot, "blkio.throttle.write_bps_device")); err != nil {
		return fmt.Errorf("the hang faults (%s) need the cgroup v1 blkio controller at %s: %v", strings.Join(hangFaults, ", "), blkioRoot, err)
	}
	return nil
}

// hang hangs node id's writeback (the witness's, id 0) to the filesystem
// on dir for st.hold.
func (r *run) hang(ctx context.Context, st step, id uint32, dir, who string) (string, error) {
	line := fmt.Sprintf("%s: hang %s writeback", st.fault, who)
	name := "witness"
	if id != 0 {
		name = cluster.NodeName(id)
	}
	c := r.Get(name)
	if c == nil {
		return line, fmt.Errorf("%s is not running", name)
	}
	var fi unix.Stat_t
	if err := unix.Stat(dir, &fi); err != nil {
		return line, err
	}
	dev := fmt.Sprintf("%d:%d", unix.Major(fi.Dev), unix.Minor(fi.Dev))
	group := fmt.Sprintf("seqbus-chaos-%d-%s", os.Getpid(), name)
	return holdFor(ctx, st.hold, line, func() (func() error, error) {
		return throttle(group, dev, c.Pid(), st.hold+thawGuard)
	})
}

// throttle moves pid into a new blkio cgroup named name whose writes to
// device dev (major:minor) are throttled to a byte a second, and returns
// the call that lifts the throttle, moves pid back and removes the
// cgroup. A guard process does the same guard later should the call
// never come.
func throttle(name, dev string, pid int, guard time.Duration) (lift func() error, err error) {
	cg := filepath.Join(blkioRoot, name)
	limit := filepath.Join(cg, "blkio.throttle.write_bps_device")
	if err := os.Mkdir(cg, 0o755); err != nil {
		return nil, err
	}
	stop, err := startGuard(guard, `echo "$1 0" > "$0/blkio.throttle.write_bps_device"; for p in $(cat "$0/cgroup.procs"); do echo "$p" > "$2/cgroup.procs"; done; rmdir "$0"`, cg, dev, blkioRoot)
	if err != nil {
		_ = os.Remove(cg)
		return nil, err
	}
	lift = func() error {
		err := os.WriteFile(limit, []byte(dev+" 0"), 0)
		stop()
		// Back to the root group, pid and whatever it started meanwhile
		// (a process may have exited: no error then), and the group goes
		// once empty.
		if rerr := removeGroup(cg, pid); err == nil {
			err = rerr
		}
		return err
	}
	if err := os.WriteFile(limit, []byte(dev+" 1"), 0); err != nil {
		_ = lift()
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		_ = lift()
		return nil, err
	}
	return lift, nil
}

// removeGroupTries bounds removeGroup's wait for an emptied group to go:
// an exiting task leaves its cgroup a moment after it left cgroup.procs.
const removeGroupTries = 100

// removeGroup moves pid and every process left in the blkio cgroup cg
// back to the root group and removes cg, retrying every 10 ms while the
// kernel still counts a task in it (EBUSY), at most removeGroupTries
// times: then it says so.
func removeGroup(cg string, pid int) error {
	root := filepath.Join(blkioRoot, "cgroup.procs")
	for i := 0; ; i++ {
		_ = os.WriteFile(root, []byte(strconv.Itoa(pid)), 0)
		if procs, err := os.ReadFile(filepath.Join(cg, "cgroup.procs")); err == nil {
			for _, p := range strings.Fields(string(procs)) {
				_ = os.WriteFile(root, []byte(p), 0)
			}
		}
		err := os.Remove(cg)
		switch {
		case err == nil, errors.Is(err, os.ErrNotExist):
			return nil
		case !errors.Is(err, unix.EBUSY):
			return err
		case i+1 == removeGroupTries:
			return fmt.Errorf("blkio group %s still busy after %d tries: %w", cg, removeGroupTries, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
