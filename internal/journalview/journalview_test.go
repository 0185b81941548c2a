package journalview

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/journal"
)

// writeOrderJournal writes n new orders (epoch 1, then 2 for the second
// half) to a fresh directory and returns it and each record's offset.
func writeOrderJournal(t *testing.T, n int) (string, []int64) {
	t.Helper()
	dir := t.TempDir()
	j, _, err := journal.Open(journal.OSFS{}, dir, journal.Options{SegmentBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	var offs []int64
	var off int64
	for seq := uint64(1); seq <= uint64(n); seq++ {
		cmd := engine.AppendRequest(nil, 42, seq, &engine.Request{Op: engine.OpNewOrder, Instrument: 1, Side: engine.Buy, Type: engine.Limit, Price: int64(1000 + seq), Qty: 5})
		epoch := uint64(1)
		if seq > uint64(n/2) {
			epoch = 2
		}
		if err := j.Append(epoch, seq, cmd, 0); err != nil {
			t.Fatal(err)
		}
		offs = append(offs, off)
		off += int64(24 + len(cmd))
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, offs
}

func dumpSeqs(t *testing.T, out string) []uint64 {
	t.Helper()
	var seqs []uint64
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var r DumpRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("dump line %q: %v", sc.Text(), err)
		}
		if r.Session != 42 || r.OrderID != r.Seq || r.Command.Op != "new_order" {
			t.Fatalf("dump record %+v", r)
		}
		seqs = append(seqs, r.Seq)
	}
	return seqs
}

func TestGoodJournal(t *testing.T) {
	dir, _ := writeOrderJournal(t, 40)
	var out bytes.Buffer
	if err := Verify(&out, dir, journal.InspectOptions{}, false); err != nil || !strings.HasPrefix(out.String(), "OK "+dir+": 40 records, seq 1..40, highest epoch 2") {
		t.Fatalf("verify: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := Dump(&out, dir, journal.InspectOptions{}, 10, 19, "json"); err != nil {
		t.Fatal(err)
	}
	if seqs := dumpSeqs(t, out.String()); len(seqs) != 10 || seqs[0] != 10 || seqs[9] != 19 {
		t.Fatalf("dump 10..19: %v", seqs)
	}
	out.Reset()
	if err := Describe(&out, dir, journal.InspectOptions{}, "text"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"journal " + dir + " (live; sets here: live)", "records 40  seq 1..40  highest epoch 2", "00000000000000000001.seg", "no snapshots"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("describe lacks %q:\n%s", want, out.String())
		}
	}
}

// TestDamagedJournal: verify names the damaged record's offset; dump
// writes every record before it; a journal set aside is found and read.
func TestDamagedJournal(t *testing.T) {
	dir, offs := writeOrderJournal(t, 40)
	seg := filepath.Join(dir, "00000000000000000001.seg")
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	b[offs[20]+30] ^= 1
	if err := os.WriteFile(seg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = Verify(&out, dir, journal.InspectOptions{}, false)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("at offset %d (expected seq 21)", offs[20])) || !strings.Contains(err.Error(), "valid up to seq 20") {
		t.Fatalf("verify of a flipped byte: %v", err)
	}
	err = Dump(&out, dir, journal.InspectOptions{}, 0, 0, "json")
	if seqs := dumpSeqs(t, out.String()); err == nil || len(seqs) != 20 || seqs[19] != 20 {
		t.Fatalf("dump of a damaged journal: %v, %d records", err, len(seqs))
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if err := os.Rename(p, p+".corrupt-1764580000"); err != nil {
			t.Fatal(err)
		}
	}
	var note bytes.Buffer
	opts, err := PickSet(&note, dir, "")
	if err != nil || opts.Set != ".corrupt-1764580000" || !strings.Contains(note.String(), "reading the set aside as .corrupt-1764580000") {
		t.Fatalf("the only set: %+v %v %q", opts, err, note.String())
	}
	if opts, err = PickSet(&note, dir, "corrupt-1764580000"); err != nil || opts.Set != ".corrupt-1764580000" {
		t.Fatalf("--set corrupt-1764580000: %+v %v", opts, err)
	}
	if _, err = PickSet(&note, dir, "corrupt-1"); err == nil || !strings.Contains(err.Error(), "sets: corrupt-1764580000") {
		t.Fatalf("an unknown set: %v", err)
	}
	out.Reset()
	if err := Dump(&out, dir, opts, 0, 0, "text"); err == nil || strings.Count(out.String(), "\n") != 20 ||
		!strings.Contains(out.String(), "seq 20 epoch 1 session 42 order 20: new_order buy limit") {
		t.Fatalf("text dump of the set aside: %v\n%s", err, out.String())
	}
}

func TestSetNames(t *testing.T) {
	if got := SetNames([]string{"", ".corrupt-1"}); got != "live, corrupt-1" {
		t.Fatalf("SetNames = %q", got)
	}
	if got := SetNames(nil); got != "none" {
		t.Fatalf("SetNames(nil) = %q", got)
	}
}

// TestShortJournal: a journal cut at a record boundary (or emptied) is
// valid record by record, but ends below the durable seq the node's
// status.json reported: verify fails and describe names the problem; a
// status the journal reaches changes nothing.
func TestShortJournal(t *testing.T) {
	dir, offs := writeOrderJournal(t, 40)
	status := func(durable int) {
		if err := os.WriteFile(filepath.Join(dir, "status.json"), fmt.Appendf(nil, `{"id":1,"durable":%d}`, durable), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	status(40)
	if err := Verify(&out, dir, journal.InspectOptions{}, false); err != nil {
		t.Fatalf("a journal at its status's durable seq: %v", err)
	}
	if err := os.Truncate(filepath.Join(dir, "00000000000000000001.seg"), offs[25]); err != nil {
		t.Fatal(err)
	}
	want := "history ends at seq 25, below the durable seq 40 that status.json reported"
	if err := Verify(&out, dir, journal.InspectOptions{}, false); err == nil || !strings.Contains(err.Error(), "FAIL "+dir+": "+want) {
		t.Fatalf("verify of a journal cut at seq 25: %v", err)
	}
	out.Reset()
	if err := Describe(&out, dir, journal.InspectOptions{}, "text"); err != nil || !strings.Contains(out.String(), "PROBLEM "+want) {
		t.Fatalf("describe: %v\n%s", err, out.String())
	}
	status(25)
	if err := Verify(&out, dir, journal.InspectOptions{}, false); err != nil {
		t.Fatalf("status at 25: %v", err)
	}
}
