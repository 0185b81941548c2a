package snapshot

import (
	"bytes"
	"io"
	"log/slog"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/seqbus/seqbus/internal/enginetest"
	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/wire"
)

// stateAt is the state a seqState holds at seq: its length and bytes
// differ from seq to seq, so a buffer reused while still in use shows.
func stateAt(seq uint64) []byte {
	b := make([]byte, 1500+int(seq*977%2500))
	for i := range b {
		b[i] = byte(seq*31 + uint64(i)*7)
	}
	return b
}

// seqState is a state machine whose snapshot is stateAt(Applied), written
// 1 KiB at a time.
type seqState struct{ enginetest.Counter }

func (s *seqState) Snapshot(w io.Writer) error {
	b := stateAt(s.Applied)
	for len(b) > 0 {
		n := min(len(b), 1024)
		if _, err := w.Write(b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// TestEncodeBuffersReusedOnlyWhenFree drives a store whose writes run on
// their own goroutines through random cuts, starts, polls, finishes,
// serves (cutting on demand), drops and abandons. The encode buffers are
// reused (recycle) only once neither the writer's queue nor the server
// holds them: the snapshot served is always its seq's state, every
// snapshot written reads back as its seq's state, and the race detector
// sees no write to a buffer the writer is reading.
func TestEncodeBuffersReusedOnlyWhenFree(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		j, _, err := journal.Open(journal.NewMemFS(), "/j", journal.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer j.Close()
		start := time.Now()
		s := New(Config{Journal: j, Every: 1 << 40, ChunkBytes: 512, Burst: 64, NowNs: func() int64 { return int64(time.Since(start)) },
			Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
		defer s.Finish()
		eng := &seqState{}
		checkServed := func(t *rapid.T) {
			seq, ok := s.srv.Latest()
			if !ok {
				return
			}
			if !bytes.Equal(s.served, stateAt(seq)) {
				t.Fatalf("the snapshot served at %d is not its state", seq)
			}
		}
		checkDisk := func(t *rapid.T) {
			seq, _, r, err := j.OpenLatestSnapshot()
			if err != nil {
				return // none written yet
			}
			defer r.Close()
			got, err := io.ReadAll(r)
			if err != nil || !bytes.Equal(got, stateAt(seq)) {
				t.Fatalf("snapshot %d on disk is not its state (%v)", seq, err)
			}
		}
		t.Repeat(map[string]func(*rapid.T){
			"cut": func(t *rapid.T) {
				seq := eng.Applied + 1
				if err := j.Append(1, seq, []byte{1}, 0); err != nil {
					t.Fatal(err)
				}
				eng.Applied = seq
				if _, ok := s.Cut(eng, seq, 1); !ok {
					t.Fatal("cut failed")
				}
			},
			"start":  func(*rapid.T) { s.Start() },
			"poll":   func(*rapid.T) { s.Poll() },
			"finish": func(t *rapid.T) { s.Finish(); checkDisk(t) },
			"serve": func(t *rapid.T) {
				s.Serve(&wire.SnapshotRequest{}, 2, eng, 1)
				for _, ok := s.Next(wire.Origin{}, 0, nil); ok; _, ok = s.Next(wire.Origin{}, 0, nil) {
				}
			},
			"drop":    func(*rapid.T) { s.Drop() },
			"abandon": func(*rapid.T) { s.Abandon() },
			"": func(t *rapid.T) {
				checkServed(t)
				if len(s.queued) != s.Waiting() {
					t.Fatalf("%d buffers queued, the writer has %d waiting", len(s.queued), s.Waiting())
				}
			},
		})
		s.Finish()
		checkServed(t)
		checkDisk(t)
	})
}

// TestEncodeBuffersTakeTurns: in steady state (cut, write, serve) a cut
// encodes into the buffer of the snapshot served two cuts before, so no
// cut allocates its state's size.
func TestEncodeBuffersTakeTurns(t *testing.T) {
	j, _, err := journal.Open(journal.NewMemFS(), "/j", journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	s := New(Config{Journal: j, Every: 1 << 40, ChunkBytes: 512, Burst: 4, NowNs: func() int64 { return 0 }})
	eng := &bulk{stateBytes: 64 << 10}
	var bufs [][]byte
	for seq := uint64(1); seq <= 8; seq++ {
		if err := j.Append(1, seq, []byte{1}, 0); err != nil {
			t.Fatal(err)
		}
		eng.Applied = seq
		data, ok := s.Cut(eng, seq, 1)
		if !ok {
			t.Fatal("cut failed")
		}
		bufs = append(bufs, data)
		s.Finish()
		if seq >= 5 && !sameBuffer(data, bufs[seq-3]) {
			t.Fatalf("cut %d did not reuse the buffer of cut %d", seq, seq-2)
		}
	}
}
