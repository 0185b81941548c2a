package chaos

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"time"

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
	line := fmt.Sprintf("%s: freeze %s disk", st.fault, who)
	start := time.Now()
	thaw, err := freeze(dir, st.hold+thawGuard)
	if err != nil {
		return line, err
	}
	sleep(ctx, st.hold)
	if err := thaw(); err != nil {
		return line, err
	}
	return fmt.Sprintf("%s for %v", line, time.Since(start).Round(time.Millisecond)), nil
}

// freeze freezes the filesystem mounted on dir and returns the call that
// thaws it. A guard process of its own thaws it guard later should the
// call never come (this process killed in the middle of a stall); thaw
// ends the guard.
func freeze(dir string, guard time.Duration) (thaw func() error, err error) {
	g := exec.Command("/bin/sh", "-c", "sleep "+strconv.FormatFloat(guard.Seconds(), 'f', 3, 64)+"; exec fsfreeze --unfreeze \"$0\"", dir)
	if err := g.Start(); err != nil {
		return nil, err
	}
	endGuard := func() {
		_ = g.Process.Kill() // ours, by pid
		_ = g.Wait()
	}
	if err := runTool("fsfreeze", "--freeze", dir); err != nil {
		endGuard()
		return nil, err
	}
	return func() error {
		defer endGuard()
		return runTool("fsfreeze", "--unfreeze", dir)
	}, nil
}

// afterStall waits for the cluster to be whole after a stall of primary
// p's disk and says who leads: p at its epoch (a stall shorter than its
// lease) or a standby promoted meanwhile.
func (r *run) afterStall(ctx context.Context, line string, p uint32, epoch uint64) (string, error) {
	t0 := time.Now()
	answered := r.load.Client.Stats().Answered
	why := ""
	err := cluster.Poll(ctx, RecoverMax, 20*time.Millisecond, func() bool {
		why = r.whole(answered)
		return why == ""
	})
	if err != nil {
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
