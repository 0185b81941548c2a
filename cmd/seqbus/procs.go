package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// procSet starts processes of this binary and supervises them: the demo,
// the drills and the benchmarks start every witness, node and load client
// through it. Each child logs to dir/<name>.log and dies with its parent
// (setChildAttrs).
type procSet struct {
	bin string
	dir string
	mu  sync.Mutex
	// procs by name; exited is closed when that child's Wait returned.
	procs  map[string]*exec.Cmd
	exited map[string]chan struct{}
	cpus   map[string][]int
}

func (p *procSet) start(name string, args ...string) error { return p.startOn(name, nil, args...) }

// startOn starts a child pinned to cpus (nil: not pinned). The whole
// process is pinned from its first instruction: the child inherits the
// affinity of the thread that forks it.
func (p *procSet) startOn(name string, cpus []int, args ...string) error {
	cmd := exec.Command(p.bin, args...)
	logf, err := os.Create(filepath.Join(p.dir, name+".log"))
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	setChildAttrs(cmd)
	if err := startPinned(cmd, cpus); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	done := make(chan struct{})
	p.mu.Lock()
	if p.procs == nil {
		p.procs, p.exited, p.cpus = map[string]*exec.Cmd{}, map[string]chan struct{}{}, map[string][]int{}
	}
	p.procs[name], p.exited[name], p.cpus[name] = cmd, done, cpus
	p.mu.Unlock()
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	return nil
}

func (p *procSet) signal(name string, sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.procs[name]; c != nil && c.Process != nil {
		_ = c.Process.Signal(sig)
	}
}

// wait waits up to timeout for a child to exit and returns its state.
func (p *procSet) wait(name string, timeout time.Duration) (*os.ProcessState, error) {
	p.mu.Lock()
	c, done := p.procs[name], p.exited[name]
	p.mu.Unlock()
	if c == nil {
		return nil, fmt.Errorf("no process %q", name)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
		return c.ProcessState, nil
	case <-t.C:
		return nil, fmt.Errorf("%s (pid %d) still running after %v", name, c.Process.Pid, timeout)
	}
}

// stop sends SIGTERM and waits up to timeout, then SIGKILLs.
func (p *procSet) stop(name string, timeout time.Duration) (*os.ProcessState, error) {
	p.signal(name, syscall.SIGTERM)
	st, err := p.wait(name, timeout)
	if err != nil {
		p.signal(name, syscall.SIGKILL)
		_, _ = p.wait(name, time.Second)
	}
	return st, err
}

// stopAll ends every child: SIGTERM, then SIGKILL after two seconds.
func (p *procSet) stopAll() {
	p.mu.Lock()
	names := make([]string, 0, len(p.procs))
	for name := range p.procs {
		names = append(names, name)
	}
	p.mu.Unlock()
	for _, name := range names {
		p.signal(name, syscall.SIGTERM)
	}
	deadline := time.Now().Add(2 * time.Second)
	for _, name := range names {
		if _, err := p.wait(name, max(time.Until(deadline), time.Millisecond)); err != nil {
			p.signal(name, syscall.SIGKILL)
		}
	}
}

// pid is a started child's pid (0 for none).
func (p *procSet) pid(name string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.procs[name]; c != nil && c.Process != nil {
		return c.Process.Pid
	}
	return 0
}
