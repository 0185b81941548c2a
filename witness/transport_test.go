package witness

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/bus"
)

// TestServeLease runs the protocol through a socket, in memory and on real
// loopback UDP: grant to a free lease, deny to another node with holder,
// epoch and time left, renew by the holder, query/info.
func TestServeLease(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			p := genTestPair(t, tr.real, "")
			g := p.roundTrip(t, acquireFrame(t, 1, 1))
			if !g.Granted() || g.Epoch != 1 || g.RequestID != 1 || g.DurationNs != pairLeaseNs {
				t.Fatalf("grant %+v", g)
			}
			d := p.roundTrip(t, acquireFrame(t, 2, 1))
			if d.Granted() || d.Holder != 1 || d.Epoch != 1 || d.RequestID != 1 ||
				d.RemainingNs <= 0 || d.RemainingNs > pairLeaseNs {
				t.Fatalf("deny %+v", d)
			}
			r := p.roundTrip(t, renewFrame(t, 1, 2, 1))
			if !r.Granted() || r.Epoch != 1 || r.RequestID != 2 {
				t.Fatalf("renew %+v", r)
			}
			q := p.roundTrip(t, queryFrame(77))
			if q.Kind != arbiter.ReplyInfo || q.Holder != 1 || q.Epoch != 1 || q.RequestID != 77 ||
				q.RemainingNs <= 0 || q.RemainingNs > pairLeaseNs {
				t.Fatalf("info %+v", q)
			}
			st := p.server.Stats()
			if st.Acquires != 2 || st.Renews != 1 || st.Queries != 1 || st.Grants != 2 ||
				st.Denies[arbiter.ReasonHeld] != 1 || st.Infos != 1 || st.Persists != 1 {
				t.Fatalf("stats %+v", st)
			}
			if s := p.server.Status(); s.Holder != 1 || s.Epoch != 1 {
				t.Fatalf("status %+v", s)
			}
		})
	}
}

// TestServeResend: the same datagram twice through the socket gets the
// same grant twice and one arbiter decision.
func TestServeResend(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			p := genTestPair(t, tr.real, "")
			pkt := acquireFrame(t, 3, 9)
			a := p.roundTrip(t, pkt)
			b := p.roundTrip(t, pkt)
			if !a.Granted() || !b.Granted() || a.Epoch != 1 || b.Epoch != 1 || b.DurationNs > a.DurationNs {
				t.Fatalf("first %+v resend %+v", a, b)
			}
			if st := p.server.Stats(); st.Decisions != 1 || st.ResendsAnswered != 1 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// orderStore wraps the real file store and checks, at the moment of each
// write, that the node has not yet received anything: the grant must
// follow the write. The test does not receive until the write is done, so
// the two never contend for the node's socket.
type orderStore struct {
	inner     fileStore
	node      bus.Conn
	t         testing.TB
	persisted chan uint64
}

func (o *orderStore) Load() (arbiter.PersistentState, bool, error) { return o.inner.Load() }

func (o *orderStore) Save(state arbiter.PersistentState) error {
	bufs := [][]byte{make([]byte, 2048)}
	n, err := o.node.Receive(bufs, []int{0}, []netip.AddrPort{{}}, 0)
	if err != nil || n != 0 {
		o.t.Errorf("node had %d datagrams (err %v) before the epoch was persisted", n, err)
	}
	err = o.inner.Save(state)
	o.persisted <- state.Epoch
	return err
}

// TestServePersistBeforeSend: through the socket, the epoch file holds the
// granted epoch before the node receives the grant.
func TestServePersistBeforeSend(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			p := genTestPair(t, tr.real, "")
			p.server.mu.Lock()
			order := &orderStore{inner: fileStore{dir: p.dir}, node: p.node, t: t, persisted: make(chan uint64, 1)}
			p.server.store = order
			p.server.mu.Unlock()
			if err := p.node.Send([][]byte{acquireFrame(t, 1, 1)}, p.witness); err != nil {
				t.Fatal(err)
			}
			select {
			case <-order.persisted:
			case <-time.After(2 * time.Second):
				t.Fatal("epoch never persisted")
			}
			g, ok := p.receive(t, 2*time.Second)
			if !ok {
				t.Fatal("no grant")
			}
			st, found, err := (&fileStore{dir: p.dir}).Load()
			if epoch := st.Epoch; err != nil || !found || epoch != g.Epoch || g.Epoch != 1 {
				t.Fatalf("file epoch %d found %v err %v, grant %+v", epoch, found, err, g)
			}
		})
	}
}

// TestServePersistFailure: with a failing store the grant is never sent.
func TestServePersistFailure(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			p := genTestPair(t, tr.real, "")
			p.server.mu.Lock()
			p.server.store = &memStore{fail: true}
			p.server.mu.Unlock()
			if err := p.node.Send([][]byte{acquireFrame(t, 1, 1)}, p.witness); err != nil {
				t.Fatal(err)
			}
			if r, ok := p.receive(t, 100*time.Millisecond); ok {
				t.Fatalf("grant sent although the epoch was not persisted: %+v", r)
			}
			if st := p.server.Stats(); st.PersistFailures != 1 || st.Grants != 0 {
				t.Fatalf("stats %+v", st)
			}
			if _, err := os.Stat(filepath.Join(p.dir, StateFileName)); !os.IsNotExist(err) {
				t.Fatalf("state file exists: %v", err)
			}
		})
	}
}

// TestServeRestartQuarantine: grant epoch 1, restart the witness on the
// same directory; the epoch is restored, everyone (the old holder's new
// process too) is refused for one lease duration, then a different node
// gets epoch 2.
func TestServeRestartQuarantine(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			// The steps between a grant and the next request, and between
			// the restart and the old holder's acquire, must fall inside a
			// lease on the real clock: a lease long against a scheduling
			// stall of a loaded machine (with the 200 ms of testLeaseNs a
			// stall let the lease or the quarantine end mid-test).
			const leaseNs = int64(3 * time.Second)
			p := genTestPair(t, tr.real, "")
			p.leaseNs = leaseNs
			p.restart(t) // a fresh directory: no quarantine
			if g := p.roundTrip(t, acquireFrame(t, 1, 1)); g.Epoch != 1 {
				t.Fatalf("grant %+v", g)
			}
			// Node 2 joins the in-sync set; the set must survive the
			// restart for node 2 to be promoted after it.
			if g := p.roundTrip(t, renewInSyncFrame(t, 1, 3, 1, 1, 2)); g.InSyncVersion != 2 || g.Members != inSync(2) {
				t.Fatalf("proposal grant %+v", g)
			}
			beforeRestart := time.Now()
			p.restart(t)
			if st := p.server.Status(); st.Epoch != 1 || st.QuarantineRemainingNs <= 0 {
				t.Fatalf("restored status %+v", st)
			}
			// The old holder restarted (it acquires): refused like anyone.
			// (The running holder renewing its epoch is let through: see
			// TestRestartLetsTheHolderRenewAtOnce.)
			if d := p.roundTrip(t, acquireFrame(t, 1, 4)); d.Granted() || d.Epoch != 1 || d.Holder != 0 {
				t.Fatalf("old holder during quarantine: %+v", d)
			}
			var g arbiter.Reply
			denies := 0
			for id := uint64(1); ; id++ {
				if id > 1000 {
					t.Fatal("no grant after 1000 tries")
				}
				r := p.roundTrip(t, acquireFrame(t, 2, id))
				if r.Granted() {
					g = r
					break
				}
				if r.Epoch != 1 || r.Holder != 0 || r.RemainingNs <= 0 || r.RemainingNs > leaseNs {
					t.Fatalf("quarantine deny %+v", r)
				}
				denies++
				time.Sleep(time.Duration(min(r.RemainingNs, int64(50*time.Millisecond))))
			}
			if elapsed := time.Since(beforeRestart); elapsed < time.Duration(leaseNs) {
				t.Fatalf("granted %v after restart, quarantine is %v", elapsed, time.Duration(leaseNs))
			}
			if g.Epoch != 2 || denies == 0 {
				t.Fatalf("grant after quarantine %+v after %d denies", g, denies)
			}
			if st := p.server.Stats(); st.Denies[arbiter.ReasonQuarantine] != uint64(denies)+1 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// slowStore is the real file store whose writes of an in-sync version of
// at least slowFrom wait until release is closed: a disk that takes its
// time over one fsync, as a loaded machine's does.
type slowStore struct {
	inner    fileStore
	slowFrom uint64
	entered  chan struct{} // receives once per slow write, when it starts
	release  chan struct{}
}

func (s *slowStore) Load() (arbiter.PersistentState, bool, error) { return s.inner.Load() }

func (s *slowStore) Save(state arbiter.PersistentState) error {
	if state.InSyncVersion >= s.slowFrom {
		s.entered <- struct{}{}
		<-s.release
	}
	return s.inner.Save(state)
}

// TestServeAnswersWhileTheDiskIsSlow: while the holder's in-sync proposal
// is being written (and held there), the witness goes on answering: the
// holder's next renew is granted (same epoch, the durable set) and a
// query is answered; the proposal's grant follows its write. Before, the
// receive loop did the write itself, so a slow fsync silenced the witness
// for as long as it took and the primary lost its lease (a 3 s fsync under
// CI's load in TestInSyncStandbyPartitions): this test got no reply.
func TestServeAnswersWhileTheDiskIsSlow(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			p := genTestPair(t, tr.real, "")
			slow := &slowStore{inner: fileStore{dir: p.dir}, slowFrom: 2, entered: make(chan struct{}, 1), release: make(chan struct{})}
			var released bool
			release := func() {
				if !released {
					released = true
					close(slow.release)
				}
			}
			t.Cleanup(release) // before the pair's cleanup closes the server
			p.server.mu.Lock()
			p.server.store = slow
			p.server.mu.Unlock()
			if g := p.roundTrip(t, acquireFrame(t, 1, 1)); !g.Granted() || g.Epoch != 1 || g.InSyncVersion != 1 {
				t.Fatalf("acquire: %+v", g)
			}
			if err := p.node.Send([][]byte{renewInSyncFrame(t, 1, 2, 1, 1, 2)}, p.witness); err != nil {
				t.Fatal(err)
			}
			select {
			case <-slow.entered:
			case <-time.After(10 * time.Second):
				t.Fatal("the proposal's write never started")
			}
			// The write is held: a generous bound, far above any
			// scheduling stall, and far below "until the write ends".
			if err := p.node.Send([][]byte{renewFrame(t, 1, 3, 1)}, p.witness); err != nil {
				t.Fatal(err)
			}
			g, ok := p.receive(t, 10*time.Second)
			if !ok {
				t.Fatal("no reply to the holder's renew while a write was under way: the witness is silent until its disk answers")
			}
			if !g.Granted() || g.RequestID != 3 || g.Epoch != 1 || g.InSyncVersion != 1 || g.Members.N != 0 {
				t.Fatalf("renew while writing: %+v, want a grant of epoch 1 with the durable set (version 1, empty)", g)
			}
			if err := p.node.Send([][]byte{queryFrame(7)}, p.witness); err != nil {
				t.Fatal(err)
			}
			if info, ok := p.receive(t, 10*time.Second); !ok || info.Holder != 1 || info.InSyncVersion != 1 {
				t.Fatalf("query while writing: %+v (reply %v)", info, ok)
			}
			if st, found, err := slow.inner.Load(); err != nil || !found || st.InSyncVersion != 1 {
				t.Fatalf("state file while writing: %+v %v %v, want version 1", st, found, err)
			}

			release()
			g, ok = p.receive(t, 10*time.Second)
			if !ok || !g.Granted() || g.RequestID != 2 || g.InSyncVersion != 2 || g.Members != inSync(2) {
				t.Fatalf("proposal after its write: %+v (reply %v), want a grant of version 2 with member 2", g, ok)
			}
			if st, found, err := slow.inner.Load(); err != nil || !found || st.InSyncVersion != 2 {
				t.Fatalf("state file after the write: %+v %v %v, want version 2", st, found, err)
			}
			if st := p.server.Stats(); st.GrantsWhilePersisting != 1 || st.Persists != 2 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}
