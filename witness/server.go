package witness

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/wire"
)

// receiveErrorBackoff is the pause after a receive error that is not a
// close, so a socket stuck in an error state costs a thousand wake-ups a
// second rather than a whole CPU.
const receiveErrorBackoff = time.Millisecond

// Server is the witness: a UDP server around one arbiter.Arbiter. It
// answers LEASE_ACQUIRE and LEASE_RENEW with LEASE_GRANT or LEASE_DENY and
// LEASE_QUERY with LEASE_INFO, persists every new epoch and every change
// of the in-sync set before granting it, and answers resends of a node's last request from a cache. See the
// package documentation for the rules.
type Server struct {
	cfg   Config
	conn  bus.Conn
	store Store
	log   *slog.Logger
	// start is the one wall-clock reading; every later time is
	// time.Since(start), which Go computes from the monotonic clock.
	start time.Time

	// mu guards everything the handler touches, so Stats and Status may be
	// called from any goroutine while the loop runs.
	mu  sync.Mutex
	arb *arbiter.Arbiter
	// durableEpoch and durableInSyncVersion are the highest epoch and
	// in-sync version known to be on disk. No grant of a higher epoch or
	// version is ever sent.
	durableEpoch         uint64
	durableInSyncVersion uint64
	// durableInSync is the in-sync set of durableInSyncVersion. Denies and
	// infos report it when the arbiter's set is newer but not yet durable,
	// so no reply ever names a set a restart could forget.
	durableInSync arbiter.InSyncSet
	// persistFailing is true from a persist failure until the next
	// success, so a failing disk is logged once, not per request.
	persistFailing bool
	cache          replyCache
	lastNowNs      int64
	stats          Stats
	// reply is the encode buffer; handle's result aliases it.
	reply []byte
	auth  *witnessAuth // nil without Config.Key
	// The rate-limited log of requests refused by authentication.
	authLogged        bool
	authLoggedAtNs    int64
	authDropsSinceLog uint64

	// statusPath is dir/StatusFileName for a server built by New ("" for
	// one without a directory); statusStop and statusDone run its writer.
	statusPath string
	statusStop chan struct{}
	statusDone chan struct{}

	// Lifecycle.
	lifeMu  sync.Mutex
	started bool
	closed  bool
	closing atomic.Bool
	done    chan struct{}

	// Receive-loop state, touched only by the loop goroutine.
	bufs     [][]byte
	sizes    []int
	from     []netip.AddrPort
	sendBufs [1][]byte
}

// New builds a server that answers on conn and keeps its state (epoch,
// in-sync set, last holder) in dir (created if missing, mode 0700). It
// reads dir/StateFileName: when the file is missing the witness starts
// fresh at epoch 0 and grants at once to anyone; when it holds epoch e the
// arbiter is restored to e with its in-sync set and last holder and grants
// nothing for one lease duration, then e+1 to the last holder or a member;
// when it is unreadable or corrupt New fails (wrapping ErrCorruptState for
// a bad record) rather than risk reusing an epoch. On success the server owns conn and closes it in
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
	s, err := newServer(cfg, conn, &fileStore{dir: dir})
	if err != nil {
		return nil, err
	}
	s.statusPath = filepath.Join(dir, StatusFileName)
	return s, nil
}

// NewCore builds a witness without a socket or a clock, for a
// deterministic simulator: the caller owns time (nowNs, the witness's
// monotonic clock at construction) and delivery, calls Handle for each
// datagram and sends the reply itself. Its state lives in store. Start must
// not be called on it.
func NewCore(cfg Config, store Store, nowNs int64) (*Server, error) {
	if store == nil {
		return nil, fmt.Errorf("%w: nil store", ErrConfig)
	}
	return newServerAt(cfg, nil, store, nowNs)
}

// Handle answers one datagram received from `from` at nowNs; see handle.
// The reply aliases a buffer that the next call reuses.
func (s *Server) Handle(pkt []byte, from netip.AddrPort, nowNs int64) []byte {
	return s.handle(pkt, from, nowNs)
}

// newServer builds a server over any epoch store. conn may be nil for a
// server that is only driven through handle (tests, fuzzing).
func newServer(cfg Config, conn bus.Conn, store Store) (*Server, error) {
	return newServerAt(cfg, conn, store, -1)
}

// newServerAt is newServer with the construction time given (nowNs < 0:
// read the monotonic clock).
func newServerAt(cfg Config, conn bus.Conn, store Store, nowNs int64) (*Server, error) {
	arb, err := arbiter.NewArbiter(cfg.Arbiter)
	if err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &Server{
		cfg:       cfg,
		conn:      conn,
		store:     store,
		log:       logger,
		start:     time.Now(),
		arb:       arb,
		lastNowNs: math.MinInt64,
		reply:     make([]byte, 0, wire.HeaderLen+64+4*wire.MaxMembers),
		done:      make(chan struct{}),
	}
	if cfg.Key != nil {
		if s.auth, err = newWitnessAuth(cfg); err != nil {
			return nil, err
		}
	}
	state, found, err := store.Load()
	if err != nil {
		return nil, err
	}
	if found {
		// The old lease may still be live somewhere: grant nothing for one
		// lease duration, then epochs above the persisted one.
		if nowNs < 0 {
			nowNs = s.nowNs()
		}
		restoreAt := s.observe(nowNs)
		if cfg.Unsafe.NoQuarantine {
			// UNSAFE (mutation test): as if the quarantine already ran.
			restoreAt -= cfg.Arbiter.LeaseDurationNs
		}
		if err := s.arb.Restore(state, restoreAt); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCorruptState, err)
		}
		s.durableEpoch, s.durableInSyncVersion, s.durableInSync = state.Epoch, state.InSyncVersion, state.Members
		s.log.Info("witness: restored", "epoch", state.Epoch, "in_sync_version", state.InSyncVersion,
			"last_holder", state.LastHolder, "in_sync", state.Members.Slice(),
			"quarantine", time.Duration(cfg.Arbiter.LeaseDurationNs))
	} else {
		s.log.Info("witness: fresh state, epoch 0")
	}
	return s, nil
}

// nowNs is the witness's monotonic clock: nanoseconds since New.
func (s *Server) nowNs() int64 { return int64(time.Since(s.start)) }

// Start runs the receive loop on one goroutine until Close. It returns
// ErrStarted if called twice or after Close.
func (s *Server) Start() error {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	if s.started || s.closed || s.conn == nil {
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
	go s.run()
	if s.statusPath != "" {
		s.statusStop, s.statusDone = make(chan struct{}), make(chan struct{})
		go s.statusLoop(s.statusStop, s.statusDone)
	}
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
	var err error
	if s.conn != nil {
		if err = s.conn.Close(); errors.Is(err, bus.ErrClosed) {
			err = nil
		}
	}
	if s.started {
		<-s.done
	}
	if s.statusStop != nil {
		close(s.statusStop)
		<-s.statusDone
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
			s.stats.ReceiveErrors++
			s.mu.Unlock()
			time.Sleep(receiveErrorBackoff)
			continue
		}
		for i := range n {
			reply := s.handle(s.bufs[i][:s.sizes[i]], s.from[i], s.nowNs())
			if reply == nil {
				continue
			}
			s.sendBufs[0] = reply
			if err := s.conn.Send(s.sendBufs[:], s.from[i]); err != nil {
				s.mu.Lock()
				s.stats.SendErrors++
				s.mu.Unlock()
			}
		}
	}
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.CacheNodes = s.cache.len()
	st.DurableEpoch = s.durableEpoch
	st.DurableInSyncVersion = s.durableInSyncVersion
	return st
}

// Status reports who holds the lease now, as the arbiter sees it.
func (s *Server) Status() arbiter.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.arb.Query(s.observe(s.nowNs()))
}

// observe clamps time that goes backwards (only a test can make it) to the
// latest seen, as the arbiter does, so cache arithmetic agrees with it.
func (s *Server) observe(nowNs int64) int64 {
	s.lastNowNs = max(s.lastNowNs, nowNs)
	return s.lastNowNs
}

// handle answers one datagram received from `from` at nowNs (the witness's
// monotonic clock). It returns the reply to send to `from`, or nil to send
// nothing. The reply aliases a buffer reused by the next call, so handle
// must be called by one goroutine at a time (the loop, or a test) and the
// reply sent before the next call. Bad input is dropped and counted, never
// a panic.
func (s *Server) handle(pkt []byte, from netip.AddrPort, nowNs int64) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	reply := s.handleLocked(pkt, from, nowNs)
	if reply != nil && s.auth != nil {
		h, _ := wire.ParseHeader(pkt) // parsed once already: a reply means it was valid
		reply = s.auth.seal(reply, h.Node)
	}
	return reply
}

func (s *Server) handleLocked(pkt []byte, from netip.AddrPort, nowNs int64) []byte {
	nowNs = s.observe(nowNs)
	if !from.IsValid() || from.Port() == 0 {
		s.stats.Drops[DropNoAddress]++
		return nil
	}
	f, n, err := wire.Parse(pkt)
	if err != nil {
		s.stats.Drops[parseDropReason(err)]++
		return nil
	}
	if n != len(pkt) {
		s.stats.Drops[DropTrailing]++
		return nil
	}
	if s.auth != nil {
		if r := s.auth.verify(&f); r != dropNone {
			s.stats.Drops[r]++
			if f.Type != wire.TypeLeaseQuery {
				s.noteAuthDrop(r, f.Node, nowNs)
			}
			return nil
		}
	}
	switch f.Type {
	case wire.TypeLeaseAcquire:
		s.stats.Acquires++
	case wire.TypeLeaseRenew:
		s.stats.Renews++
	case wire.TypeLeaseQuery:
		s.stats.Queries++
		return s.info(&f, nowNs)
	default:
		s.stats.Drops[DropNotRequest]++
		return nil
	}
	grantsBefore := s.stats.Grants
	reply := s.request(&f, nowNs)
	if s.stats.Grants > grantsBefore {
		if f.Type == wire.TypeLeaseAcquire {
			s.stats.AcquireGrants++
		} else {
			s.stats.RenewGrants++
		}
	}
	return reply
}

// request decides a LEASE_ACQUIRE or LEASE_RENEW (answering a resend from
// the cache) and returns the reply, or nil to send nothing.
func (s *Server) request(f *wire.Frame, nowNs int64) []byte {
	// Parse validated the layout, so DecodeLease cannot fail here. A
	// request needs the request ID and, for a renew, the proposal.
	req, _ := wire.DecodeLease(f)
	node := arbiter.NodeID(f.Node)
	reqEpoch := f.Epoch
	if f.Type == wire.TypeLeaseAcquire {
		// An acquire's header epoch is informational; ignoring it keeps a
		// resend with a different stale epoch a resend.
		reqEpoch = 0
	}
	if e := s.cache.lookup(node); e != nil && e.matches(req.RequestID, f.Type, reqEpoch) {
		e.usedAtNs = nowNs
		return s.resend(e, f.Stream, nowNs)
	}
	if s.auth != nil && !s.auth.fresh(node, req.RequestID) {
		// A captured request replayed: deciding it afresh could extend a
		// dead primary's lease.
		s.stats.Drops[DropReplay]++
		return nil
	}

	var d arbiter.Decision
	switch {
	case f.Type == wire.TypeLeaseAcquire:
		d = s.arb.AcquireRequest(node, req.RequestID, nowNs)
	case req.InSyncVersion != 0:
		// A renew carrying a proposal: InSyncVersion is the base version,
		// Members the proposed set. A fixed array converts it without
		// allocating.
		var members [wire.MaxMembers]arbiter.NodeID
		for i, m := range req.Members[:req.NMembers] {
			members[i] = arbiter.NodeID(m)
		}
		d = s.arb.RenewWithInSync(node, reqEpoch, req.InSyncVersion, members[:req.NMembers], nowNs)
		s.stats.InSyncProposals++
		if d.Granted && d.InSyncReason != arbiter.ReasonNone {
			s.stats.InSyncRefused++
		}
	default:
		d = s.arb.Renew(node, reqEpoch, nowNs)
	}
	s.stats.Decisions++
	if d.Granted && (d.Persist || d.Epoch > s.durableEpoch || d.InSyncVersion > s.durableInSyncVersion) {
		// Persist BEFORE granting (arbiter.Decision.Persist). The other
		// conditions also cover an extension after a new epoch or set
		// whose first grant failed to persist: the arbiter counts it as
		// in force, but it was never sent, and must not be until it is
		// durable.
		if !s.persist(d.PersistentState()) {
			// Nothing is cached either, so a resend retries the write.
			s.stats.Drops[DropPersistFailed]++
			return nil
		}
		if d.PersistEpoch {
			s.stats.GrantsNewEpoch++
		}
	}
	if s.cache.put(cacheEntry{
		node: node, requestID: req.RequestID, reqType: f.Type, reqEpoch: reqEpoch,
		decision: d, decidedAtNs: nowNs, usedAtNs: nowNs,
	}) {
		s.stats.CacheEvictions++
	}
	return s.answer(d, req.RequestID, f.Stream, d.RemainingNs)
}

// persist makes state durable and reports success.
func (s *Server) persist(state arbiter.PersistentState) bool {
	if err := s.store.Save(state); err != nil {
		s.stats.PersistFailures++
		if !s.persistFailing {
			s.log.Error("witness: grant withheld, state not persisted", "epoch", state.Epoch, "in_sync_version", state.InSyncVersion, "err", err)
		}
		s.persistFailing = true
		return false
	}
	if s.persistFailing {
		s.log.Info("witness: persisting again", "epoch", state.Epoch, "in_sync_version", state.InSyncVersion)
	}
	s.persistFailing = false
	s.stats.Persists++
	s.durableEpoch = max(s.durableEpoch, state.Epoch)
	if state.InSyncVersion >= s.durableInSyncVersion {
		s.durableInSyncVersion, s.durableInSync = state.InSyncVersion, state.Members
	}
	return true
}

// resend answers a repeat of the cached request without asking the
// arbiter. The reply is the same grant or deny, described at nowNs: its
// time left is what remains of the original, not a fresh duration. A
// requester that restarted and reused the request ID times the lease from
// its new send time, so a full duration could outlast the witness's lease;
// what remains cannot. A grant whose lease has run out is not answered at
// all: the requester will ask again with a new ID.
func (s *Server) resend(e *cacheEntry, stream uint16, nowNs int64) []byte {
	d := e.decision
	if d.Granted {
		left := d.ExpiresAtNs - nowNs
		if left <= 0 {
			s.stats.Drops[DropResendExpired]++
			return nil
		}
		s.stats.ResendsAnswered++
		return s.answer(d, e.requestID, stream, left)
	}
	s.stats.ResendsAnswered++
	return s.answer(d, e.requestID, stream, max(0, d.RemainingNs-(nowNs-e.decidedAtNs)))
}

// answer encodes a grant (epoch in the header, duration = leftNs) or a
// deny (holder, highest epoch, leftNs remaining) echoing requestID; both
// carry the in-sync version and set in force at the decision.
func (s *Server) answer(d arbiter.Decision, requestID uint64, stream uint16, leftNs int64) []byte {
	l := wire.Lease{
		Origin:        wire.Origin{Stream: stream, Node: s.cfg.Node, Epoch: d.Epoch},
		RequestID:     requestID,
		Holder:        uint32(d.Holder),
		InSyncVersion: d.InSyncVersion,
	}
	set := &d.Members
	if !d.Granted && d.InSyncVersion > s.durableInSyncVersion {
		// A grant is only ever sent durable; a deny reports the durable
		// set rather than one a crash could still take back.
		l.InSyncVersion, set = s.durableInSyncVersion, &s.durableInSync
	}
	setMembers(&l, set)
	if d.Granted {
		l.Type = wire.TypeLeaseGrant
		l.DurationNs = durationToWireClamped(leftNs)
		s.stats.Grants++
	} else {
		l.Type = wire.TypeLeaseDeny
		l.RemainingNs = durationToWireClamped(leftNs)
		reason := int(d.Reason)
		if reason >= denyReasonsMax {
			reason = 0
		}
		s.stats.Denies[reason]++
	}
	s.reply = l.Append(s.reply[:0])
	return s.reply
}

// info answers a query: the live holder (0 for none), the highest epoch,
// and the live lease's time left, or, with no holder, the restart
// quarantine's time left (the earliest a new holder can be granted), as a
// deny reports it.
func (s *Server) info(f *wire.Frame, nowNs int64) []byte {
	q, _ := wire.DecodeLease(f)
	st := s.arb.Query(nowNs)
	left := st.RemainingNs
	if st.Holder == arbiter.NodeNone {
		left = st.QuarantineRemainingNs
	}
	l := wire.Lease{
		Type:          wire.TypeLeaseInfo,
		Origin:        wire.Origin{Stream: f.Stream, Node: s.cfg.Node, Epoch: st.Epoch},
		RequestID:     q.RequestID,
		Holder:        uint32(st.Holder),
		RemainingNs:   durationToWireClamped(left),
		InSyncVersion: st.InSyncVersion,
	}
	set := &st.Members
	if st.InSyncVersion > s.durableInSyncVersion {
		l.InSyncVersion, set = s.durableInSyncVersion, &s.durableInSync
	}
	setMembers(&l, set)
	s.stats.Infos++
	s.reply = l.Append(s.reply[:0])
	return s.reply
}

// The arbiter's set must fit a lease frame: a compile-time check that the
// two bounds are equal.
var _ [arbiter.MaxInSyncMembers - wire.MaxMembers]struct{}
var _ [wire.MaxMembers - arbiter.MaxInSyncMembers]struct{}

// setMembers copies the in-sync set into a lease frame.
func setMembers(l *wire.Lease, set *arbiter.InSyncSet) {
	l.NMembers = set.N
	for i, m := range set.Slice() {
		l.Members[i] = uint32(m)
	}
}
