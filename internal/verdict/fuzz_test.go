package verdict

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzVerify feeds seqbus verify hostile client record files against a
// real history (a primary of two epochs and its standby, the standby
// behind a snapshot): a record file is untrusted input (a user's, or a
// client cut off mid-line). For any file Verify never panics (an index
// from a record once indexed past a frame's outputs); it either refuses
// the file with an error or reports on it, and its counts never exceed
// the outputs the file holds. The clean record of the history verifies
// with nothing lost, duplicated, conflicting or stale.
func FuzzVerify(f *testing.F) {
	h := plan(12, 7)
	dir := f.TempDir()
	prim, sb := filepath.Join(dir, "p"), filepath.Join(dir, "s")
	writeNode(f, prim, h, 0, nil)
	writeNode(f, sb, h[:9], 6, nil)
	clean := recordBytes(seen(f, h))
	f.Add(clean)
	f.Add(recordBytes(staleRecord(f, h, false)))
	f.Add([]byte(`{"epoch":1,"seq":3,"index":7,"session":5,"payload":"00"}` + "\n"))
	f.Add([]byte(`{"epoch":9,"seq":99999,"index":0,"session":5,"answer":true,"kind":"ack","result":"ack","payload":"zz"}` + "\n"))
	f.Add([]byte("{\n"))
	recDir := f.TempDir()
	f.Fuzz(func(t *testing.T, rec []byte) {
		path := filepath.Join(recDir, "client.jsonl")
		if err := os.WriteFile(path, rec, 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := Verify(Options{Records: []string{path}, Nodes: []string{prim, sb}})
		if err != nil {
			return
		}
		if res.Primary != prim {
			t.Fatalf("primary %s, want %s", res.Primary, prim)
		}
		n := uint64(bytes.Count(rec, []byte("\n")) + 1)
		if res.Received > n || res.Answers > res.Received {
			t.Fatalf("received %d, answers %d from %d lines", res.Received, res.Answers, n)
		}
		if res.Lost+res.Duplicates+res.Conflicts+res.Stale > 2*res.Received+n {
			t.Fatalf("counts %+v past %d outputs", got(res), res.Received)
		}
		if res.HashMismatches != 0 {
			t.Fatalf("%d hash mismatches between two replicas of one history", res.HashMismatches)
		}
		if bytes.Equal(rec, clean) && got(res) != (counts{}) {
			t.Fatalf("the clean record: %+v", got(res))
		}
	})
}
