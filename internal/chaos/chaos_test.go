package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seqbus/seqbus/internal/cluster"
	"github.com/seqbus/seqbus/internal/flagcheck"
)

func TestParseFaults(t *testing.T) {
	// Without blkio the groups leave the hang faults out (TestHangNeedsBlkio).
	canHang := CheckHang() == nil
	runnable := func(faults []string) []string {
		return slices.DeleteFunc(slices.Clone(faults), func(f string) bool { return !canHang && slices.Contains(hangFaults, f) })
	}
	all, err := ParseFaults("all", ArbiterWitness)
	if err != nil || !slices.Equal(all, runnable(slices.DeleteFunc(slices.Clone(AllFaults), func(f string) bool { return f == KillEtcd }))) {
		t.Fatalf("all: %v %v", all, err)
	}
	etcd, err := ParseFaults("process,network", ArbiterEtcd)
	want := []string{KillPrimary, RestartPrimary, StopPrimary, KillStandby, StopStandby, PausePrimary, PauseStandby, KillEtcd, KillAll, IsolatePrimary, IsolateStandby, Loss}
	if err != nil || !slices.Equal(etcd, want) {
		t.Fatalf("process,network with etcd: %v %v, want %v", etcd, err, want)
	}
	for group, want := range map[string][]string{"process": ProcessFaults, "network": NetworkFaults, "disk": runnable(DiskFaults)} {
		if got, err := ParseFaults(group, ""); err != nil || !slices.Equal(got, want) {
			t.Fatalf("%s: %v %v", group, got, err)
		}
	}
	if got, err := ParseFaults("loss,process", ArbiterWitness); err != nil || len(got) != len(ProcessFaults)+1 || got[0] != Loss {
		t.Fatalf("loss,process: %v %v", got, err)
	}
	got, err := ParseFaults("kill-primary, pause-standby,kill-primary", ArbiterWitness)
	if err != nil || !slices.Equal(got, []string{KillPrimary, PauseStandby}) {
		t.Fatalf("list: %v %v", got, err)
	}
	for _, bad := range []string{"", "flood", "kill-primary,"} {
		if _, err := ParseFaults(bad, ArbiterWitness); err == nil || !strings.Contains(err.Error(), "unknown fault") {
			t.Errorf("ParseFaults(%q) = %v, want unknown fault", bad, err)
		}
	}
}

func TestConfigCheck(t *testing.T) {
	ok := Config{Nodes: 3, Duration: 30 * time.Second, Rate: 2000, Fsync: "group", Faults: ProcessFaults}
	if err := ok.Check(); err != nil {
		t.Fatalf("good config refused: %v", err)
	}
	for name, bad := range map[string]func(*Config){
		"--nodes":               func(c *Config) { c.Nodes = 1 },
		"--nodes 6":             func(c *Config) { c.Nodes = MaxNodes + 1 },
		"--rounds":              func(c *Config) { c.Rounds = -1 },
		"--rate":                func(c *Config) { c.Rate = 0 },
		"--duration":            func(c *Config) { c.Duration = MinDuration - time.Millisecond },
		"--fsync":               func(c *Config) { c.Fsync = "sometimes" },
		"--faults":              func(c *Config) { c.Faults = []string{"flood"} },
		"--faults kill-etcd":    func(c *Config) { c.Faults = []string{KillEtcd} },
		"--faults kill-witness": func(c *Config) { c.Arbiter, c.Faults = ArbiterEtcd, []string{KillWitness} },
		"--faults fill-witness-disk": func(c *Config) {
			c.Arbiter, c.Faults = ArbiterEtcd, []string{FillWitnessDisk}
		},
		"--arbiter": func(c *Config) { c.Arbiter = "zookeeper" },
	} {
		c := ok
		bad(&c)
		err := c.Check()
		if _, missing := os.Stat(cluster.EtcdBinary); c.Arbiter == ArbiterEtcd && missing != nil {
			continue // refused for --arbiter: no etcd here
		}
		if err == nil || !flagcheck.IsUsage(err) || !strings.Contains(err.Error(), strings.Fields(name)[0]) {
			t.Errorf("%s: got %v, want a usage error naming it", name, err)
		}
	}
}

// TestConfigCheckIsolated: the network faults and the disk faults are
// refused, naming --faults, where this process cannot run them (not root,
// or no nft, no mkfs.ext4), and accepted where it can. With nothing on
// the PATH they are refused even as root, so CI (root) checks the
// refusal too; the process faults still run.
func TestConfigCheckIsolated(t *testing.T) {
	for _, group := range []struct {
		fault string
		check func() error
	}{{Loss, CheckNetwork}, {FillStandbyDisk, CheckDisk}, {HangPrimaryFsync, CheckHang}} {
		t.Run(group.fault, func(t *testing.T) {
			c := Config{Nodes: 3, Duration: 30 * time.Second, Rate: 2000, Faults: []string{KillPrimary, group.fault}}
			refused := func(err error) bool {
				return err != nil && flagcheck.IsUsage(err) && strings.Contains(err.Error(), "--faults")
			}
			err := c.Check()
			if why := group.check(); why != nil {
				if !refused(err) {
					t.Fatalf("%s where it cannot run (%v): Check = %v, want a usage error naming --faults", group.fault, why, err)
				}
			} else if err != nil {
				t.Fatalf("%s as root with its tools: %v", group.fault, err)
			}
			t.Setenv("PATH", t.TempDir()) // no ip, nft, mkfs.ext4
			if err := c.Check(); !refused(err) {
				t.Fatalf("%s without its tools: Check = %v, want a usage error naming --faults", group.fault, err)
			}
			c.Faults = []string{KillPrimary}
			if err := c.Check(); err != nil {
				t.Fatalf("process faults without the tools: %v", err)
			}
		})
	}
}

// ownDisk moves the test's goroutine, and its thread for good, to a
// mount namespace of its own and mounts a small ext4 filesystem of its
// own there, as a disk fault's run does; it returns where. It skips
// without root or the tools (fails under CI).
func ownDisk(t *testing.T) string {
	t.Helper()
	if err := CheckDisk(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI must test the disk faults: %v", err)
		}
		t.Skipf("skipping: %v", err)
	}
	// This goroutine's thread moves to a mount namespace of its own and
	// stays locked to it (and ends with it: never unlocked), so the
	// tools it starts and every path it reads are that namespace's. The
	// cleanups run on it too.
	runtime.LockOSThread()
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		t.Fatalf("unshare: %v", err)
	}
	dir := t.TempDir()
	mnt := filepath.Join(dir, "node1")
	d, err := setUpDisks(filepath.Join(dir, "disks"), []string{mnt})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.unmount)
	return mnt
}

// On a host without the cgroup v1 blkio controller (cgroup v2 only) the
// disk and all groups leave the hang faults out, and a hang fault named
// is refused with a usage error naming --faults; the other disk faults
// stay.
func TestHangNeedsBlkio(t *testing.T) {
	if err := CheckDisk(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI must test the disk faults: %v", err)
		}
		t.Skipf("skipping: %v", err)
	}
	saved := blkioRoot
	blkioRoot = t.TempDir() // no controller there
	defer func() { blkioRoot = saved }()
	for _, group := range []string{"disk", "all"} {
		faults, err := ParseFaults(group, ArbiterWitness)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(faults, HangPrimaryFsync) || slices.Contains(faults, HangStandbyFsync) || !slices.Contains(faults, StallPrimaryDisk) {
			t.Fatalf("%s without blkio: %v; want the hang faults out, the others in", group, faults)
		}
	}
	c := Config{Nodes: 3, Duration: 30 * time.Second, Rate: 2000, Faults: []string{HangPrimaryFsync}}
	if err := c.Check(); err == nil || !flagcheck.IsUsage(err) || !strings.Contains(err.Error(), "--faults") || !strings.Contains(err.Error(), "blkio") {
		t.Fatalf("a hang fault named without blkio: Check = %v, want a usage error naming --faults and blkio", err)
	}
	c.Faults = []string{StallPrimaryDisk}
	if err := c.Check(); err != nil {
		t.Fatalf("a stall without blkio: %v", err)
	}
}

// TestFill fills a small filesystem of the test's own to its last block
// and frees it: what a disk fault does to a node's directory.
func TestFill(t *testing.T) {
	mnt := ownDisk(t)
	if err := os.WriteFile(filepath.Join(mnt, "before"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	took, err := fill(mnt)
	if err != nil {
		t.Fatal(err)
	}
	if took < diskImageBytes/2 {
		t.Fatalf("fill took %d bytes of a %d-byte filesystem", took, diskImageBytes)
	}
	if err := os.WriteFile(filepath.Join(mnt, "during"), make([]byte, 64<<10), 0o644); !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("a write to a full filesystem: %v, want ENOSPC", err)
	}
	if err := unfill(mnt); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mnt, "after"), make([]byte, 64<<10), 0o644); err != nil {
		t.Fatalf("a write after the fill was freed: %v", err)
	}
}

// holds are each fault's hold range, [lo, hi), with a 1 s lease.
var holds = map[string][2]time.Duration{
	KillPrimary:     {0, time.Second},
	StopPrimary:     {0, time.Second},
	RestartPrimary:  {0, 1},
	KillStandby:     {0, 2 * time.Second},
	StopStandby:     {0, 2 * time.Second},
	PausePrimary:    {1200 * time.Millisecond, 2 * time.Second},
	PauseStandby:    {50 * time.Millisecond, 1500 * time.Millisecond},
	KillWitness:     {0, 1500 * time.Millisecond},
	KillAll:         {0, time.Second},
	KillEtcd:        {0, 3 * time.Second},
	IsolatePrimary:  {1200 * time.Millisecond, 2500 * time.Millisecond},
	IsolateStandby:  {200 * time.Millisecond, 3 * time.Second},
	IsolateWitness:  {200 * time.Millisecond, 2 * time.Second},
	Loss:            {time.Second, 4 * time.Second},
	FillPrimaryDisk: {300 * time.Millisecond, 3 * time.Second},
	FillStandbyDisk: {300 * time.Millisecond, 3 * time.Second},
	FillWitnessDisk: {300 * time.Millisecond, 3 * time.Second},
	// StallPrimaryDisk: up to the lease and 1.5 s.
	StallPrimaryDisk: {200 * time.Millisecond, 2500 * time.Millisecond},
	StallStandbyDisk: {200 * time.Millisecond, 3 * time.Second},
	StallWitnessDisk: {200 * time.Millisecond, 3 * time.Second},
	HangPrimaryFsync: {300 * time.Millisecond, 4 * time.Second},
	HangStandbyFsync: {300 * time.Millisecond, 4 * time.Second},
	HangWitnessFsync: {300 * time.Millisecond, 4 * time.Second},
}

// TestSchedule: one seed gives one schedule, another seed another; every
// fault is drawn, and each delay stays in its stated range.
func TestSchedule(t *testing.T) {
	draw := func(seed uint64) []step {
		s := newSchedule(seed, AllFaults, time.Second)
		out := make([]step, 400)
		for i := range out {
			out[i] = s.next()
		}
		return out
	}
	a, b, c := draw(7), draw(7), draw(8)
	if !slices.Equal(a, b) {
		t.Fatal("the same seed drew two schedules")
	}
	if slices.Equal(a, c) {
		t.Fatal("two seeds drew the same schedule")
	}
	seen := map[string]bool{}
	for _, st := range a {
		seen[st.fault] = true
		if st.calm < 300*time.Millisecond || st.calm >= 1500*time.Millisecond {
			t.Errorf("calm %v outside 300ms..1.5s", st.calm)
		}
		r := holds[st.fault]
		lo, hi := r[0], r[1]
		if st.hold < lo || st.hold >= hi {
			t.Errorf("%s: hold %v outside %v..%v", st.fault, st.hold, lo, hi)
		}
		if st.fault == Loss && (st.lossMod < 3 || st.lossMod > 20) {
			t.Errorf("loss: 1 in %d, want 1 in 3..20", st.lossMod)
		}
	}
	if len(seen) != len(AllFaults) {
		t.Fatalf("400 draws saw only %v", seen)
	}
	one := newSchedule(1, []string{PauseStandby}, time.Second)
	for range 50 {
		if st := one.next(); st.fault != PauseStandby {
			t.Fatalf("drew %s from [%s]", st.fault, PauseStandby)
		}
	}
}

// startProc starts a process of the test's own (from the test's thread:
// in its mount namespace) and returns it and where its exit arrives.
func startProc(t *testing.T, name string, args ...string) (*exec.Cmd, chan error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return cmd, done
}

// waitDone waits for a process startProc started to exit cleanly, at most
// 30 s (it was released: thawed, its throttle lifted).
func waitDone(t *testing.T, done chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: still blocked 30 s after it was released", what)
	}
}

// TestFreeze freezes a small filesystem of the test's own: a write to it
// blocks, without an error, until the thaw; and a filesystem nobody
// thaws is thawed by the guard.
func TestFreeze(t *testing.T) {
	mnt := ownDisk(t)
	// write starts a process that writes a file and syncs it, as a node
	// does (this goroutine's thread is the one in the namespace: a
	// process started from it is too).
	write := func(name string) chan error {
		_, done := startProc(t, "dd", "if=/dev/zero", "of="+filepath.Join(mnt, name), "bs=4096", "count=1", "conv=fsync", "status=none")
		return done
	}

	thaw, err := freeze(mnt, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	done := write("during")
	select {
	case err := <-done:
		thaw()
		t.Fatalf("a write to a frozen filesystem returned (%v); it must block until the thaw", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := thaw(); err != nil {
		t.Fatal(err)
	}
	waitDone(t, done, "the write after the thaw")

	// Nobody thaws: the guard does.
	if _, err := freeze(mnt, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	waitDone(t, write("guarded"), "the write the guard thawed")
}

// TestThrottle hangs a process's writeback on a small filesystem of the
// test's own: its write lands at once, its fsync blocks until the
// throttle is lifted; a throttle nobody lifts is lifted by the guard, and
// the group goes.
func TestThrottle(t *testing.T) {
	mnt := ownDisk(t)
	var fi unix.Stat_t
	if err := unix.Stat(mnt, &fi); err != nil {
		t.Fatal(err)
	}
	dev := fmt.Sprintf("%d:%d", unix.Major(fi.Dev), unix.Minor(fi.Dev))
	// writer starts a process that waits, so it is in the group before
	// it writes, then writes 64 KiB and fsyncs them.
	writer := func(name string) (*exec.Cmd, chan error) {
		return startProc(t, "/bin/sh", "-c", `sleep 0.2; exec dd if=/dev/zero of="$0" bs=65536 count=1 conv=fsync status=none`, filepath.Join(mnt, name))
	}
	group := fmt.Sprintf("seqbus-chaos-test-%d", os.Getpid())

	cmd, done := writer("hung")
	lift, err := throttle(group, dev, cmd.Process.Pid, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		lift()
		t.Fatalf("an fsync under the throttle returned (%v); it must block until the lift", err)
	case <-time.After(time.Second):
	}
	if err := lift(); err != nil {
		t.Fatal(err)
	}
	waitDone(t, done, "the fsync after the lift")
	if _, err := os.Stat(filepath.Join(blkioRoot, group)); !os.IsNotExist(err) {
		t.Fatalf("the group is still there after the lift: %v", err)
	}

	cmd, done = writer("guarded")
	if _, err := throttle(group, dev, cmd.Process.Pid, 500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	waitDone(t, done, "the fsync the guard let through")
	if err := cluster.Poll(context.Background(), 5*time.Second, 20*time.Millisecond, func() bool {
		_, err := os.Stat(filepath.Join(blkioRoot, group))
		return os.IsNotExist(err)
	}); err != nil {
		t.Fatalf("the guard left the group behind: %v", err)
	}
}

// The summary's replay line names every setting that shapes the run, so
// running it draws the same schedule under the same load.
func TestReplayCommand(t *testing.T) {
	c := Config{Seed: 42, Nodes: 3, Faults: []string{KillPrimary, KillAll}, Duration: 20 * time.Second, Rate: 1500, Rounds: 2}
	want := "seqbus chaos --seed 42 --nodes 3 --arbiter witness --faults kill-primary,kill-all --duration 20s --rate 1500 --fsync group --rounds 2"
	if got := c.replayCommand(); got != want {
		t.Fatalf("replay command\n%s\nwant\n%s", got, want)
	}
}
