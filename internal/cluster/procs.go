package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Procs starts children of one binary by name and supervises them: the
// demo, the drills and the benchmarks start every witness, node and load
// client through it. Each child logs to Dir/<name>.log and dies with its
// parent. A name started again replaces the earlier child.
type Procs struct {
	Bin string
	Dir string

	mu    sync.Mutex
	procs map[string]*Proc
}

// Start starts a child, not pinned.
func (p *Procs) Start(name string, args ...string) error { return p.StartOn(name, nil, args...) }

// StartOn starts a child pinned to cpus (nil: not pinned). The whole
// process is pinned from its first instruction: the child inherits the
// affinity of the thread that forks it.
func (p *Procs) StartOn(name string, cpus []int, args ...string) error {
	return p.StartSpec(Spec{Name: name, Args: args, CPUs: cpus, DieWithParent: true})
}

// StartSpec starts a child as spec says, supervised by name
// (spec.Name): spec.Bin defaults to Bin and spec.Log to Dir/<name>.log.
// For a child that needs what StartOn does not give (a stdin pipe, no
// death signal).
func (p *Procs) StartSpec(spec Spec) error {
	if spec.Bin == "" {
		spec.Bin = p.Bin
	}
	if spec.Log == "" {
		spec.Log = filepath.Join(p.Dir, spec.Name+".log")
	}
	c, err := Start(spec)
	if err != nil {
		return err
	}
	name := spec.Name
	p.mu.Lock()
	if p.procs == nil {
		p.procs = map[string]*Proc{}
	}
	p.procs[name] = c
	p.mu.Unlock()
	return nil
}

// Get is the child of that name (nil for none).
func (p *Procs) Get(name string) *Proc {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.procs[name]
}

// Signal sends sig to a running child.
func (p *Procs) Signal(name string, sig syscall.Signal) {
	if c := p.Get(name); c != nil {
		_ = c.Signal(sig)
	}
}

// Pause stops a running child with SIGSTOP and waits until every one of
// its threads is stopped (Proc.Pause).
func (p *Procs) Pause(name string, timeout time.Duration) error {
	c := p.Get(name)
	if c == nil {
		return fmt.Errorf("no process %q", name)
	}
	return c.Pause(timeout)
}

// Exited is closed when that child has exited (nil for no child).
func (p *Procs) Exited(name string) <-chan struct{} {
	if c := p.Get(name); c != nil {
		return c.Done()
	}
	return nil
}

// Wait waits up to timeout for a child to exit and returns its state.
func (p *Procs) Wait(name string, timeout time.Duration) (*os.ProcessState, error) {
	c := p.Get(name)
	if c == nil {
		return nil, fmt.Errorf("no process %q", name)
	}
	return c.Wait(timeout)
}

// Stop sends SIGTERM and waits up to timeout, then SIGKILLs.
func (p *Procs) Stop(name string, timeout time.Duration) (*os.ProcessState, error) {
	c := p.Get(name)
	if c == nil {
		return nil, fmt.Errorf("no process %q", name)
	}
	return c.Stop(timeout)
}

// StopAll ends every child: SIGTERM, then SIGKILL after two seconds.
func (p *Procs) StopAll() {
	p.mu.Lock()
	all := make([]*Proc, 0, len(p.procs))
	for _, c := range p.procs {
		all = append(all, c)
	}
	p.mu.Unlock()
	for _, c := range all {
		_ = c.Signal(syscall.SIGTERM)
	}
	deadline := time.Now().Add(2 * time.Second)
	for _, c := range all {
		if _, err := c.Wait(max(time.Until(deadline), time.Millisecond)); err != nil {
			c.Kill()
		}
	}
}

// Pid is a started child's pid (0 for none).
func (p *Procs) Pid(name string) int {
	if c := p.Get(name); c != nil {
		return c.Pid()
	}
	return 0
}
