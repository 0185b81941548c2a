package journal

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
)

const testDir = "/j"

type record struct {
	epoch, seq uint64
	payload    []byte
}

// tb is the part of testing.TB that *rapid.T also has.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

func payloadFor(seq uint64, n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(seq*31 + uint64(i)*7 + 1)
	}
	return p
}

func mustOpen(t tb, fsys FS, dir string, opts Options) (*Journal, Recovery) {
	t.Helper()
	j, rec, err := Open(fsys, dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return j, rec
}

func appendRange(t tb, j *Journal, epoch, from, to uint64, size func(seq uint64) int) []record {
	t.Helper()
	var out []record
	for seq := from; seq <= to; seq++ {
		p := payloadFor(seq, size(seq))
		if err := j.Append(epoch, seq, p, int64(seq)); err != nil {
			t.Fatalf("Append(%d, %d): %v", epoch, seq, err)
		}
		out = append(out, record{epoch, seq, p})
	}
	return out
}

func fixed(n int) func(uint64) int { return func(uint64) int { return n } }

func varied(seq uint64) int { return int(seq*13%61) + 1 }

func readAll(t tb, j *Journal) []record {
	t.Helper()
	first := j.First()
	if first == 0 {
		return nil
	}
	var out []record
	err := j.ReadFrom(first, func(epoch, seq uint64, payload []byte) bool {
		out = append(out, record{epoch, seq, append([]byte(nil), payload...)})
		return true
	})
	if err != nil {
		t.Fatalf("ReadFrom(%d): %v", first, err)
	}
	return out
}

func checkRecords(t tb, got, want []record) {
	t.Helper()
	if err := diffRecords(got, want); err != nil {
		t.Fatal(err)
	}
}

func diffRecords(got, want []record) error {
	if len(got) != len(want) {
		return fmt.Errorf("got %d records, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].epoch != want[i].epoch || got[i].seq != want[i].seq || !bytes.Equal(got[i].payload, want[i].payload) {
			return fmt.Errorf("record %d: got (%d, %d, %x), want (%d, %d, %x)", i,
				got[i].epoch, got[i].seq, got[i].payload, want[i].epoch, want[i].seq, want[i].payload)
		}
	}
	return nil
}

func segPath(firstSeq uint64) string { return filepath.Join(testDir, segmentName(firstSeq)) }

// forEachFS runs f on a MemFS and on the real file system in a temp dir.
func forEachFS(t *testing.T, f func(t *testing.T, fsys FS, dir string)) {
	t.Run("memfs", func(t *testing.T) { f(t, NewMemFS(), testDir) })
	t.Run("osfs", func(t *testing.T) { f(t, OSFS{}, t.TempDir()) })
}

func isCorrupt(err error) bool {
	var ce *CorruptError
	return errors.Is(err, ErrCorrupt) && errors.As(err, &ce)
}
