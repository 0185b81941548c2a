package witness

import (
	"testing"
	"time"

	"github.com/seqbus/seqbus/arbiter"
)

// TestRestartLetsTheHolderRenewAtOnce (issue 15 item 2): a witness
// restarted on its state directory lets the persisted holder renew its
// epoch at once, with the same epoch (it is the only node that can be
// leading), while every other node waits out one lease; the holder's
// renew ends the wait, and nothing new is persisted.
func TestRestartLetsTheHolderRenewAtOnce(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			// The steps after the restart must all fall inside its
			// quarantine, on the real clock: a lease long against any
			// scheduling stall of a loaded test machine (the 200 ms of
			// testLeaseNs was not, under -race).
			const leaseNs = int64(5 * time.Second)
			p := genTestPair(t, tr.real, "")
			p.leaseNs = leaseNs
			p.restart(t)
			g := p.roundTrip(t, acquireFrame(t, 1, 10))
			if !g.Granted() || g.Epoch != 1 {
				t.Fatalf("first grant %+v", g)
			}
			p.restart(t)
			if r := p.roundTrip(t, acquireFrame(t, 2, 1)); r.Granted() {
				t.Fatalf("another node granted during the restart quarantine: %+v", r)
			}
			r := p.roundTrip(t, renewFrame(t, 1, 11, 1))
			if !r.Granted() || r.Epoch != 1 || r.DurationNs != leaseNs {
				t.Fatalf("holder's renew after the restart: %+v, want granted at epoch 1 for a full lease", r)
			}
			if r := p.roundTrip(t, acquireFrame(t, 2, 2)); r.Granted() || r.Holder != 1 || r.Epoch != 1 {
				t.Fatalf("another node's acquire while the holder renews: %+v, want held by 1 at epoch 1", r)
			}
			st := p.server.Stats()
			if st.Persists != 0 || st.GrantsNewEpoch != 0 {
				t.Fatalf("a renew through the restart persisted or made a new epoch: %+v", st)
			}
		})
	}
}

// TestRestartAfterTheHolderDiedWaitsOneLease: the holder's process died
// and restarted too (it acquires: it lost what it had not synced). Nobody
// is granted before one lease has passed since the witness restarted;
// then the holder gets a new epoch.
func TestRestartAfterTheHolderDiedWaitsOneLease(t *testing.T) {
	store := &memStore{state: arbiter.PersistentState{Epoch: 4, InSyncVersion: 6, LastHolder: 1, Members: inSync(2)}, found: true}
	s := newTestServer(t, store)
	at := s.lastNowNs
	for _, pkt := range [][]byte{acquireFrame(t, 1, 100), acquireFrame(t, 2, 100), renewFrame(t, 2, 101, 4), renewFrame(t, 1, 102, 3)} {
		if r := mustReply(t, s.handle(pkt, nodeAddr, at+testLeaseNs-1)); r.Granted() || r.Epoch != 4 {
			t.Fatalf("granted during the quarantine: %+v", r)
		}
	}
	// Too late for the old process: the lease it may have had is over.
	if r := mustReply(t, s.handle(renewFrame(t, 1, 103, 4), nodeAddr, at+testLeaseNs)); r.Granted() {
		t.Fatalf("renew after the quarantine: %+v", r)
	}
	r := mustReply(t, s.handle(acquireFrame(t, 1, 104), nodeAddr, at+testLeaseNs))
	if !r.Granted() || r.Epoch != 5 {
		t.Fatalf("acquire after the quarantine: %+v, want epoch 5", r)
	}
}

// TestRetriedAcquireCrossingItsGrantKeepsTheEpoch (issue 15 item 3): a
// node's acquire is granted epoch 1; the node renews (so the reply cache
// holds the renew), and then a late copy of its acquire arrives. It is
// the same request as the one that started the term: no new term, the
// epoch stays 1 and the node's next renew is granted.
func TestRetriedAcquireCrossingItsGrantKeepsTheEpoch(t *testing.T) {
	const ms = int64(time.Millisecond)
	s := newTestServer(t, &memStore{})
	if g := mustReply(t, s.handle(acquireFrame(t, 1, 7), nodeAddr, 0)); !g.Granted() || g.Epoch != 1 {
		t.Fatalf("grant %+v", g)
	}
	mustReply(t, s.handle(renewFrame(t, 1, 8, 1), nodeAddr, 40*ms))
	late := mustReply(t, s.handle(acquireFrame(t, 1, 7), nodeAddr, 50*ms))
	if !late.Granted() || late.Epoch != 1 {
		t.Fatalf("late copy of the acquire: %+v, want the same grant of epoch 1", late)
	}
	if r := mustReply(t, s.handle(renewFrame(t, 1, 9, 1), nodeAddr, 60*ms)); !r.Granted() || r.Epoch != 1 {
		t.Fatalf("renew after the late acquire: %+v, want granted at epoch 1", r)
	}
	if st := s.Stats(); st.GrantsNewEpoch != 1 || s.Status().Epoch != 1 {
		t.Fatalf("new epochs %d, epoch %d: want one epoch", st.GrantsNewEpoch, s.Status().Epoch)
	}
}
