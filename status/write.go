package status

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/seqbus/seqbus/bus"
)

// WriteFileAtomic writes b to path+".tmp" and renames it over path, so a
// reader sees the old file or the new one, never a torn one.
func WriteFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Clean(path))
}

// Publisher writes the latest Status published to it to a file, on a
// goroutine of its own: Publish stores a pointer and kicks the writer
// (no lock, no I/O, no allocation beyond the caller's copy), so the
// agent that publishes never waits for marshalling or the disk. A write
// that is slow only makes the next one skip the copies published
// meanwhile: the file always ends at the latest.
type Publisher struct {
	path    string
	write   func(path string, b []byte) error
	report  func(err error)
	prepare func(st *Status)
	latest  atomic.Pointer[Status]
	worker  *bus.Worker
	// failing: the writer's last write failed (the writer's own).
	failing bool
	// Warn, when set before Start, hears the drops an operator's mistake
	// raises (dropWatch), on the writer's goroutine.
	Warn  func(msg string, args ...any)
	drops dropWatch
}

// NewPublisher returns a publisher for path, not started. write replaces
// WriteFileAtomic when not nil (tests see what runs during a write).
// report, when not nil, hears on the writer's goroutine of the first
// write of an episode that fails (a full disk: err) and of the first that
// succeeds after it (nil): the file is advisory, so a failure stops
// nothing, but meanwhile `seqbus stat` shows an old file. prepare, when
// not nil, completes each Status on the writer's goroutine before it is
// marshalled (what is too slow to compute on the publisher's thread).
func NewPublisher(path string, write func(path string, b []byte) error, report func(err error), prepare func(st *Status)) *Publisher {
	p := &Publisher{path: path, write: write, report: report, prepare: prepare}
	p.worker = bus.NewWorker(p.writeLatest)
	return p
}

// Start runs the writer's goroutine.
func (p *Publisher) Start() { p.worker.Start() }

// Stop stops the writer; a write under way finishes first.
func (p *Publisher) Stop() { p.worker.Stop() }

// Publish hands st to the writer, which writes it when it is next free.
func (p *Publisher) Publish(st *Status) {
	p.latest.Store(st)
	p.worker.Kick()
}

// WriteNow writes st on the caller's goroutine (a final status, after
// Stop). Errors are the caller's to ignore: a status file is advisory.
func (p *Publisher) WriteNow(st *Status) error { return Write(p.path, st, p.write) }

// Write marshals st and rewrites path with write (nil: WriteFileAtomic).
func Write(path string, st *Status, write func(path string, b []byte) error) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if write == nil {
		write = WriteFileAtomic
	}
	return write(path, b)
}

func (p *Publisher) writeLatest() {
	st := p.latest.Swap(nil)
	if st == nil {
		return
	}
	if p.prepare != nil {
		p.prepare(st)
	}
	if p.Warn != nil {
		p.drops.note(st, p.Warn)
	}
	err := p.WriteNow(st)
	if failing := err != nil; failing != p.failing {
		p.failing = failing
		if p.report != nil {
			p.report(err)
		}
	}
}
