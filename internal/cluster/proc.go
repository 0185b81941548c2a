package cluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Spec says how to start one child process.
type Spec struct {
	Name string   // for messages
	Bin  string   // the executable
	Args []string // its arguments
	// Log receives stdout and stderr (created, or appended to).
	Log string
	// Netns runs the child inside that network namespace (`ip netns exec`,
	// which execs the binary in place, so signals reach it directly);
	// "" runs it in this process's namespace.
	Netns string
	// CPUs pins the child from its first instruction (nil: not pinned).
	CPUs []int
	// Timeout kills the child after this long (0: never).
	Timeout time.Duration
	// DieWithParent kills the child when this process dies (Pdeathsig).
	// Pdeathsig fires when the forking OS thread exits, so only set it
	// where no goroutine that locks its thread forks children.
	DieWithParent bool
	// Stdin gives the child a stdin pipe that this process holds open
	// until Proc.CloseStdin (or the child's exit), for a child that stops
	// at EOF on its stdin (bench-echo). Without it stdin is /dev/null.
	Stdin bool
}

// Proc is one started child.
type Proc struct {
	Name    string
	LogPath string
	Cmd     *exec.Cmd
	cancel  context.CancelFunc
	stdin   io.WriteCloser // nil unless Spec.Stdin
	done    chan struct{}
	err     error // valid once done is closed
}

// Start starts a child as spec says; a goroutine waits for its exit.
func Start(spec Spec) (*Proc, error) {
	logf, err := os.OpenFile(spec.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if spec.Timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, spec.Timeout)
	}
	cmd := exec.CommandContext(ctx, spec.Bin, spec.Args...)
	if spec.Netns != "" {
		cmd = exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", spec.Netns, spec.Bin}, spec.Args...)...)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.WaitDelay = 5 * time.Second
	if spec.DieWithParent {
		DieWithParent(cmd)
	}
	var stdin io.WriteCloser
	if spec.Stdin {
		if stdin, err = cmd.StdinPipe(); err != nil {
			cancel()
			logf.Close()
			return nil, fmt.Errorf("start %s: %w", spec.Name, err)
		}
	}
	if err := startPinned(cmd, spec.CPUs); err != nil {
		cancel()
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", spec.Name, err)
	}
	p := &Proc{Name: spec.Name, LogPath: spec.Log, Cmd: cmd, cancel: cancel, stdin: stdin, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

// CloseStdin closes the child's stdin pipe (Spec.Stdin): a child that
// stops at EOF stops. A no-op without the pipe; safe to call twice.
func (p *Proc) CloseStdin() {
	if p.stdin != nil {
		_ = p.stdin.Close()
	}
}

// Done is closed when the child has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is Wait's error; valid once Done is closed.
func (p *Proc) Err() error { return p.err }

// State is the exit state; valid once Done is closed.
func (p *Proc) State() *os.ProcessState { return p.Cmd.ProcessState }

// Pid is the child's pid.
func (p *Proc) Pid() int { return p.Cmd.Process.Pid }

// Exited says whether the child has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Signal sends sig unless the child has exited.
func (p *Proc) Signal(sig syscall.Signal) error {
	if p.Exited() {
		return fmt.Errorf("%s has exited", p.Name)
	}
	return p.Cmd.Process.Signal(sig)
}

// Pause sends SIGSTOP and waits up to timeout until every thread of the
// child is stopped. SIGSTOP is asynchronous: a thread that is running or
// mid-syscall on another CPU stops only when the kernel next gets to it,
// so on a loaded machine a "stopped" primary can still read and answer
// for a while. A fault that must hit a process that is really stopped
// (acks waiting in its socket, not consumed) pauses it this way.
func (p *Proc) Pause(timeout time.Duration) error {
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		stopped, err := allThreadsStopped(p.Pid())
		if err != nil || stopped {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s (pid %d): not every thread stopped %v after SIGSTOP", p.Name, p.Pid(), timeout)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// allThreadsStopped reads the state letter of every thread of pid from
// /proc: T (stopped) or t (traced) for all of them.
func allThreadsStopped(pid int) (bool, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return false, fmt.Errorf("pause pid %d: %w", pid, err)
	}
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/stat")
		if err != nil {
			continue // the thread exited
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || i+2 >= len(s) {
			return false, fmt.Errorf("pause pid %d: unreadable %s/stat", pid, t.Name())
		}
		if c := s[i+2]; c != 'T' && c != 't' {
			return false, nil
		}
	}
	return true, nil
}

// Threads summarises the child's threads by scheduler state, naming the
// kernel function each one not sleeping interruptibly waits in
// (e.g. "9 threads: 8 S, 1 D (jbd2_log_wait_commit)"): what a stall
// report needs to tell a process waiting on the disk from one that is
// stuck or spinning. "" when /proc cannot say.
func (p *Proc) Threads() string {
	dir := fmt.Sprintf("/proc/%d/task", p.Pid())
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	counts := map[byte]int{}
	var order []byte
	var waits []string
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || i+2 >= len(s) {
			continue
		}
		c := s[i+2]
		if counts[c] == 0 {
			order = append(order, c)
		}
		counts[c]++
		if c != 'S' {
			if w, err := os.ReadFile(dir + "/" + t.Name() + "/wchan"); err == nil && len(w) > 0 && string(w) != "0" {
				waits = append(waits, string(c)+" in "+string(w))
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d threads:", len(tasks))
	for k, c := range order {
		if k > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, " %d %c", counts[c], c)
	}
	if len(waits) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(waits, ", "))
	}
	return b.String()
}

// Kill sends SIGKILL (if still running) and waits for the exit.
func (p *Proc) Kill() {
	if !p.Exited() {
		_ = p.Cmd.Process.Signal(syscall.SIGKILL)
	}
	<-p.done
	p.cancel()
}

// Wait waits up to timeout for the child to exit by itself.
func (p *Proc) Wait(timeout time.Duration) (*os.ProcessState, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
		return p.Cmd.ProcessState, nil
	case <-t.C:
		return nil, fmt.Errorf("%s (pid %d) still running after %v", p.Name, p.Cmd.Process.Pid, timeout)
	}
}

// Stop sends SIGTERM and waits up to timeout for the exit, then SIGKILLs
// (and returns the timeout as the error).
func (p *Proc) Stop(timeout time.Duration) (*os.ProcessState, error) {
	if !p.Exited() {
		_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	}
	st, err := p.Wait(timeout)
	if err != nil {
		p.Kill()
		return nil, err
	}
	p.cancel()
	return st, nil
}

// Log is what the child has written so far.
func (p *Proc) Log() string {
	b, _ := os.ReadFile(p.LogPath)
	return string(b)
}

// LogTail is the last n lines of the log, with a note of what was cut.
func (p *Proc) LogTail(n int) string {
	lines := strings.Split(strings.TrimRight(p.Log(), "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("... (%d lines cut)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}
