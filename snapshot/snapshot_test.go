package snapshot

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/seqbus/seqbus/internal/enginetest"

	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/wire"
)

type counter = enginetest.Counter

const every = 10

type fixture struct {
	fs  *journal.MemFS
	j   *journal.Journal
	s   *Store
	eng *counter
	now int64
}

func newFixture(t *testing.T, fs *journal.MemFS) *fixture {
	t.Helper()
	j, _, err := journal.Open(fs, "/j", journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{fs: fs, j: j, eng: &counter{}}
	f.s = New(Config{Journal: j, Inline: true, NowNs: func() int64 { f.now += 1000; return f.now }, Every: every, ChunkBytes: 8, Burst: 4})
	t.Cleanup(func() { j.Close() })
	return f
}

// apply journals and applies commands up to seq, cutting the periodic
// snapshots on the way.
func (f *fixture) apply(t *testing.T, to uint64) {
	t.Helper()
	for seq := f.eng.Applied + 1; seq <= to; seq++ {
		cmd := []byte{byte(seq)}
		if err := f.j.Append(1, seq, cmd, 0); err != nil {
			t.Fatal(err)
		}
		f.eng.Apply(seq, cmd, nil)
		f.s.Periodic(f.eng, seq, 1)
	}
	if err := f.j.Flush(); err != nil {
		t.Fatal(err)
	}
}

// Snapshots are cut at every multiple of Every, written, reported once
// by Written, and restored into a fresh state machine with the state of
// their seq.
func TestPeriodicSnapshotsAreWrittenAndRestored(t *testing.T) {
	f := newFixture(t, journal.NewMemFS())
	f.apply(t, 25)
	f.s.Finish()
	seq, ok := f.s.Written()
	if !ok || seq != 20 {
		t.Fatalf("written %d %v, want 20", seq, ok)
	}
	if _, again := f.s.Written(); again {
		t.Fatal("Written reported the same snapshot twice")
	}
	if c := f.s.Counters(); c.Written != 2 || f.s.Waiting() != 0 {
		t.Fatalf("counters %+v, %d waiting: want 2 written, none waiting", c, f.s.Waiting())
	}
	if latest, ok := f.s.Latest(); !ok || latest != 20 {
		t.Fatalf("latest %d %v, want 20", latest, ok)
	}
	want := counter{Applied: 20}
	for seq := uint64(1); seq <= 20; seq++ {
		want.Sum += seq
	}
	g := newFixture(t, f.fs) // a restart over the same disk
	seq, epoch, err := g.s.Restore(g.eng)
	if err != nil || seq != 20 || epoch != 1 || *g.eng != want {
		t.Fatalf("restored %d epoch %d %+v (%v), want 20 epoch 1 %+v", seq, epoch, *g.eng, err, want)
	}
	if latest, ok := g.s.Latest(); !ok || latest != 20 {
		t.Fatalf("after a restart, latest %d %v, want 20 from disk", latest, ok)
	}
}

// No snapshot on disk restores nothing and is no error.
func TestRestoreWithoutASnapshot(t *testing.T) {
	f := newFixture(t, journal.NewMemFS())
	if seq, epoch, err := f.s.Restore(f.eng); seq != 0 || epoch != 0 || err != nil {
		t.Fatalf("restore of nothing: %d %d %v", seq, epoch, err)
	}
	if _, ok := f.s.Latest(); ok {
		t.Fatal("a latest snapshot with none written")
	}
}

func collect(s *Store) [][]byte {
	var out [][]byte
	for frame, ok := s.Next(wire.Origin{Stream: 9, Node: 1, Epoch: 1}, 0, nil); ok; frame, ok = s.Next(wire.Origin{Stream: 9, Node: 1, Epoch: 1}, 0, nil) {
		out = append(out, bytes.Clone(frame))
	}
	return out
}

// A standby behind gets a burst of chunks of a snapshot past it (cut on
// demand when none is held); one not behind gets nothing, counted.
func TestServeAnswersAStandbyBehind(t *testing.T) {
	f := newFixture(t, journal.NewMemFS())
	f.apply(t, 5) // no periodic snapshot yet
	f.s.Serve(&wire.SnapshotRequest{SnapshotSeq: 0}, 2, f.eng, 1)
	chunks := collect(f.s)
	if len(chunks) != 2 { // 16 bytes in chunks of 8
		t.Fatalf("%d chunks, want 2", len(chunks))
	}
	c := f.s.Counters()
	if c.OnDemand != 1 || c.ChunksSent != 2 {
		t.Fatalf("counters %+v: want one cut on demand and 2 chunks sent", c)
	}
	// Served from memory, never written: the snapshots on disk (and the
	// journal kept behind the older of them) stay the periodic ones.
	f.s.Finish()
	if _, _, r, err := f.j.OpenLatestSnapshot(); err == nil {
		r.Close()
		t.Fatal("the snapshot cut for a fetch was written")
	}
	if w := f.s.Counters().Written; w != 0 {
		t.Fatalf("%d snapshots written, want 0", w)
	}
	f.s.Serve(&wire.SnapshotRequest{SnapshotSeq: 5}, 2, f.eng, 1)
	if len(collect(f.s)) != 0 || f.s.Counters().RequestsNotBehind != 1 {
		t.Fatalf("a standby not behind got chunks, or was not counted: %+v", f.s.Counters())
	}
	for _, ch := range chunks {
		if fr, _, err := wire.Parse(ch); err != nil || fr.Type != wire.TypeSnapshotChunk {
			t.Fatalf("chunk does not parse as SNAPSHOT_CHUNK: %v", err)
		}
	}
}

// A fetched snapshot replaces the state and is stored, the journal
// continuing after it; one that does not restore changes nothing.
func TestInstall(t *testing.T) {
	src := newFixture(t, journal.NewMemFS())
	src.apply(t, 15)
	var snap bytes.Buffer
	if err := src.eng.Snapshot(&snap); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, journal.NewMemFS())
	f.apply(t, 3)
	if f.s.Install(f.eng, 15, 1, []byte("not a snapshot")) {
		t.Fatal("a bad snapshot installed")
	}
	if f.eng.Applied != 3 || f.s.Counters().Installed != 0 {
		t.Fatalf("a failed install changed the state (%+v) or counted", *f.eng)
	}
	if !f.s.Install(f.eng, 15, 1, snap.Bytes()) {
		t.Fatal("a good snapshot did not install")
	}
	if *f.eng != *src.eng || f.s.Counters().Installed != 1 {
		t.Fatalf("installed %+v, want %+v, counted once", *f.eng, *src.eng)
	}
	if _, last := f.j.Last(); last != 15 {
		t.Fatalf("the journal ends at %d after the install at 15", last)
	}
	g := newFixture(t, f.fs)
	if seq, _, err := g.s.Restore(g.eng); err != nil || seq != 15 || *g.eng != *src.eng {
		t.Fatalf("after a restart, restored %d %+v (%v)", seq, *g.eng, err)
	}
}

// A snapshot that does not verify at a restore is skipped and counted
// (the bad file stays for inspection): the restore falls back to the
// older one; when none verifies it rebuilds from nothing only if the
// journal holds the history from seq 1, and is an error otherwise.
func TestRestoreSkipsBadSnapshots(t *testing.T) {
	f := newFixture(t, journal.NewMemFS())
	f.apply(t, 25)
	f.s.Finish()
	damage := func(seq uint64) {
		t.Helper()
		name := fmt.Sprintf("/j/%020d.snap", seq)
		b, err := f.fs.ReadFileForTest(name)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/2] ^= 0xff
		if err := f.fs.WriteFileForTest(name, b); err != nil {
			t.Fatal(err)
		}
	}
	damage(20)
	g := newFixture(t, f.fs)
	seq, _, err := g.s.Restore(g.eng)
	if err != nil || seq != 10 || g.eng.Applied != 10 || g.s.Counters().Skipped != 1 {
		t.Fatalf("newest snapshot bad: restored %d (applied %d, %v), skipped %d; want 10 and 1", seq, g.eng.Applied, err, g.s.Counters().Skipped)
	}
	g.j.Close()

	damage(10)
	h := newFixture(t, f.fs) // the journal still holds seq 1..25
	if seq, _, err := h.s.Restore(h.eng); err != nil || seq != 0 || h.s.Counters().Skipped != 2 {
		t.Fatalf("every snapshot bad, journal from 1: restored %d (%v), skipped %d; want 0, nil and 2", seq, err, h.s.Counters().Skipped)
	}
	h.j.Close()
	names, _ := f.fs.ReadDir("/j")
	for _, n := range names {
		if strings.HasSuffix(n, ".seg") {
			if err := f.fs.Remove("/j/" + n); err != nil {
				t.Fatal(err)
			}
		}
	}
	k := newFixture(t, f.fs) // no journal left to rebuild from
	if _, _, err := k.s.Restore(k.eng); err == nil || !strings.Contains(err.Error(), "none of 2 verifies") {
		t.Fatalf("every snapshot bad, no journal: %v", err)
	}
}
