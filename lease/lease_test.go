package lease

import (
	"bytes"
	"errors"
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/witness"
)

var (
	witnessAddr = netip.MustParseAddrPort("127.0.0.1:7100")
	nodeAddr    = netip.MustParseAddrPort("127.0.0.1:7101")
)

type harness struct {
	c       *Client
	sent    [][]byte
	replies int
	now     int64
}

// tick runs the client's Tick at h.now and returns the witness core's
// replies to the requests it sent (each state write taken as durable).
func (h *harness) tick(core *witness.Core) [][]byte {
	h.sent = h.sent[:0]
	h.c.Tick(h.now, true)
	var replies [][]byte
	for _, req := range h.sent {
		rd := core.Step(req, nodeAddr, h.now)
		reply := rd.Reply
		if rd.MustPersist {
			reply = core.Persisted(nil)
		}
		if reply != nil {
			replies = append(replies, append([]byte(nil), reply...))
		}
	}
	return replies
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{}
	c, err := New(Config{Node: 1, Stream: 1, Lease: arbiter.DefaultConfig(), Witness: witnessAddr, After: 1,
		Send: func(pkt []byte, to netip.AddrPort) {
			if to != witnessAddr {
				t.Errorf("a request went to %v, not the witness", to)
			}
			h.sent = append(h.sent, append([]byte(nil), pkt...))
		},
		OnReply: func(arbiter.Reply, int64) { h.replies++ },
		NowNs:   func() int64 { return h.now },
	})
	if err != nil || c == nil {
		t.Fatalf("New: %v, %v", c, err)
	}
	h.c = c
	return h
}

// A static node has no client, and a nil client answers as a node
// without a lease.
func TestStaticNodeHasNoClient(t *testing.T) {
	c, err := New(Config{Node: 1})
	if c != nil || err != nil {
		t.Fatalf("a node without a witness or arbiter got a client %v (%v)", c, err)
	}
	if c.Keeper() != nil || c.Tick(0, true) || c.Close() != nil {
		t.Fatal("a nil client has a keeper, went silent or failed to close")
	}
	if _, err := c.OnDatagram([]byte{1}, witnessAddr, 0); !errors.Is(err, ErrUnexpected) {
		t.Fatalf("a lease frame to a static node: %v, want ErrUnexpected", err)
	}
}

// The client's requests reach a witness, whose grant, taken from the
// node's socket, gives the keeper the lease; frames from elsewhere, or
// that do not decode, are refused by reason.
func TestGrantFromTheWitness(t *testing.T) {
	h := newHarness(t)
	core, err := witness.NewCore(witness.DefaultConfig(), arbiter.PersistentState{}, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	lease := arbiter.DefaultConfig().LeaseDurationNs
	for h.now = 0; h.now < 10*lease && !h.c.Keeper().MayLead(h.now); h.now += lease / 20 {
		for _, reply := range h.tick(core) {
			if _, err := h.c.OnDatagram(reply, nodeAddr, h.now); !errors.Is(err, ErrUnexpected) {
				t.Fatalf("a reply from another address: %v, want ErrUnexpected", err)
			}
			if _, err := h.c.OnDatagram(reply, witnessAddr, h.now); err != nil {
				t.Fatalf("the witness's reply: %v", err)
			}
		}
	}
	if !h.c.Keeper().MayLead(h.now) {
		t.Fatal("no lease after ten lease durations of a witness granting")
	}
	if held, _, epoch := h.c.Lease(h.now); !held || epoch == 0 {
		t.Fatalf("lease held %v epoch %d after a grant", held, epoch)
	}
	if _, err := h.c.OnDatagram([]byte{1, 2, 3}, witnessAddr, h.now); err == nil || errors.Is(err, ErrUnexpected) {
		t.Fatalf("garbage from the witness: %v, want a decode error", err)
	}
	if h.replies != 0 {
		t.Fatalf("OnReply ran %d times: the UDP witness's replies come back from OnDatagram", h.replies)
	}
}

// A witness that never answers is reported silent once per episode.
func TestSilentWitnessReportedOnce(t *testing.T) {
	h := newHarness(t)
	lease := arbiter.DefaultConfig().LeaseDurationNs
	silent := 0
	for h.now = 0; h.now < 10*lease; h.now += lease / 10 {
		if h.c.Tick(h.now, true) {
			silent++
		}
	}
	if silent != 1 || len(h.sent) == 0 {
		t.Fatalf("silent reported %d times over ten lease durations, %d requests sent: want once, some", silent, len(h.sent))
	}
}

// A node the witness refuses by the in-sync rule (the last holder ran
// alone, this node is not in the set) says so once an episode, not at
// every retry; a grant ends the episode.
func TestNotInSyncRefusalLoggedOnce(t *testing.T) {
	h := newHarness(t)
	var logs bytes.Buffer
	h.c.cfg.Log = slog.New(slog.NewTextHandler(&logs, nil))
	// The witness's record: node 2 led epoch 5 alone.
	core, err := witness.NewCore(witness.DefaultConfig(), arbiter.PersistentState{Epoch: 5, InSyncVersion: 3, LastHolder: 2}, true, 0)
	if err != nil {
		t.Fatal(err)
	}
	lease := arbiter.DefaultConfig().LeaseDurationNs
	step := func() {
		for _, reply := range h.tick(core) {
			if _, err := h.c.OnDatagram(reply, witnessAddr, h.now); err != nil {
				t.Fatal(err)
			}
		}
	}
	const msg = "not in the in-sync set"
	// The witness's restart quarantine refuses everyone: not this rule.
	for h.now = 0; h.now < lease*9/10; h.now += lease / 10 {
		step()
	}
	if strings.Contains(logs.String(), msg) {
		t.Fatalf("the restart quarantine was taken for an in-sync refusal:\n%s", logs.String())
	}
	for ; h.now < 6*lease; h.now += lease / 10 {
		step()
	}
	if n := strings.Count(logs.String(), msg); n != 1 || h.c.Keeper().MayLead(h.now) {
		t.Fatalf("%d refusals logged over 5 leases after the quarantine (may lead %v):\n%s", n, h.c.Keeper().MayLead(h.now), logs.String())
	}
	// The operator's override names node 1: after the restarted witness's
	// quarantine it is granted, which ends the episode; a later refusal
	// starts a new one and is logged again.
	set, _ := arbiter.MakeInSyncSet([]arbiter.NodeID{1}, 2)
	core, err = witness.NewCore(witness.DefaultConfig(), arbiter.PersistentState{Epoch: 5, InSyncVersion: 4, LastHolder: 2, Members: set}, true, h.now)
	if err != nil {
		t.Fatal(err)
	}
	for end := h.now + 3*lease; h.now < end && !h.c.Keeper().MayLead(h.now); h.now += lease / 10 {
		step()
	}
	if !h.c.Keeper().MayLead(h.now) || h.c.notInSync {
		t.Fatalf("after the override: may lead %v, still refused %v", h.c.Keeper().MayLead(h.now), h.c.notInSync)
	}
	h.c.noteReply(&arbiter.Reply{Kind: arbiter.ReplyDeny, Epoch: 6})
	if n := strings.Count(logs.String(), msg); n != 2 {
		t.Fatalf("a refusal after a grant logged %d times in all, want 2:\n%s", n, logs.String())
	}
}

// A refusal of a node of another history (the arbiter pinned another
// id than its requests name) is not logged as the in-sync rule's: the
// node logs FOREIGN HISTORY itself, and the in-sync advice would
// mislead its operator.
func TestForeignRefusalIsNotAnInSyncRefusal(t *testing.T) {
	h := newHarness(t)
	var logs bytes.Buffer
	h.c.cfg.Log = slog.New(slog.NewTextHandler(&logs, nil))
	h.c.Keeper().SetHistory(0xaa)
	const msg = "not in the in-sync set"
	h.c.noteReply(&arbiter.Reply{Kind: arbiter.ReplyDeny, Epoch: 6, History: 0xbb})
	if strings.Contains(logs.String(), msg) || h.c.notInSync {
		t.Fatalf("a refusal of another history was taken for an in-sync refusal:\n%s", logs.String())
	}
	h.c.noteReply(&arbiter.Reply{Kind: arbiter.ReplyDeny, Epoch: 6, History: 0xaa})
	if n := strings.Count(logs.String(), msg); n != 1 {
		t.Fatalf("a refusal of our own history logged %d times, want once:\n%s", n, logs.String())
	}
}

// A grant for another lease than the node's --lease is warned of once:
// the keeper stays safe (it times its view by the shorter), but a renew
// interval past the arbiter's lease costs a new term at every renewal.
func TestLeaseMismatchWarnedOnce(t *testing.T) {
	h := newHarness(t)
	var logs bytes.Buffer
	h.c.cfg.Log = slog.New(slog.NewTextHandler(&logs, nil))
	own := h.c.cfg.Lease.LeaseDurationNs
	h.c.noteReply(&arbiter.Reply{Kind: arbiter.ReplyGrant, Epoch: 1, DurationNs: own})
	const msg = "grants another lease than this node's --lease"
	if strings.Contains(logs.String(), msg) {
		t.Fatalf("a grant of the node's own lease warned:\n%s", logs.String())
	}
	for range 3 {
		h.c.noteReply(&arbiter.Reply{Kind: arbiter.ReplyGrant, Epoch: 2, DurationNs: own / 3})
	}
	if n := strings.Count(logs.String(), msg); n != 1 {
		t.Fatalf("three grants of a third of the node's lease warned %d times, want once:\n%s", n, logs.String())
	}
}
