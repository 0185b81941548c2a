package witness

import (
	"errors"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/bus"
)

// mustCore builds a fresh Core at time 0.
func mustCore(t *testing.T) *Core {
	t.Helper()
	c, err := NewCore(testConfig(), arbiter.PersistentState{}, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCoreStepAsksToPersistBeforeReplying (issue 17 item 3): the core does
// no I/O. A grant of a new epoch comes back from Step as MustPersist with
// the state to write and no reply; the reply exists only once Persisted
// is told the write succeeded, and only then is it cached and counted.
func TestCoreStepAsksToPersistBeforeReplying(t *testing.T) {
	c := mustCore(t)
	rd := c.Step(acquireFrame(t, 1, 1), nodeAddr, 0)
	if !rd.MustPersist || rd.Reply != nil || rd.State != stateOf(1, 1, 1) {
		t.Fatalf("new epoch: %+v, want MustPersist of epoch 1 and no reply", rd)
	}
	if st := c.Stats(); st.Grants != 0 || st.Persists != 0 || st.CacheNodes != 0 || st.DurableEpoch != 0 {
		t.Fatalf("before Persisted: %+v", st)
	}
	r := mustReply(t, c.Persisted(nil))
	if !r.Granted() || r.Epoch != 1 || r.RequestID != 1 {
		t.Fatalf("after Persisted: %+v", r)
	}
	st := c.Stats()
	if st.Grants != 1 || st.AcquireGrants != 1 || st.GrantsNewEpoch != 1 || st.Persists != 1 || st.CacheNodes != 1 || st.DurableEpoch != 1 {
		t.Fatalf("after Persisted: %+v", st)
	}
	// An extension of a durable epoch needs no write: the reply at once.
	rd = c.Step(renewFrame(t, 1, 2, 1), nodeAddr, 10)
	if rd.MustPersist {
		t.Fatalf("renew of a durable epoch asks to persist: %+v", rd)
	}
	if r := mustReply(t, rd.Reply); !r.Granted() {
		t.Fatalf("renew: %+v", r)
	}
	// A query never writes.
	if rd = c.Step(queryFrame(3), nodeAddr, 20); rd.MustPersist || rd.Reply == nil {
		t.Fatalf("query: %+v", rd)
	}
}

// TestCorePersistFailureWithholdsTheGrant: a failed write sends nothing,
// caches nothing (a resend asks to write again) and is counted.
func TestCorePersistFailureWithholdsTheGrant(t *testing.T) {
	c := mustCore(t)
	if rd := c.Step(acquireFrame(t, 1, 1), nodeAddr, 0); !rd.MustPersist {
		t.Fatalf("%+v", rd)
	}
	if got := c.Persisted(ErrPersist); got != nil {
		t.Fatal("a reply after a failed write")
	}
	st := c.Stats()
	if st.PersistFailures != 1 || st.Drops[DropPersistFailed] != 1 || st.Grants != 0 || st.CacheNodes != 0 {
		t.Fatalf("after the failure: %+v", st)
	}
	rd := c.Step(acquireFrame(t, 1, 1), nodeAddr, 10)
	if !rd.MustPersist || rd.State.Epoch != 1 {
		t.Fatalf("resend after a failed write: %+v, want another write of epoch 1", rd)
	}
	if r := mustReply(t, c.Persisted(nil)); !r.Granted() || r.Epoch != 1 {
		t.Fatalf("%+v", r)
	}
}

// TestCoreMisuse: Step with a persist outstanding, or Persisted with none,
// is a programmer error in the caller's loop and panics.
func TestCoreMisuse(t *testing.T) {
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s did not panic", name)
			}
		}()
		f()
	}
	c := mustCore(t)
	mustPanic("Persisted with nothing outstanding", func() { c.Persisted(nil) })
	c.Step(acquireFrame(t, 1, 1), nodeAddr, 0)
	mustPanic("Step before Persisted", func() { c.Step(acquireFrame(t, 2, 1), nodeAddr, 1) })
}

// TestCoreRestoresQuarantined: a core built from a loaded state starts in
// the restart quarantine at its construction time; Report counts uptime
// from then.
func TestCoreRestoresQuarantined(t *testing.T) {
	c, err := NewCore(testConfig(), stateOf(9, 4, 2, 3), true, 1000)
	if err != nil {
		t.Fatal(err)
	}
	st := c.Status(1000)
	if st.Epoch != 9 || st.QuarantineRemainingNs != testLeaseNs || st.LastHolder != 2 || c.Stats().DurableEpoch != 9 {
		t.Fatalf("status %+v", st)
	}
	if r := c.Report(1000 + 5); r.UptimeNs != 5 || r.Epoch != 9 || r.QuarantineRemainingNs != testLeaseNs-5 {
		t.Fatalf("report %+v", r)
	}
	if _, err := NewCore(testConfig(), arbiter.PersistentState{Epoch: 1, InSyncVersion: 1, LastHolder: 2, Members: inSync(2)}, true, 0); !errors.Is(err, ErrCorruptState) {
		t.Fatalf("a state whose in-sync set holds its last holder restored: %v", err)
	}
}

// flakyConn is a connection whose first Receive fails with an error that
// is not a close and whose every Send fails.
type flakyConn struct {
	bus.Conn
	failedReceive atomic.Bool
}

func (c *flakyConn) Receive(bufs [][]byte, sizes []int, from []netip.AddrPort, wait time.Duration) (int, error) {
	if !c.failedReceive.Swap(true) {
		return 0, errOther
	}
	return c.Conn.Receive(bufs, sizes, from, wait)
}

func (c *flakyConn) Send([][]byte, netip.AddrPort) error { return errOther }

// TestServerCountsTransportErrors: the transport counters live in the
// Server, not the Core, and still reach Stats and the status report.
func TestServerCountsTransportErrors(t *testing.T) {
	mem := bus.NewMemNetwork(1, bus.Faults{})
	inner, addr := listen(t, false, mem)
	s, err := New(testConfig(), &flakyConn{Conn: inner}, t.TempDir())
	if err != nil {
		inner.Close()
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	node, _ := listen(t, false, mem)
	defer node.Close()
	if err := node.Send([][]byte{queryFrame(1)}, addr); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.Stats().SendErrors == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no send error counted: %+v", s.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	st, r := s.Stats(), s.Report()
	if st.ReceiveErrors != 1 || st.SendErrors != 1 || st.Queries != 1 || r.ReceiveErrors != 1 || r.SendErrors != 1 {
		t.Fatalf("stats %+v report %+v", st, r)
	}
}
