package storage

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/seqbus/seqbus/journal"
)

// TestHistoryProperty runs random histories of writes (synced or not),
// cuts back to forks, restarts and crashes over one disk. After every
// step the state machine is exactly the journal's prefix (never a state
// the journal does not hold), a crash loses at most what was not synced,
// and a cut keeps the history up to the fork or discards it down to a
// snapshot below the fork and says so (refetching).
func TestHistoryProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		fs := journal.NewMemFS()
		c := config(fs, nil)
		s := mustOpen(rt, c)
		var synced uint64 // everything at or below is on disk for good
		check := func(what string) {
			eng := s.Engine().(*counter)
			_, last := s.Journal().Last()
			if eng.Applied != last || eng.Sum != sumTo(last) {
				rt.Fatalf("%s: state applied %d sum %d, journal ends at %d", what, eng.Applied, eng.Sum, last)
			}
		}
		for range rapid.IntRange(1, 12).Draw(rt, "steps") {
			switch rapid.IntRange(0, 4).Draw(rt, "op") {
			case 0, 1: // write
				to := s.Engine().AppliedSeq() + rapid.Uint64Range(1, 15).Draw(rt, "records")
				sync := rapid.Bool().Draw(rt, "sync")
				writeRecords(rt, s, to, sync)
				if sync {
					synced = to
				}
				check("write")
			case 2: // cut back to a fork
				applied := s.Engine().AppliedSeq()
				fork := rapid.Uint64Range(0, applied).Draw(rt, "fork")
				if err := s.ResetTo(fork); err != nil {
					rt.Fatal(err)
				}
				got := s.Engine().AppliedSeq()
				// Kept to the fork, or discarded down to a snapshot below it
				// (a prefix of the shared history) and marked to refetch.
				if got != fork && (got > fork || !s.Refetching()) {
					rt.Fatalf("cut at %d of %d: applied %d, refetching %v", fork, applied, got, s.Refetching())
				}
				if err := s.Journal().Sync(); err != nil {
					rt.Fatal(err)
				}
				synced = got
				check("cut")
			case 3: // restart
				if err := s.Journal().Sync(); err != nil {
					rt.Fatal(err)
				}
				before := s.Engine().AppliedSeq()
				s.Journal().Close()
				s = mustOpen(rt, c)
				if got := s.Engine().AppliedSeq(); got != before {
					rt.Fatalf("restart: applied %d, was %d", got, before)
				}
				synced = before
				check("restart")
			case 4: // crash
				fs.Crash(rapid.Uint64().Draw(rt, "seed"))
				s = mustOpen(rt, c)
				if got := s.Engine().AppliedSeq(); got < synced {
					rt.Fatalf("crash: applied %d, below the %d synced", got, synced)
				}
				synced = s.Engine().AppliedSeq()
				check("crash")
			}
		}
		s.Journal().Close()
	})
}

func mustOpen(rt *rapid.T, c Config) *Storage {
	s, err := Open(c)
	if err != nil {
		rt.Fatal(err)
	}
	if err := s.Rebuild(); err != nil {
		rt.Fatal(err)
	}
	return s
}

// writeRecords journals and applies commands up to seq at epoch 1,
// cutting the periodic snapshots, and syncs when told to.
func writeRecords(rt *rapid.T, s *Storage, to uint64, sync bool) {
	eng := s.Engine()
	for seq := eng.AppliedSeq() + 1; seq <= to; seq++ {
		if err := s.Journal().Append(1, seq, cmd(seq), 0); err != nil {
			rt.Fatal(err)
		}
		eng.Apply(seq, cmd(seq), nil)
		if err := s.Journal().Flush(); err != nil {
			rt.Fatal(err)
		}
		s.Snapshots().Periodic(eng, seq, 1)
	}
	s.Snapshots().Finish()
	if sync {
		if err := s.Journal().Sync(); err != nil {
			rt.Fatal(err)
		}
	}
}
