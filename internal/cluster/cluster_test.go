package cluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/wire"
)

// procState is the state letter of /proc/pid/stat (R, S, T, ...).
func procState(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])[0]
}

// TestProcsSuperviseByName: a child logs to Dir/<name>.log, stops and
// resumes on SIGSTOP/SIGCONT, exits on SIGTERM with its own status, and
// one that ignores SIGTERM is killed at the stop timeout.
func TestProcsSuperviseByName(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	p := &Procs{Bin: "/bin/sh", Dir: t.TempDir()}
	defer p.StopAll()
	if err := p.Start("polite", "-c", "trap 'exit 3' TERM; echo up; while :; do sleep 0.02; done"); err != nil {
		t.Fatal(err)
	}
	if err := p.Start("stubborn", "-c", "trap '' TERM; while :; do sleep 0.02; done"); err != nil {
		t.Fatal(err)
	}
	c := p.Get("polite")
	if err := Poll(context.Background(), 5*time.Second, 10*time.Millisecond, func() bool { return strings.Contains(c.Log(), "up") }); err != nil {
		t.Fatalf("no output in %s: %v", c.LogPath, err)
	}
	if c.LogPath != filepath.Join(p.Dir, "polite.log") || p.Pid("polite") != c.Pid() || p.Pid("none") != 0 {
		t.Fatalf("log %s pid %d/%d", c.LogPath, p.Pid("polite"), c.Pid())
	}
	if th := c.Threads(); !strings.HasPrefix(th, "1 threads:") {
		t.Fatalf("Threads of a running shell: %q", th)
	}
	// Pause returns only once the child is stopped, with no polling.
	if err := p.Pause("polite", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if st := procState(t, c.Pid()); st != "T" {
		t.Fatalf("Pause returned with the child in state %s", st)
	}
	if th := c.Threads(); th != "1 threads: 1 T" && !strings.HasPrefix(th, "1 threads: 1 T (") {
		t.Fatalf("Threads of a stopped shell: %q", th)
	}
	if err := p.Pause("none", time.Second); err == nil {
		t.Fatal("Pause of no child: no error")
	}
	p.Signal("polite", syscall.SIGCONT)
	if err := Poll(context.Background(), 5*time.Second, 10*time.Millisecond, func() bool { return procState(t, c.Pid()) != "T" }); err != nil {
		t.Fatal("SIGCONT: still stopped")
	}
	if _, err := p.Wait("polite", 50*time.Millisecond); err == nil {
		t.Fatal("Wait on a running child returned no error")
	}
	st, err := p.Stop("polite", 5*time.Second)
	if err != nil || st.ExitCode() != 3 {
		t.Fatalf("Stop: %v, exit %v", err, st)
	}
	if _, err := p.Stop("stubborn", 200*time.Millisecond); err == nil {
		t.Fatal("Stop of a child ignoring SIGTERM: no timeout error")
	}
	if !p.Get("stubborn").Exited() {
		t.Fatal("the child ignoring SIGTERM survived its stop")
	}
	if _, err := p.Wait("none", time.Millisecond); err == nil {
		t.Fatal("Wait on no child: no error")
	}
}

func TestPoll(t *testing.T) {
	if err := Poll(context.Background(), time.Second, time.Millisecond, func() bool { return true }); err != nil {
		t.Fatal(err)
	}
	if err := Poll(context.Background(), 20*time.Millisecond, time.Millisecond, func() bool { return false }); !errors.Is(err, ErrTimeout) {
		t.Fatalf("timeout: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Poll(ctx, time.Minute, time.Millisecond, func() bool { return false }); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

func writeStatus(t *testing.T, dir, body string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "status.json"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestLocalPrimary: the primary is the live node primary at the highest
// epoch; a dead node's stale status does not count.
func TestLocalPrimary(t *testing.T) {
	l, err := NewLocal("/nonexistent", t.TempDir(), 3, 77)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Nodes) != 3 || l.Witness.Port() == 0 || !l.Group.Addr().IsMulticast() {
		t.Fatalf("addresses: witness %v group %v nodes %v", l.Witness, l.Group, l.Nodes)
	}
	if id, _ := l.Primary(); id != 0 {
		t.Fatalf("primary %d without a status", id)
	}
	writeStatus(t, l.NodeDir(1), `{"role":"primary","epoch":1,"in_sync":{"members":[2]}}`)
	writeStatus(t, l.NodeDir(2), `{"role":"primary","epoch":2,"state_hash":"00000000000000ff"}`)
	writeStatus(t, l.NodeDir(3), `{"role":"standby","epoch":2}`)
	if id, st := l.Primary(); id != 2 || st.Epoch != 2 || st.StateHash != 0xff {
		t.Fatalf("primary %d %+v, want node 2 at epoch 2", id, st)
	}
	l.Dead[2] = true
	if id, st := l.Primary(); id != 1 || len(st.InSync.Members) != 1 {
		t.Fatalf("primary %d %+v with node 2 dead, want node 1", id, st)
	}
	if _, _, err := l.WaitPrimary(context.Background(), 1, 2, 30*time.Millisecond); !errors.Is(err, ErrNoPrimary) {
		t.Fatalf("WaitPrimary(not 1, epoch >= 2): %v", err)
	}
	if id, _, err := l.WaitPrimary(context.Background(), 0, 1, time.Second); err != nil || id != 1 {
		t.Fatalf("WaitPrimary: %d %v", id, err)
	}
	if got := l.IDs(); len(got) != 3 || got[0] != 1 || got[2] != 3 {
		t.Fatalf("IDs %v", got)
	}
}

// TestRecordOutputs: every output of an OUTPUT frame is recorded with the
// frame's node, epoch and seq; anything else is ignored.
func TestRecordOutputs(t *testing.T) {
	frame, em := outputFrame(t)
	data, err := wire.AppendData(nil, wire.TypeData, wire.Origin{Stream: 1, Node: 2, Epoch: 3}, 10, []byte("command"))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(5, 0)
	var l seenLog
	l.add(at, [][]byte{frame, data, []byte("junk")}, []int{len(frame), len(data), 4}, 3)
	got := l.Snapshot()
	if len(got) != len(em.msgs) {
		t.Fatalf("recorded %d outputs, want %d: %+v", len(got), len(em.msgs), got)
	}
	for i, msg := range em.msgs {
		want, _ := engine.ParseOutput(msg)
		if got[i].O != want || got[i].Node != 2 || got[i].Epoch != 3 || got[i].Seq != 10 || !got[i].At.Equal(at) {
			t.Errorf("output %d: %+v, want %+v from node 2 epoch 3 seq 10", i, got[i], want)
		}
	}
	if got[0].O.Kind != engine.KindAck {
		t.Errorf("first output %v, want the ack", got[0].O)
	}
	if n := len(RecordOutputs(nil, frame, at)); n != len(em.msgs) {
		t.Fatalf("RecordOutputs: %d", n)
	}
}

// outputFrame is an OUTPUT frame from node 2 at epoch 3, seq 10, with
// the outputs the engine emits for a new order (an ack and market data).
func outputFrame(t *testing.T) ([]byte, *captured) {
	t.Helper()
	eng, err := engine.New(engine.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	r := engine.Request{Op: engine.OpNewOrder, Instrument: 1, Side: engine.Side(1), Type: engine.Limit, Price: 1000, Qty: 10}
	em := &captured{}
	eng.Apply(1, engine.AppendRequest(nil, 9, 1, &r), em)
	if len(em.msgs) < 2 {
		t.Fatalf("the engine emitted %d outputs for a new order, want an ack and market data", len(em.msgs))
	}
	frame, err := wire.AppendData(nil, wire.TypeOutput, wire.Origin{Stream: 1, Node: 2, Epoch: 3}, 10, em.msgs...)
	if err != nil {
		t.Fatal(err)
	}
	return frame, em
}

// captured keeps every output the engine emits.
type captured struct{ msgs [][]byte }

func (c *captured) Emit(_ uint64, payload []byte) {
	c.msgs = append(c.msgs, append([]byte(nil), payload...))
}

// writeJournal writes orders 1..n of session 9 (payload of order bad
// altered when bad > 0) at epoch 1.
func writeJournal(t *testing.T, dir string, n, bad int) {
	t.Helper()
	// Small segments: reading a journal scans its preallocated tail.
	j, _, err := journal.Open(journal.OSFS{}, dir, journal.Options{SegmentBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		r := engine.Request{Op: engine.OpNewOrder, Instrument: 1, Side: engine.Side(1 + i%2), Type: engine.Limit, Price: 1000, Qty: 10}
		if i == bad {
			r.Qty = 11
		}
		if err := j.Append(1, uint64(i), engine.AppendRequest(nil, 9, uint64(i), &r), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestReadJournal: the digest covers every record, the replay applies
// them, and CompareJournals finds a differing record and a shorter log.
func TestReadJournal(t *testing.T) {
	base := t.TempDir()
	a, b, c := filepath.Join(base, "a"), filepath.Join(base, "b"), filepath.Join(base, "c")
	writeJournal(t, a, 20, 0)
	writeJournal(t, b, 20, 3)
	writeJournal(t, c, 15, 0)
	ja, err := ReadJournal(a, JournalOptions{Replay: true, Engine: engine.DefaultConfig(), Session: 9})
	if err != nil {
		t.Fatal(err)
	}
	if ja.First != 1 || ja.Last != 20 || len(ja.Digests) != 20 || ja.Applied != 20 || ja.Hash == 0 {
		t.Fatalf("journal a: first %d last %d digests %d applied %d hash %#x", ja.First, ja.Last, len(ja.Digests), ja.Applied, ja.Hash)
	}
	if len(ja.Epochs) != 1 || ja.Epochs[0] != (EpochRun{Epoch: 1, FirstSeq: 1, Records: 20}) {
		t.Fatalf("epochs %v", ja.Epochs)
	}
	if ja.Records[5] != 1 || len(ja.Results[5]) != 1 || ja.Results[5][0].Kind != engine.KindAck {
		t.Fatalf("order 5: records %d results %v", ja.Records[5], ja.Results[5])
	}
	jb, err := ReadJournal(b, JournalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	jc, err := ReadJournal(c, JournalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d := CompareJournals(ja, ja); d != nil {
		t.Fatalf("a against itself: %v", d)
	}
	if d := CompareJournals(ja, jb); len(d) != 1 || !strings.Contains(d[0], "at seq 3") {
		t.Fatalf("a against b: %v", d)
	}
	if d := CompareJournals(ja, jc); len(d) != 1 || !strings.Contains(d[0], "ends at 15") {
		t.Fatalf("a against c: %v", d)
	}
	if jb.Applied != 0 || len(jb.Records) != 0 {
		t.Fatalf("without Replay: applied %d records %d", jb.Applied, len(jb.Records))
	}
}
