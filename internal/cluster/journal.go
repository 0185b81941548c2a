package cluster

import (
	"fmt"
	"hash/crc32"

	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/journal"
)

// EpochRun is a run of journal records with the same epoch.
type EpochRun struct{ Epoch, FirstSeq, Records uint64 }

// JournalOptions says what ReadJournal does besides digesting.
type JournalOptions struct {
	// Replay applies every record to a fresh engine configured as Engine
	// (the journal must start at seq 1).
	Replay bool
	Engine engine.Config
	// Session is the client session whose records and outputs the
	// replay indexes.
	Session uint64
}

// Journal is what ReadJournal found in a stopped node's journal.
type Journal struct {
	Dir         string
	First, Last uint64
	Epochs      []EpochRun // in log order
	// Digests[i] digests seq First+i: the payload's length and CRC32C
	// with the epoch mixed in. CRC32C runs in assembly (SSE4.2), which
	// the race detector does not slow; a single differing record escapes
	// it with probability 2^-32, and a real divergence spans many.
	Digests []uint64

	// With Replay: the engine's applied seq and state hash at the end.
	Applied, Hash uint64
	// Records counts journal records per client order id of Session (a
	// resend after a failover is journaled again; the engine answers it
	// as a duplicate).
	Records map[uint64]int
	// Results holds, per client order id, the Ack and Reject outputs the
	// engine produced (not duplicates): applied once means exactly one.
	Results map[uint64][]engine.Output
	// Outputs is every output to Session, with multiplicity.
	Outputs map[engine.Output]int
	// MD[i] is the market-data output with MDSeq i+1.
	MD []engine.Output
}

var castagnoliTable = crc32.MakeTable(crc32.Castagnoli)

// ReadJournal opens a stopped node's journal (journal.Open verifies every
// record's CRC), digests every record, checking that seqs are contiguous,
// and with o.Replay replays it through a fresh engine: the harness's one
// journal reader.
func ReadJournal(dir string, o JournalOptions) (*Journal, error) {
	j, _, err := journal.Open(journal.OSFS{}, dir, journal.Options{})
	if err != nil {
		return nil, fmt.Errorf("open journal %s: %v", dir, err)
	}
	defer j.Close()
	d := &Journal{Dir: dir, First: j.First(), Records: map[uint64]int{},
		Results: map[uint64][]engine.Output{}, Outputs: map[engine.Output]int{}}
	_, d.Last = j.Last()
	if d.Last < d.First || d.Last == 0 {
		return d, nil
	}
	var r *replayer
	if o.Replay {
		if d.First != 1 {
			return nil, fmt.Errorf("journal %s starts at %d: cannot replay from an empty state", dir, d.First)
		}
		if r, err = newReplayer(d, o); err != nil {
			return nil, err
		}
	}
	d.Digests = make([]uint64, 0, d.Last-d.First+1)
	next := d.First
	var seqErr error
	err = j.ReadFrom(d.First, func(epoch, seq uint64, payload []byte) bool {
		if seq != next {
			seqErr = fmt.Errorf("seq %d where %d was expected", seq, next)
			return false
		}
		next++
		d.add(epoch, seq, payload)
		if r != nil {
			r.apply(seq, payload)
		}
		return true
	})
	if err == nil {
		err = seqErr
	}
	if err == nil && r != nil {
		err = r.err
	}
	if err != nil {
		return nil, fmt.Errorf("read journal %s: %v", dir, err)
	}
	if next != d.Last+1 {
		return nil, fmt.Errorf("journal %s: read up to %d, Last says %d", dir, next-1, d.Last)
	}
	if r != nil {
		d.Applied, d.Hash = r.eng.AppliedSeq(), r.eng.StateHash()
	}
	return d, nil
}

func (d *Journal) add(epoch, seq uint64, payload []byte) {
	if n := len(d.Epochs); n == 0 || d.Epochs[n-1].Epoch != epoch {
		d.Epochs = append(d.Epochs, EpochRun{Epoch: epoch, FirstSeq: seq})
	}
	d.Epochs[len(d.Epochs)-1].Records++
	c := crc32.Checksum(payload, castagnoliTable) ^ uint32(epoch*0x9e3779b1)
	d.Digests = append(d.Digests, uint64(len(payload))<<32|uint64(c))
}

// CompareJournals checks that got holds exactly want's records over got's
// range, and that both end at the same seq. A journal that starts later
// (a standby restored from a snapshot) is compared from its first seq.
// It returns what differs (nil: nothing), stopping at the first record.
func CompareJournals(want, got *Journal) []string {
	var out []string
	if got.Last != want.Last {
		out = append(out, fmt.Sprintf("journal %s ends at %d, %s at %d", got.Dir, got.Last, want.Dir, want.Last))
	}
	if got.First < want.First {
		return append(out, fmt.Sprintf("journal %s starts at %d, before %s at %d", got.Dir, got.First, want.Dir, want.First))
	}
	for seq := got.First; seq <= min(got.Last, want.Last); seq++ {
		if got.Digests[seq-got.First] != want.Digests[seq-want.First] {
			return append(out, fmt.Sprintf("journal %s differs from %s at seq %d", got.Dir, want.Dir, seq))
		}
	}
	return out
}

// replayer applies records to an engine and indexes its outputs.
type replayer struct {
	d       *Journal
	eng     *engine.Engine
	session uint64
	err     error
}

func newReplayer(d *Journal, o JournalOptions) (*replayer, error) {
	eng, err := engine.New(o.Engine)
	if err != nil {
		return nil, err
	}
	return &replayer{d: d, eng: eng, session: o.Session}, nil
}

func (r *replayer) apply(seq uint64, payload []byte) {
	if h, err := engine.ParseCommand(payload); err == nil && h.Session == r.session {
		r.d.Records[h.ClientOrderID]++
	}
	r.eng.Apply(seq, payload, r)
}

// Emit is the engine's emitter.
func (r *replayer) Emit(to uint64, payload []byte) {
	o, err := engine.ParseOutput(payload)
	if err != nil {
		r.err = err
		return
	}
	d := r.d
	switch {
	case to == engine.MarketData:
		if o.MDSeq != uint64(len(d.MD))+1 && r.err == nil {
			r.err = fmt.Errorf("replay: market-data seq %d after %d", o.MDSeq, len(d.MD))
		}
		d.MD = append(d.MD, o)
	case to == r.session:
		d.Outputs[o]++
		if o.Kind == engine.KindAck || o.Kind == engine.KindReject {
			d.Results[o.ClientOrderID] = append(d.Results[o.ClientOrderID], o)
		}
	}
}
