package snapshot

import (
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/seqbus/seqbus/internal/enginetest"
	"github.com/seqbus/seqbus/journal"
)

// bulk is a state machine whose snapshot is stateBytes written 4 KiB at
// a time, as a state machine behind a bufio.Writer writes (the matching
// engine's does).
type bulk struct {
	enginetest.Counter
	stateBytes int
}

func (b *bulk) Snapshot(w io.Writer) error {
	chunk := make([]byte, 4096)
	for n := 0; n < b.stateBytes; n += len(chunk) {
		if _, err := w.Write(chunk[:min(len(chunk), b.stateBytes-n)]); err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkCut is the owner's (a node's agent's) cost of cutting a
// snapshot of a 256 KiB and a 4 MiB state: the encoding into memory, the
// hand-off to the writer. Each is then written and served (outside the
// timer), as a node's periodic snapshots are.
func BenchmarkCut(b *testing.B) {
	for _, size := range []int{256 << 10, 4 << 20} {
		b.Run(sizeName(size), func(b *testing.B) {
			j, _, err := journal.Open(journal.NewMemFS(), "/j", journal.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer j.Close()
			start := time.Now()
			s := New(Config{Journal: j, Every: 1 << 40, ChunkBytes: 1024, Burst: 4, NowNs: func() int64 { return int64(time.Since(start)) }})
			eng := &bulk{stateBytes: size}
			b.ReportAllocs()
			b.SetBytes(int64(size))
			for i := 0; i < b.N; i++ {
				if _, ok := s.Cut(eng, uint64(i+1), 1); !ok {
					b.Fatal("cut failed")
				}
				b.StopTimer()
				s.Finish()
				if seq, ok := s.srv.Latest(); !ok || seq != uint64(i+1) {
					b.Fatalf("serving %d, %v after cut %d", seq, ok, i+1)
				}
				b.StartTimer()
			}
		})
	}
}

func sizeName(n int) string { return fmt.Sprintf("%dKiB", n>>10) }
