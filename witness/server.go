package witness

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/internal/dirlock"
)

// LockFileName is the lock file a witness holds in its state directory
// while it runs (package dirlock: a second witness on the directory is
// refused); ApplyOverride takes it too, so it never rewrites the record
// of a running witness.
const LockFileName = dirlock.WitnessLockName

// receiveErrorBackoff is the pause after a receive error that is not a
// close, so a socket stuck in an error state costs a thousand wake-ups a
// second rather than a whole CPU.
const receiveErrorBackoff = time.Millisecond

// Server is the witness process's runtime around a Core: it owns the UDP
// socket, the state file (written and fsynced before any reply that needs
// it, as the Core asks, on a goroutine of its own so that the receive
// loop goes on answering while the disk is slow), the status file writer
// and the monotonic clock, and feeds each datagram to the Core. It
// answers LEASE_ACQUIRE and LEASE_RENEW with LEASE_GRANT or LEASE_DENY
// and LEASE_QUERY with LEASE_INFO. See the package documentation for the
// rules.
type Server struct {
	conn  bus.Conn
	store Store
	// lock keeps the state directory to this server (dirlock): a second
	// witness on it is refused at New. Released by Close.
	lock *dirlock.Lock
	// start is the one wall-clock reading; every later time is
	// time.Since(start), which Go computes from the monotonic clock.
	start time.Time

	// mu guards the core and the transport counters, so Stats, Status and
	// Report may be called from any goroutine while the loop runs.
	mu   sync.Mutex
	core *Core
	// receiveErrors and sendErrors count transport failures of the loop.
	receiveErrors, sendErrors uint64

	// statusPath is dir/StatusFileName; statusStop and statusDone run its
	// writer.
	statusPath string
	statusStop chan struct{}
	statusDone chan struct{}
	// statusFailing: the last status write failed (statusLoop's own).
	statusFailing bool

	// Lifecycle.
	lifeMu  sync.Mutex
	started bool
	closed  bool
	closing atomic.Bool
	done    chan struct{}

	// persistJobs carries the one state write the Core may have
	// outstanding to the persister goroutine (capacity 1: the Core never
	// asks for a second before the first is Persisted); persistDone is
	// closed when the persister returns.
	persistJobs chan persistJob
	persistDone chan struct{}

	// Receive-loop state, touched only by the loop goroutine.
	bufs  [][]byte
	sizes []int
	from  []netip.AddrPort
	// sendBufs is the send call's argument, used under mu by the loop and
	// the persister.
	sendBufs [1][]byte
}

// New builds a server that answers on conn and keeps its state (epoch,
// in-sync set, last holder) in dir (created if missing, mode 0700). It
// reads dir/StateFileName: when the file is missing the witness starts
// fresh at epoch 0 and grants at once to anyone; when it holds epoch e the
// arbiter is restored to e with its in-sync set and last holder and grants
// nothing for one lease duration, then e+1 to the last holder or a member;
// when it is unreadable or corrupt New fails (wrapping ErrCorruptState for
// a bad record) rather than risk reusing an epoch. It holds dir's lock
// (LockFileName) until Close: another witness on dir fails here, wrapping
// dirlock.ErrLocked. On success the server owns conn and closes it in
// Close; on error conn is left open for the caller.
func New(cfg Config, conn bus.Conn, dir string) (*Server, error) {
	if conn == nil {
		return nil, fmt.Errorf("%w: nil connection", ErrConfig)
	}
	if dir == "" {
		return nil, fmt.Errorf("%w: empty state directory", ErrConfig)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("witness: state directory: %w", err)
	}
	lock, err := dirlock.Acquire(dir, LockFileName)
	if err != nil {
		return nil, fmt.Errorf("witness: another witness (or seqbus witness override) uses %s: %w", dir, err)
	}
	start := time.Now()
	store := &fileStore{dir: dir}
	state, found, err := store.Load()
	if err != nil {
		lock.Release()
		return nil, err
	}
	core, err := NewCore(cfg, state, found, int64(time.Since(start)))
	if err != nil {
		lock.Release()
		return nil, err
	}
	return &Server{
		conn:       conn,
		store:      store,
		lock:       lock,
		start:      start,
		core:       core,
		statusPath: filepath.Join(dir, StatusFileName),
		done:       make(chan struct{}),
	}, nil
}

// persistJob is a state write the Core asked for, the store to write it
// to and the requester that gets the grant once it is durable.
type persistJob struct {
	store Store
	state arbiter.PersistentState
	to    netip.AddrPort
}

// nowNs is the witness's monotonic clock: nanoseconds since New.
func (s *Server) nowNs() int64 { return int64(time.Since(s.start)) }

// handle answers one datagram received from `from` at nowNs: it steps the
// core and, when the core withholds a grant until its state is durable,
// writes the state file first, synchronously (the receive loop uses serve,
// which writes on the persister). The reply aliases a buffer the next
// call reuses, so handle is called by one goroutine at a time (a test)
// and the reply used before the next call.
func (s *Server) handle(pkt []byte, from netip.AddrPort, nowNs int64) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return stepAndPersist(s.core, s.store, pkt, from, nowNs)
}

// serve answers one datagram for the receive loop: it steps the core and
// sends the reply, or, when the core withholds a grant until its state is
// durable, hands the write to the persister and returns at once, so the
// next datagrams (the holder's renews above all) are answered while the
// disk works. Replies are sent under mu: the core's reply buffer is
// shared with the persister's Persisted.
func (s *Server) serve(pkt []byte, from netip.AddrPort) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.core.Step(pkt, from, s.nowNs())
	if rd.MustPersist {
		s.persistJobs <- persistJob{store: s.store, state: rd.State, to: from}
		return
	}
	s.sendLocked(rd.Reply, from)
}

// sendLocked sends reply (if any) to `to`; s.mu is held.
func (s *Server) sendLocked(reply []byte, to netip.AddrPort) {
	if reply == nil {
		return
	}
	s.sendBufs[0] = reply
	if err := s.conn.Send(s.sendBufs[:], to); err != nil {
		s.sendErrors++
	}
	s.sendBufs[0] = nil
}

// persister makes each requested state durable, outside mu, and then
// sends the grant that waited for it (persist BEFORE the reply), until
// jobs is closed.
func (s *Server) persister(jobs <-chan persistJob, done chan<- struct{}) {
	defer close(done)
	for job := range jobs {
		err := job.store.Save(job.state)
		s.mu.Lock()
		s.sendLocked(s.core.Persisted(err), job.to)
		s.mu.Unlock()
	}
}

// stepAndPersist is the Core's loop body over a store: Step, and if the
// core says so, Save and then Persisted (persist BEFORE the reply).
func stepAndPersist(c *Core, store Store, pkt []byte, from netip.AddrPort, nowNs int64) []byte {
	rd := c.Step(pkt, from, nowNs)
	if !rd.MustPersist {
		return rd.Reply
	}
	return c.Persisted(store.Save(rd.State))
}

// Start runs the receive loop on one goroutine until Close. It returns
// ErrStarted if called twice or after Close.
func (s *Server) Start() error {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	if s.started || s.closed {
		return ErrStarted
	}
	s.started = true
	s.bufs = make([][]byte, receiveBatch)
	arena := make([]byte, receiveBatch*datagramBytes)
	for i := range s.bufs {
		s.bufs[i] = arena[i*datagramBytes : (i+1)*datagramBytes : (i+1)*datagramBytes]
	}
	s.sizes = make([]int, receiveBatch)
	s.from = make([]netip.AddrPort, receiveBatch)
	s.persistJobs, s.persistDone = make(chan persistJob, 1), make(chan struct{})
	go s.persister(s.persistJobs, s.persistDone)
	go s.run()
	s.statusStop, s.statusDone = make(chan struct{}), make(chan struct{})
	go s.statusLoop(s.statusStop, s.statusDone)
	return nil
}

// Close closes the connection, which ends the receive loop, and waits for
// the loop to return. It is safe to call more than once; later calls
// return nil.
func (s *Server) Close() error {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.closing.Store(true)
	err := s.conn.Close()
	if errors.Is(err, bus.ErrClosed) {
		err = nil
	}
	if s.started {
		<-s.done
		// The loop sends no more jobs; a write under way finishes (its
		// grant fails to send on the closed socket, harmlessly).
		close(s.persistJobs)
		<-s.persistDone
	}
	if s.statusStop != nil {
		close(s.statusStop)
		<-s.statusDone
	}
	// Last: nothing of this server writes the directory any more.
	if lerr := s.lock.Release(); err == nil {
		err = lerr
	}
	return err
}

// run is the receive loop: read a batch, answer each datagram in order.
func (s *Server) run() {
	defer close(s.done)
	for !s.closing.Load() {
		n, err := s.conn.Receive(s.bufs, s.sizes, s.from, bus.WaitForever)
		if err != nil {
			if errors.Is(err, bus.ErrClosed) {
				return
			}
			s.mu.Lock()
			s.receiveErrors++
			s.mu.Unlock()
			time.Sleep(receiveErrorBackoff)
			continue
		}
		for i := range n {
			s.serve(s.bufs[i][:s.sizes[i]], s.from[i])
		}
	}
}

// Stats returns a snapshot of the counters, the core's and the
// transport's.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.core.Stats()
	st.ReceiveErrors, st.SendErrors = s.receiveErrors, s.sendErrors
	st.Drops[DropTooLong] = s.truncations()
	return st
}

// truncations is how many datagrams the socket cut to the receive
// buffer (DropTooLong); 0 for a connection that does not count them.
func (s *Server) truncations() uint64 {
	if c, ok := s.conn.(bus.CounterReader); ok {
		return c.Counters().ReceiveTruncations
	}
	return 0
}

// Status reports who holds the lease now, as the arbiter sees it.
func (s *Server) Status() arbiter.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.core.Status(s.nowNs())
}
