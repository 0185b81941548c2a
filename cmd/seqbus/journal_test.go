package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/internal/journalview"
	"github.com/seqbus/seqbus/journal"
)

// writeOrderJournal writes n new orders, as a node journals them, to a
// fresh directory and returns it and each record's offset.
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

func runSeqbus(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(buildBinary(t), args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

func dumpSeqs(t *testing.T, out string) []uint64 {
	t.Helper()
	var seqs []uint64
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var r journalview.DumpRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("dump line %q: %v", sc.Text(), err)
		}
		if r.Session != 42 || r.OrderID != r.Seq || r.Command.Op != "new_order" || r.Command.Price != int64(1000+r.Seq) {
			t.Fatalf("dump record %+v", r)
		}
		seqs = append(seqs, r.Seq)
	}
	return seqs
}

func TestJournalCommand(t *testing.T) {
	dir, offs := writeOrderJournal(t, 100)
	if out, errOut, code := runSeqbus(t, "journal", "verify", dir); code != 0 || !strings.Contains(out, "OK") {
		t.Fatalf("verify of a good journal: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code := runSeqbus(t, "journal", "dump", dir, "--from", "10", "--to", "19")
	if seqs := dumpSeqs(t, out); code != 0 || len(seqs) != 10 || seqs[0] != 10 || seqs[9] != 19 {
		t.Fatalf("dump --from 10 --to 19: exit %d, seqs %v\n%s", code, seqs, errOut)
	}
	out, _, code = runSeqbus(t, "journal", "describe", dir)
	if code != 0 || !strings.Contains(out, "00000000000000000001.seg") || !strings.Contains(out, "records 100  seq 1..100  highest epoch 2") {
		t.Fatalf("describe: exit %d\n%s", code, out)
	}

	// One flipped byte in the middle of the segment: verify names the
	// record's offset and exits 1; dump prints every record before it.
	seg := filepath.Join(dir, "00000000000000000001.seg")
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	b[offs[60]+30] ^= 1
	if err := os.WriteFile(seg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = runSeqbus(t, "journal", "verify", dir)
	if code != 1 || !strings.Contains(errOut, fmt.Sprintf("at offset %d (expected seq 61)", offs[60])) {
		t.Fatalf("verify after a flipped byte: exit %d, want 1 naming offset %d\n%s%s", code, offs[60], out, errOut)
	}
	out, errOut, code = runSeqbus(t, "journal", "dump", dir)
	if seqs := dumpSeqs(t, out); code != 1 || len(seqs) != 60 || seqs[59] != 60 || !strings.Contains(errOut, "offset") {
		t.Fatalf("dump of a damaged journal: exit %d, %d records\n%s", code, len(seqs), errOut)
	}

	// A directory with no journal in it (a mistyped path) is no empty
	// journal: every subcommand says so and exits 1.
	for _, sub := range []string{"verify", "dump", "describe"} {
		if out, errOut, code := runSeqbus(t, "journal", sub, t.TempDir()); code != 1 || !strings.Contains(errOut, "no journal: no segment or snapshot files") {
			t.Fatalf("journal %s of an empty directory: exit %d\n%s%s", sub, code, out, errOut)
		}
	}

	// Set aside as a node does it: still readable, and nothing is changed.
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if err := os.Rename(p, p+".corrupt-1764580000"); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, code = runSeqbus(t, "journal", "dump", "--set", "corrupt-1764580000", dir, "--format", "text")
	if code != 1 || strings.Count(out, "\n") != 60 || !strings.Contains(out, "seq 60 epoch 2 session 42 order 60: new_order buy limit") {
		t.Fatalf("dump of a set-aside journal: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code = runSeqbus(t, "journal", "verify", dir); code != 1 || !strings.Contains(errOut, "set aside as .corrupt-1764580000") {
		t.Fatalf("verify of the only set: exit %d\n%s", code, errOut)
	}
	after, err := os.ReadFile(seg + ".corrupt-1764580000")
	if err != nil || !bytes.Equal(after, b) {
		t.Fatalf("inspection changed the set-aside segment (%v)", err)
	}
}
