package verdict

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/journal"
)

const vSession = 5

// cmdAt is the command sequenced at seq in the synthetic histories:
// alternating buys and sells at one price, so that they trade (executions)
// and rest (acks).
func cmdAt(seq uint64) []byte {
	side := engine.Buy
	if seq%2 == 0 {
		side = engine.Sell
	}
	return engine.AppendRequest(nil, vSession, seq, &engine.Request{Op: engine.OpNewOrder, Instrument: 1, Side: side, Type: engine.Limit, Price: 100, Qty: 1 + seq%3})
}

type vrec struct {
	epoch uint64
	cmd   []byte
}

// plan is seqs 1..n of epoch 1, from epoch2At on epoch 2.
func plan(n, epoch2At uint64) []vrec {
	out := make([]vrec, 0, n)
	for seq := uint64(1); seq <= n; seq++ {
		e := uint64(1)
		if epoch2At != 0 && seq >= epoch2At {
			e = 2
		}
		out = append(out, vrec{e, cmdAt(seq)})
	}
	return out
}

// writeNode writes recs (seq i+1) to dir's journal; with snapAt, a
// snapshot of the engine's state there (snapState, when set, is applied
// instead of recs up to snapAt) and the journal compacted behind it.
func writeNode(t testing.TB, dir string, recs []vrec, snapAt uint64, snapState []vrec) {
	t.Helper()
	j, _, err := journal.Open(journal.OSFS{}, dir, journal.Options{SegmentBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	eng, err := engine.New(engine.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		seq := uint64(i + 1)
		if err := j.Append(r.epoch, seq, r.cmd, 0); err != nil {
			t.Fatal(err)
		}
		if snapState != nil && seq <= snapAt {
			eng.Apply(seq, snapState[i].cmd, nil)
		} else {
			eng.Apply(seq, r.cmd, nil)
		}
		if seq == snapAt {
			var buf bytes.Buffer
			if err := eng.Snapshot(&buf); err != nil {
				t.Fatal(err)
			}
			if err := j.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := j.WriteSnapshot(seq, r.epoch, func(w io.Writer) error { _, err := w.Write(buf.Bytes()); return err }); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	if snapAt != 0 {
		// Behind this one snapshot (Compact would keep the journal from
		// the empty state until a second one exists).
		if _, err := j.CompactBehind(snapAt); err != nil {
			t.Fatal(err)
		}
	}
}

// seen is what a client received: every output of the session for recs,
// one frame per seq, in seq order.
func seen(t testing.TB, recs []vrec) []client.RecordLine {
	t.Helper()
	eng, err := engine.New(engine.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	var lines []client.RecordLine
	for i, r := range recs {
		seq := uint64(i + 1)
		c := &lineCollector{epoch: r.epoch, seq: seq}
		eng.Apply(seq, r.cmd, c)
		lines = append(lines, c.lines...)
	}
	return lines
}

type lineCollector struct {
	epoch, seq uint64
	lines      []client.RecordLine
}

func (c *lineCollector) Emit(to uint64, p []byte) {
	if to != vSession {
		return
	}
	o, _ := engine.ParseOutput(p)
	l := client.RecordLine{Node: 1, Epoch: c.epoch, Seq: c.seq, Index: len(c.lines), Session: vSession, ClientOrderID: o.ClientOrderID,
		Kind: client.KindName(o.Kind), Payload: hex.EncodeToString(p)}
	if o.Kind == engine.KindAck {
		l.Result, l.Answer = "ack", true
	}
	c.lines = append(c.lines, l)
}

func writeRecord(t *testing.T, path string, lines []client.RecordLine) {
	t.Helper()
	if err := os.WriteFile(path, recordBytes(lines), 0o644); err != nil {
		t.Fatal(err)
	}
}

// recordBytes is lines as a client's record file holds them.
func recordBytes(lines []client.RecordLine) []byte {
	var b bytes.Buffer
	for _, l := range lines {
		j, _ := json.Marshal(l)
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// staleRecord is the record of history h with the output just before
// the first of epoch 2 arriving after it: stale, and refused by the
// client (marked dropped) when dropped.
func staleRecord(t testing.TB, h []vrec, dropped bool) []client.RecordLine {
	lines := seen(t, h)
	for i, l := range lines {
		if l.Epoch == 2 {
			lines[i-1], lines[i] = lines[i], lines[i-1]
			lines[i].Dropped = dropped
			break
		}
	}
	return lines
}

type counts struct{ lost, dups, conflicts, hashes, stale uint64 }

func got(r *Result) counts {
	return counts{r.Lost, r.Duplicates, r.Conflicts, r.HashMismatches, r.Stale}
}

func TestVerifySyntheticHistories(t *testing.T) {
	full := plan(20, 0)
	clean := seen(t, full)
	if len(clean) < 25 {
		t.Fatalf("only %d outputs: the history does not trade", len(clean))
	}
	alt := make([]vrec, len(full))
	copy(alt, full)
	alt[9] = vrec{1, engine.AppendRequest(nil, 9, 1, &engine.Request{Op: engine.OpNewOrder, Instrument: 2, Side: engine.Buy, Type: engine.Limit, Price: 1, Qty: 1})}
	// Long enough to span segments of 4 KB, so that compaction drops some.
	big := plan(200, 0)
	bigClean := seen(t, big)
	other := plan(150, 0)
	for i := range other {
		other[i].cmd = engine.AppendRequest(nil, 8, uint64(i+1), &engine.Request{Op: engine.OpNewOrder, Instrument: 3, Side: engine.Sell, Type: engine.Limit, Price: 7, Qty: 1})
	}
	twoEpochs := plan(20, 11)
	// seqs 1..15 of full, then 5 other commands at epoch 2
	cut15 := append(append([]vrec(nil), full[:15]...), other[:5]...)
	for i := 15; i < 20; i++ {
		cut15[i].epoch = 2
	}
	cases := []struct {
		name             string
		primary, standby []vrec
		pSnap, sSnap     uint64
		sSnapState       []vrec
		record           func() []client.RecordLine
		want             counts
		check            func(t *testing.T, r *Result)
	}{
		{name: "clean", primary: full, standby: full, record: func() []client.RecordLine { return clean },
			check: func(t *testing.T, r *Result) {
				if r.Checked != uint64(len(clean)) || r.Received != uint64(len(clean)) {
					t.Errorf("checked %d of %d received, want all %d", r.Checked, r.Received, len(clean))
				}
				if r.Nodes[1].Role != "standby" || r.Nodes[1].HashesCompared != 20 {
					t.Errorf("standby %+v: want 20 hashes compared", r.Nodes[1])
				}
			}},
		{name: "lost: the client saw seqs the final primary does not have", primary: full[:15], standby: full[:15],
			record: func() []client.RecordLine { return clean },
			want:   counts{lost: uint64(len(clean) - len(seen(t, full[:15])))}},
		{name: "conflict: the standby holds another command at seq 10", primary: full, standby: alt,
			record: func() []client.RecordLine { return clean },
			// The records differ once; the ack of seq 10 is checked
			// against the standby too.
			want: counts{conflicts: 2}},
		{name: "hash mismatch: the standby's snapshot is of another history", primary: big, standby: big, sSnap: 150, sSnapState: other,
			record: func() []client.RecordLine { return bigClean },
			// seq 150 (the snapshot) to 200
			want: counts{hashes: 51}},
		{name: "lost: a frame that runs past the end of its epoch in the final history", primary: cut15, standby: cut15,
			record: func() []client.RecordLine {
				// The outputs of seqs 14..17 arrive in one frame of seq 14.
				lines := append([]client.RecordLine(nil), clean...)
				idx := 0
				for i := range lines {
					if lines[i].Seq >= 14 && lines[i].Seq <= 17 {
						lines[i].Seq, lines[i].Index = 14, idx
						idx++
					}
				}
				return lines
			},
			want: counts{lost: uint64(len(clean) - len(seen(t, full[:15])))}},
		{name: "duplicate: order 3 acked again at another (epoch, seq)", primary: full, standby: full,
			record: func() []client.RecordLine {
				lines := append([]client.RecordLine(nil), clean...)
				for _, l := range clean {
					if l.Kind == "ack" && l.ClientOrderID == 3 {
						l.Epoch, l.Seq, l.Index = 2, 21, 0
						lines = append(lines, l)
					}
				}
				return lines
			},
			want: counts{dups: 1, lost: 1}},
		{name: "answered from the dedup table: a duplicate under the last applied seq of the old epoch", primary: cut15, standby: cut15,
			record: func() []client.RecordLine {
				// After the failover the new primary (epoch 2) answers a
				// resend of order 3 from its table, unsequenced, in a frame
				// under its last applied seq (15, an epoch-1 record).
				lines := seen(t, full[:15])
				for _, l := range lines {
					if l.Kind == "ack" && l.ClientOrderID == 3 {
						l.Epoch, l.Seq, l.Index, l.Kind = 2, 15, 0, "duplicate"
						l.Payload = "06" + l.Payload
						lines = append(lines, l)
						break
					}
				}
				return lines
			},
			check: func(t *testing.T, r *Result) {
				if r.FromTable != 1 {
					t.Errorf("from table %d, want the duplicate backed by its original", r.FromTable)
				}
			}},
		{name: "answered from the dedup table in the frame of its original, which starts at an earlier seq", primary: full, standby: full,
			record: func() []client.RecordLine {
				// The outputs of seqs 2..5 arrive in one frame of seq 2;
				// in it, after them, the table's duplicate answer of the
				// order acked at seq 5 (its original lies above the
				// frame's seq, before it in the frame).
				var lines []client.RecordLine
				var dup *client.RecordLine
				idx := 0
				for _, l := range clean {
					if l.Seq >= 2 && l.Seq <= 5 {
						if l.Kind == "ack" && l.Seq == 5 {
							d := l
							dup = &d
						}
						l.Seq, l.Index = 2, idx
						idx++
					}
					lines = append(lines, l)
				}
				if dup == nil {
					t.Fatal("no ack at seq 5 in the plan")
				}
				dup.Seq, dup.Index, dup.Kind = 2, idx, "duplicate"
				dup.Payload = "06" + dup.Payload
				return append(lines, *dup)
			},
			check: func(t *testing.T, r *Result) {
				if r.FromTable != 1 {
					t.Errorf("from table %d, want the duplicate backed by its original in the same frame", r.FromTable)
				}
			}},
		{name: "lost: a duplicate answer whose original the history never emitted", primary: full, standby: full,
			record: func() []client.RecordLine {
				lines := append([]client.RecordLine(nil), clean...)
				for _, l := range clean {
					if l.Kind == "ack" {
						o, _ := engine.ParseOutput(mustHex(l.Payload))
						o.ClientOrderID = 4000
						l.ClientOrderID, l.Kind = 4000, "duplicate"
						l.Payload = "06" + hex.EncodeToString(engine.AppendOutput(nil, &o))
						lines = append(lines, l)
						break
					}
				}
				return lines
			},
			want: counts{lost: 1}},
		{name: "stale: an epoch-1 output after an epoch-2 one", primary: twoEpochs, standby: twoEpochs,
			record: func() []client.RecordLine { return staleRecord(t, twoEpochs, false) },
			want:   counts{stale: 1},
			check: func(t *testing.T, r *Result) {
				if r.StaleDelivered != 1 {
					t.Errorf("stale delivered %d, want 1: the record does not mark it dropped", r.StaleDelivered)
				}
			}},
		{name: "stale, refused by the client's epoch fence", primary: twoEpochs, standby: twoEpochs,
			record: func() []client.RecordLine { return staleRecord(t, twoEpochs, true) },
			want:   counts{stale: 1},
			check: func(t *testing.T, r *Result) {
				if r.StaleDelivered != 0 || !r.OK() {
					t.Errorf("stale delivered %d, OK %v: want 0 and OK (the client's fence refused it; it is in the final history)", r.StaleDelivered, r.OK())
				}
			}},
		{name: "compacted: a frame that began below the snapshot and runs past it", primary: big, pSnap: 150, standby: big,
			record: func() []client.RecordLine {
				// The outputs of seqs 147..154 arrive in one frame of seq
				// 147 (seqbus chaos, fill-primary-disk: the answers of
				// seqs 151..154 were reported lost, their orders not in
				// the dedup table of the snapshot at 150).
				lines := append([]client.RecordLine(nil), bigClean...)
				idx := 0
				for i := range lines {
					if lines[i].Seq >= 147 && lines[i].Seq <= 154 {
						lines[i].Seq, lines[i].Index = 147, idx
						idx++
					}
				}
				return lines
			},
			check: func(t *testing.T, r *Result) {
				if r.Checked < 4 {
					t.Errorf("checked %d: want the frame's outputs past the snapshot found at their seqs", r.Checked)
				}
			}},
		{name: "compacted: answers older than the journal in the snapshot's dedup table", primary: big, pSnap: 150, standby: big,
			record: func() []client.RecordLine {
				lines := append([]client.RecordLine(nil), bigClean...)
				// an ack of an order the history never had, older than
				// the primary's journal
				fake := bigClean[0]
				o, _ := engine.ParseOutput(mustHex(fake.Payload))
				o.ClientOrderID = 5000
				fake.ClientOrderID, fake.Payload = 5000, hex.EncodeToString(engine.AppendOutput(nil, &o))
				lines = append(lines, fake)
				return lines
			},
			want: counts{lost: 1},
			check: func(t *testing.T, r *Result) {
				if r.InSnapshot == 0 || r.Unchecked == 0 || r.Nodes[0].SnapshotSeq != 150 || r.Nodes[0].First == 1 {
					t.Errorf("in snapshot %d, unchecked %d, primary %+v: want answers before seq 13 found in the snapshot", r.InSnapshot, r.Unchecked, r.Nodes[0])
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			p, s := filepath.Join(dir, "node1"), filepath.Join(dir, "node2")
			writeNode(t, p, c.primary, c.pSnap, nil)
			writeNode(t, s, c.standby, c.sSnap, c.sSnapState)
			rec := filepath.Join(dir, "client.jsonl")
			writeRecord(t, rec, c.record())
			r, err := Verify(Options{Records: []string{rec}, Nodes: []string{p, s}, Primary: p})
			if err != nil {
				t.Fatal(err)
			}
			// A stale output the client refused is reported, not a failure.
			wantOK := c.want == counts{} || (c.want == counts{stale: c.want.stale} && r.StaleDelivered == 0)
			if got(r) != c.want || r.OK() != wantOK {
				t.Fatalf("got %+v (OK %v), want %+v\n%s", got(r), r.OK(), c.want, strings.Join(r.Lines(), "\n"))
			}
			if c.check != nil {
				c.check(t, r)
			}
		})
	}
}

// Verify reads only: the directories are byte for byte the same after.
func TestVerifyWritesNothing(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "node1")
	writeNode(t, p, plan(20, 0), 12, nil)
	before := dirBytes(t, p)
	if _, err := Verify(Options{Nodes: []string{p}}); err != nil {
		t.Fatal(err)
	}
	if after := dirBytes(t, p); after != before {
		t.Fatal("verify changed the node directory")
	}
}

func dirBytes(t *testing.T, dir string) string {
	t.Helper()
	names, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(dir, n.Name()))
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(n.Name())
		b.Write(data)
	}
	return b.String()
}

// A record whose last line is torn (its client killed while writing it)
// is verified up to the tear, which the result names, not refused whole.
func TestReadRecordsTornTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.jsonl")
	if err := os.WriteFile(path, []byte(`{"seq":1,"index":0,"session":1}`+"\n"+`{"seq":2,"ind`), 0o644); err != nil {
		t.Fatal(err)
	}
	lines, err := readRecords(path)
	var torn tornTail
	if !errors.As(err, &torn) || len(lines) != 1 || !strings.Contains(string(torn), "c.jsonl: line 2") {
		t.Fatalf("readRecords: %d lines, %v", len(lines), err)
	}
}

// Two journals that end at the same (epoch, seq): the final primary is
// the one whose status file says it led, in either order.
func TestPickPrimaryTie(t *testing.T) {
	a := &replica{NodeReport: NodeReport{Dir: "n1", LastEpoch: 3, Last: 100}}
	b := &replica{NodeReport: NodeReport{Dir: "n2", LastEpoch: 3, Last: 100}, saysPrimary: true}
	for _, reps := range [][]*replica{{a, b}, {b, a}} {
		if got := pickPrimary(reps, ""); got != b {
			t.Fatalf("picked %s, want n2 (its status says primary)", got.Dir)
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "status.json"), []byte(`{"role":"primary","epoch":3}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if !saysPrimary(journal.OSFS{}, dir) || saysPrimary(journal.OSFS{}, t.TempDir()) {
		t.Fatal("saysPrimary reads the status file's role")
	}
}

// A final primary whose journal was compacted behind a snapshot that is
// now gone cannot be replayed: verify says so (an error, exit 2), where
// it used to count every received output lost.
func TestVerifyPrimaryWithoutSnapshot(t *testing.T) {
	big := plan(200, 0)
	dir := t.TempDir()
	p := filepath.Join(dir, "p")
	writeNode(t, p, big, 150, nil)
	snaps, err := filepath.Glob(filepath.Join(p, "*snap*"))
	if err != nil || len(snaps) == 0 {
		t.Fatalf("no snapshot file written (%v)", err)
	}
	for _, s := range snaps {
		if err := os.Remove(s); err != nil {
			t.Fatal(err)
		}
	}
	rec := filepath.Join(dir, "c.jsonl")
	writeRecord(t, rec, seen(t, big))
	_, err = Verify(Options{FS: journal.OSFS{}, Nodes: []string{p}, Records: []string{rec}})
	if err == nil || !strings.Contains(err.Error(), "cannot be replayed") {
		t.Fatalf("verify of a primary without its snapshot: %v", err)
	}
}

// A standby that installed a snapshot and journaled nothing after it
// ends its history at the snapshot (its epoch), so it is a standby of the
// final primary, not a deposed node at epoch 0.
func TestVerifySnapshotOnlyStandby(t *testing.T) {
	big := plan(200, 0)
	dir := t.TempDir()
	p, s := filepath.Join(dir, "p"), filepath.Join(dir, "s")
	writeNode(t, p, big, 150, nil)
	snaps, err := filepath.Glob(filepath.Join(p, "*snap*"))
	if err != nil || len(snaps) != 1 {
		t.Fatalf("snapshots %v (%v)", snaps, err)
	}
	if err := os.MkdirAll(s, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(snaps[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s, filepath.Base(snaps[0])), b, 0o644); err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(dir, "c.jsonl")
	writeRecord(t, rec, seen(t, big))
	r, err := Verify(Options{FS: journal.OSFS{}, Nodes: []string{p, s}, Records: []string{rec}})
	if err != nil {
		t.Fatal(err)
	}
	n := r.Nodes[1]
	if n.Role != "standby" || n.LastEpoch != 1 || n.First != 0 || !strings.Contains(strings.Join(r.Lines(), "\n"), "journal empty (epoch 1)") {
		t.Fatalf("the snapshot-only node: %+v\n%s", n, strings.Join(r.Lines(), "\n"))
	}
}

// Directories of different histories (journal.HistoryFile): without
// --primary verify refuses to guess (the longest journal, here the
// foreign one, would be taken for the final primary); with it, the
// other history's node is reported as foreign and never compared.
func TestVerifyForeignHistory(t *testing.T) {
	dir := t.TempDir()
	p, f := filepath.Join(dir, "p"), filepath.Join(dir, "f")
	own := plan(200, 0)
	writeNode(t, p, own, 0, nil)
	writeNode(t, f, plan(300, 0), 0, nil)
	for d, id := range map[string]uint64{p: 0xaaaa, f: 0xbbbb} {
		if err := journal.WriteHistoryID(journal.OSFS{}, d, id); err != nil {
			t.Fatal(err)
		}
	}
	rec := filepath.Join(dir, "c.jsonl")
	writeRecord(t, rec, seen(t, own))
	if _, err := Verify(Options{FS: journal.OSFS{}, Nodes: []string{p, f}, Records: []string{rec}}); err == nil || !strings.Contains(err.Error(), "different histories") {
		t.Fatalf("two histories, no --primary: %v", err)
	}
	r, err := Verify(Options{FS: journal.OSFS{}, Nodes: []string{p, f}, Records: []string{rec}, Primary: p})
	if err != nil {
		t.Fatal(err)
	}
	out := strings.Join(r.Lines(), "\n")
	if !r.OK() || r.Nodes[1].Role != "foreign" || r.Nodes[1].History != "000000000000bbbb" || r.Nodes[0].History != "000000000000aaaa" ||
		!strings.Contains(out, "another history than the final primary's") {
		t.Fatalf("with --primary: ok %v %+v\n%s", r.OK(), r.Nodes, out)
	}
}
