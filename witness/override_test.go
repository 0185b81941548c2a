package witness

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/internal/dirlock"
	"github.com/seqbus/seqbus/internal/syncbuf"
)

// TestOverrideOnStoppedWitnessOnly is the dead end and the way out, over
// the state file: node 1 led epoch 7 alone and is gone, so node 2 is
// refused as not in sync. While a witness runs on the directory neither
// an override nor a second witness may touch it; once it stopped, the
// override allows node 2, and the restarted witness grants it epoch 8
// after its quarantine, and still refuses node 3.
func TestOverrideOnStoppedWitnessOnly(t *testing.T) {
	dir := t.TempDir()
	if err := (&fileStore{dir: dir}).Save(stateOf(7, 4, 1)); err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	cfg := testConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	s, err := New(cfg, newMemConn(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 2; i++ {
		if r := mustReply(t, s.handle(acquireFrame(t, 2, i), nodeAddr, s.nowNs()+testLeaseNs)); r.Granted() || s.Stats().Denies[arbiter.ReasonNotInSync] != i {
			t.Fatalf("node 2 before the override: %+v", r)
		}
	}
	// Told once an episode, in the log and in the status.
	if n := strings.Count(logs.String(), "NO NODE MAY BE PROMOTED"); n != 1 || !strings.Contains(logs.String(), "seqbus witness override") {
		t.Fatalf("%d warnings:\n%s", n, logs.String())
	}
	if b := s.Report().PromotionBlocked; b != 2 {
		t.Fatalf("status promotion_blocked %d, want 2", b)
	}
	if _, err := ApplyOverride(dir, Override{Allow: []arbiter.NodeID{2}}); !errors.Is(err, dirlock.ErrLocked) {
		t.Fatalf("override beside a running witness: %v, want ErrLocked", err)
	}
	if _, err := New(testConfig(), newMemConn(t), dir); !errors.Is(err, dirlock.ErrLocked) {
		t.Fatalf("a second witness on the directory: %v, want ErrLocked", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	res, err := ApplyOverride(dir, Override{Allow: []arbiter.NodeID{2}})
	if err != nil {
		t.Fatal(err)
	}
	if rep := res.Report(); !strings.Contains(rep, "grants epoch 8") || !strings.Contains(rep, "before: epoch 7, last holder 1, in-sync set version 4 []") {
		t.Fatalf("report:\n%s", rep)
	}
	s, err = New(testConfig(), newMemConn(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	after := s.nowNs() + testLeaseNs
	if r := mustReply(t, s.handle(acquireFrame(t, 3, 1), nodeAddr, after)); r.Granted() {
		t.Fatalf("node 3, not allowed: %+v", r)
	}
	// A refusal while the set names a member is an ordinary failover's
	// lagging standby, not the dead end.
	if b := s.Report().PromotionBlocked; b != 0 {
		t.Fatalf("status promotion_blocked %d after node 3's refusal with node 2 in sync, want 0", b)
	}
	if r := mustReply(t, s.handle(acquireFrame(t, 2, 2), nodeAddr, after)); !r.Granted() || r.Epoch != 8 {
		t.Fatalf("node 2 after the override: %+v, want epoch 8", r)
	}
	if b := s.Report().PromotionBlocked; b != 0 {
		t.Fatalf("status promotion_blocked %d after a grant, want 0", b)
	}
}

// TestOverrideRefusals: each refusal names its reason and leaves the
// file as it was; a dry run writes nothing.
func TestOverrideRefusals(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, StateFileName)
	if _, err := ApplyOverride(dir, Override{Allow: []arbiter.NodeID{2}}); !errors.Is(err, arbiter.ErrOverride) {
		t.Fatalf("no record: %v", err)
	}
	if _, err := ApplyOverride(dir, Override{}); !errors.Is(err, arbiter.ErrOverride) {
		t.Fatalf("nothing asked: %v", err)
	}
	if _, err := ApplyOverride(dir, Override{Allow: []arbiter.NodeID{2}, Epoch: 9}); !errors.Is(err, arbiter.ErrOverride) {
		t.Fatalf("both asked: %v", err)
	}
	if _, err := ApplyOverride(filepath.Join(dir, "missing"), Override{Epoch: 9}); err == nil {
		t.Fatal("a missing directory was overridden")
	}
	if err := (&fileStore{dir: dir}).Save(stateOf(7, 4, 1)); err != nil {
		t.Fatal(err)
	}
	was, _ := os.ReadFile(path)
	for _, o := range []Override{{Epoch: 7}, {Epoch: 3}, {Allow: []arbiter.NodeID{1}}, {Allow: []arbiter.NodeID{0}}} {
		if _, err := ApplyOverride(dir, o); !errors.Is(err, arbiter.ErrOverride) {
			t.Errorf("%+v: %v, want ErrOverride", o, err)
		}
	}
	res, err := ApplyOverride(dir, Override{Allow: []arbiter.NodeID{2, 3}, DryRun: true})
	if err != nil || res.Written || res.After.Members.N != 2 || !strings.Contains(res.Report(), "dry run") {
		t.Fatalf("dry run: %+v, %v", res, err)
	}
	if now, _ := os.ReadFile(path); !bytes.Equal(now, was) {
		t.Fatal("a refusal or a dry run changed the record")
	}
}

// TestOverrideCorruptRecord: an unreadable record cannot be given a set,
// only rewritten at a new epoch, after which any node may acquire above
// it.
func TestOverrideCorruptRecord(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, StateFileName), []byte("SBWE garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ApplyOverride(dir, Override{Allow: []arbiter.NodeID{2}}); !errors.Is(err, ErrCorruptState) {
		t.Fatalf("allow over a corrupt record: %v", err)
	}
	// The last status file the witness wrote still says how far it got:
	// an epoch at or below it is refused (a typo would reuse epochs).
	st, _ := json.Marshal(StatusReport{Role: "witness", Epoch: 41, DurableEpoch: 41})
	if err := os.WriteFile(filepath.Join(dir, StatusFileName), st, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ApplyOverride(dir, Override{Epoch: 41}); !errors.Is(err, arbiter.ErrOverride) || !strings.Contains(err.Error(), "not above 41") {
		t.Fatalf("an epoch at the status file's: %v", err)
	}
	res, err := ApplyOverride(dir, Override{Epoch: 50})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Report(), "before: unreadable") || !strings.Contains(res.Report(), "grants epoch 51 to any node") {
		t.Fatalf("report:\n%s", res.Report())
	}
	s, err := New(testConfig(), newMemConn(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if r := mustReply(t, s.handle(acquireFrame(t, 4, 1), nodeAddr, s.nowNs()+testLeaseNs)); !r.Granted() || r.Epoch != 51 {
		t.Fatalf("after the rewrite: %+v", r)
	}
}
