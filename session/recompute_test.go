package session

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/seqbus/seqbus/engine"
)

func newEngine() (engine.StateMachine, error) {
	return engine.New(engine.Config{MaxInstruments: 4, MaxOrders: 64, MaxSessions: 4, DedupWindow: 64, MaxOrderQty: 1 << 20})
}

// opaque hides the engine's SessionOutSeq: a state machine that cannot
// say where a session stood.
type opaque struct{ engine.StateMachine }

// fakeJournal is a journal in memory: records[i] has seq first+i; a
// damaged snapshot does not open; Scan returns scanErr before the record
// errAt (or after the last, when errAt is past it).
type fakeJournal struct {
	first   uint64
	records [][]byte
	snaps   map[uint64][]byte
	damaged map[uint64]bool
	seqsErr error
	scanErr error
	errAt   uint64
}

func (j *fakeJournal) SnapshotSeqs() ([]uint64, error) {
	if j.seqsErr != nil {
		return nil, j.seqsErr
	}
	var seqs []uint64
	for s := range j.snaps {
		seqs = append(seqs, s)
	}
	slices.Sort(seqs)
	slices.Reverse(seqs)
	return seqs, nil
}

func (j *fakeJournal) OpenSnapshot(seq uint64) (io.ReadCloser, error) {
	b, ok := j.snaps[seq]
	if !ok || j.damaged[seq] {
		return nil, errors.New("no such snapshot, or damaged")
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

func (j *fakeJournal) Scan(fn func(seq uint64, payload []byte) bool) error {
	for i, rec := range j.records {
		seq := j.first + uint64(i)
		if j.scanErr != nil && seq == j.errAt {
			return j.scanErr
		}
		if !fn(seq, rec) {
			return nil
		}
	}
	return j.scanErr
}

// The Log a rebuild reads.
func (j *fakeJournal) First() uint64 { return j.first }
func (j *fakeJournal) Last() (uint64, uint64) {
	return 1, j.first + uint64(len(j.records)) - 1
}
func (j *fakeJournal) ReadFrom(from uint64, fn func(epoch, seq uint64, payload []byte) bool) error {
	for i, rec := range j.records {
		seq := j.first + uint64(i)
		if seq < from {
			continue
		}
		if j.scanErr != nil && seq == j.errAt {
			return j.scanErr
		}
		if !fn(1, seq, rec) {
			return nil
		}
	}
	return nil
}
func (j *fakeJournal) OpenLatestSnapshot() (uint64, uint64, io.ReadCloser, error) {
	seqs, _ := j.SnapshotSeqs()
	for _, s := range seqs {
		if r, err := j.OpenSnapshot(s); err == nil {
			return s, 1, r, nil
		}
	}
	return 0, 0, nil, errors.New("no snapshot")
}

// tape is a run of the reference engine: session 7 rests 20 sells (its
// outputs 1..20 at seqs 1..20), session 8 takes them (session 7's
// executions, outputs 21..40 at seqs 21..40); snapshots at every seq in
// snapAt; want[o] is session 7's output o.
type tape struct {
	records [][]byte
	snaps   map[uint64][]byte
	want    map[uint64]Output
}

type capture struct {
	seq  uint64
	want map[uint64]Output
}

func (c *capture) Emit(to uint64, payload []byte) {
	if out, ok := engine.SessionOutSeq(payload); ok && to == 7 && out != 0 {
		c.want[out] = Output{Seq: c.seq, OutSeq: out, Payload: bytes.Clone(payload)}
	}
}

func newTape(t testing.TB, snapAt ...uint64) *tape {
	t.Helper()
	sm, err := newEngine()
	if err != nil {
		t.Fatal(err)
	}
	tp := &tape{snaps: map[uint64][]byte{}, want: map[uint64]Output{}}
	c := &capture{want: tp.want}
	for i := range 40 {
		session, side := uint64(7), engine.Sell
		if i >= 20 {
			session, side = 8, engine.Buy
		}
		cmd := engine.AppendRequest(nil, session, uint64(i+1), &engine.Request{Op: engine.OpNewOrder, Instrument: 1, Side: side, Type: engine.Limit, Price: 100, Qty: 1})
		tp.records = append(tp.records, cmd)
		c.seq = uint64(i + 1)
		sm.Apply(c.seq, cmd, c)
		if slices.Contains(snapAt, c.seq) {
			var b bytes.Buffer
			if err := sm.Snapshot(&b); err != nil {
				t.Fatal(err)
			}
			tp.snaps[c.seq] = b.Bytes()
		}
	}
	if len(tp.want) != 40 {
		t.Fatalf("session 7 got %d outputs, want 40", len(tp.want))
	}
	return tp
}

// journal returns the tape's journal from seq first on, with the
// snapshots in keep.
func (tp *tape) journal(first uint64, keep ...uint64) *fakeJournal {
	j := &fakeJournal{first: first, records: tp.records[first-1:], snaps: map[uint64][]byte{}, damaged: map[uint64]bool{}}
	for _, s := range keep {
		j.snaps[s] = tp.snaps[s]
	}
	return j
}

func (tp *tape) check(t *testing.T, got []Output, lo, hi uint64) {
	t.Helper()
	if lo > hi {
		if len(got) != 0 {
			t.Fatalf("%d outputs, want none", len(got))
		}
		return
	}
	if uint64(len(got)) != hi-lo+1 {
		t.Fatalf("outputs %v, want %d..%d", outSeqs(got), lo, hi)
	}
	for i, o := range got {
		w := tp.want[lo+uint64(i)]
		if o.Seq != w.Seq || o.OutSeq != w.OutSeq || !bytes.Equal(o.Payload, w.Payload) {
			t.Fatalf("output %d: %+v, want %+v", i, o, w)
		}
	}
}

// TestRecompute: the base is the newest snapshot at or below Upto the
// session had not yet passed From in, else the empty state; the journal
// must continue from it; the answer is byte for byte what the session got.
func TestRecompute(t *testing.T) {
	tp := newTape(t, 10, 20, 30)
	failure := errors.New("bad sector")
	closed := make(chan struct{})
	close(closed)
	for _, tc := range []struct {
		name    string
		j       *fakeJournal
		newSM   Factory
		job     Job
		lo, hi  uint64 // outputs expected (none when lo > hi)
		records uint64
		tooOld  bool
		err     error
	}{
		{name: "from the empty state", j: tp.journal(1, 10, 30), job: Job{Session: 7, From: 1, Upto: 40},
			lo: 1, hi: 40, records: 40},
		{name: "from a snapshot below from", j: tp.journal(1, 10, 30), job: Job{Session: 7, From: 25, Upto: 40},
			lo: 25, hi: 40, records: 40},
		{name: "from the newest snapshot", j: tp.journal(1, 10, 30), job: Job{Session: 7, From: 35, Upto: 40},
			lo: 35, hi: 40, records: 40},
		{name: "a snapshot that holds output from already is not the base", j: tp.journal(1, 10, 30), job: Job{Session: 7, From: 30, Upto: 40},
			lo: 30, hi: 40, records: 40},
		{name: "only up to upto", j: tp.journal(1, 10, 30), job: Job{Session: 7, From: 35, Upto: 37},
			lo: 35, hi: 37, records: 37},
		{name: "released ends below from", j: tp.journal(1, 10, 30), job: Job{Session: 7, From: 35, Upto: 32},
			lo: 1, hi: 0, records: 32},
		{name: "a snapshot above upto is not used", j: tp.journal(21, 20, 30), job: Job{Session: 7, From: 25, Upto: 28},
			lo: 25, hi: 28, records: 8},
		{name: "nothing released after the base", j: tp.journal(1, 30), job: Job{Session: 7, From: 35, Upto: 30},
			lo: 1, hi: 0},
		{name: "compacted behind a snapshot", j: tp.journal(21, 20, 30), job: Job{Session: 7, From: 25, Upto: 40},
			lo: 25, hi: 40, records: 20},
		{name: "compacted past the asked output", j: tp.journal(21, 30), job: Job{Session: 7, From: 5, Upto: 40},
			lo: 1, hi: 0, records: 1, tooOld: true},
		{name: "a damaged snapshot is passed over", j: damage(tp.journal(1, 10, 30), 30), job: Job{Session: 7, From: 35, Upto: 40},
			lo: 35, hi: 40, records: 40},
		{name: "an opaque state machine: only the empty state", j: tp.journal(11, 10), job: Job{Session: 7, From: 15, Upto: 40},
			newSM: func() (engine.StateMachine, error) { sm, err := newEngine(); return opaque{sm}, err },
			lo:    1, hi: 0, records: 1, tooOld: true},
		{name: "the record cap before the asked output", j: tp.journal(1), job: Job{Session: 7, From: 35, Upto: 40, MaxRecords: 15},
			lo: 1, hi: 0, records: 15, tooOld: true},
		{name: "the record cap after it", j: tp.journal(1), job: Job{Session: 7, From: 5, Upto: 40, MaxRecords: 15},
			lo: 5, hi: 15, records: 15},
		{name: "damage below upto", j: scanFails(tp.journal(1), 20, failure), job: Job{Session: 7, From: 5, Upto: 40},
			lo: 5, hi: 19, records: 19, err: failure},
		{name: "damage above upto: the tail being written", j: scanFails(tp.journal(1), 41, failure), job: Job{Session: 7, From: 5, Upto: 40},
			lo: 5, hi: 40, records: 40},
		{name: "no snapshot list", j: listFails(tp.journal(1), failure), job: Job{Session: 7, From: 5, Upto: 40},
			lo: 1, hi: 0, err: failure},
		{name: "no state machine", j: tp.journal(1), job: Job{Session: 7, From: 5, Upto: 40},
			newSM: func() (engine.StateMachine, error) { return nil, failure }, lo: 1, hi: 0, err: failure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			newSM := tc.newSM
			if newSM == nil {
				newSM = newEngine
			}
			r := Recompute(tc.job, tc.j, newSM, nil)
			if !errors.Is(r.Err, tc.err) || (tc.err == nil) != (r.Err == nil) {
				t.Fatalf("err %v, want %v", r.Err, tc.err)
			}
			if r.TooOld != tc.tooOld || r.Records != tc.records || r.Job != tc.job {
				t.Fatalf("result %+v, want tooOld %v records %d", r, tc.tooOld, tc.records)
			}
			tp.check(t, r.Outputs, tc.lo, tc.hi)
		})
	}
	t.Run("stopped", func(t *testing.T) {
		j := &fakeJournal{first: 1, records: make([][]byte, 3000)} // rejects: no outputs
		r := Recompute(Job{Session: 7, From: 1, Upto: 3000}, j, newEngine, closed)
		if !errors.Is(r.Err, ErrStopped) || r.Records != 1024 {
			t.Fatalf("closing: %+v", r)
		}
		if r = Recompute(Job{Session: 7, From: 1, Upto: 3000}, j, newEngine, make(chan struct{})); r.Err != nil || r.Records != 3000 || r.TooOld || len(r.Outputs) != 0 {
			t.Fatalf("not closing: %+v", r)
		}
	})
}

func damage(j *fakeJournal, seq uint64) *fakeJournal { j.damaged[seq] = true; return j }
func scanFails(j *fakeJournal, at uint64, err error) *fakeJournal {
	j.scanErr, j.errAt = err, at
	return j
}
func listFails(j *fakeJournal, err error) *fakeJournal { j.seqsErr = err; return j }

// TestFillBelowSnapshot: a rebuild recomputes the outputs at and below its
// latest snapshot from the empty state when the journal starts at seq 1,
// else from the older snapshot the journal continues from, else not at
// all.
func TestFillBelowSnapshot(t *testing.T) {
	tp := newTape(t, 10, 20, 30)
	failure := errors.New("bad sector")
	for _, tc := range []struct {
		name   string
		j      *fakeJournal
		lo, hi uint64
		err    error
	}{
		{"no snapshot", tp.journal(1), 1, 0, nil},
		{"from the empty state", tp.journal(1, 30), 1, 30, nil},
		{"from the older snapshot", tp.journal(11, 10, 30), 11, 30, nil},
		{"the journal starts at 1: from the empty state past an older snapshot", tp.journal(1, 10, 30), 1, 30, nil},
		{"the older snapshot is damaged, the journal starts at 1", damage(tp.journal(1, 10, 30), 10), 1, 30, nil},
		{"compacted with no older snapshot", tp.journal(21, 30), 1, 0, nil},
		{"a gap after the older snapshot", tp.journal(21, 10, 30), 1, 0, nil},
		{"the journal ends below the snapshot", trim(tp.journal(1, 30), 25), 1, 0, nil},
		{"the latest snapshot damaged: the one before it is the latest", damage(tp.journal(1, 10, 30), 30), 1, 10, nil},
		{"damage in the journal", scanFails(tp.journal(1, 30), 12, failure), 1, 11, failure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[uint64]Output{}
			c := &capture{want: got}
			err := FillBelowSnapshot(tc.j, tc.j, newEngine, func(seq uint64) engine.Emitter { c.seq = seq; return c })
			if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			var outs []Output
			for o := uint64(1); o <= 40; o++ {
				if g, ok := got[o]; ok {
					outs = append(outs, g)
				}
			}
			tp.check(t, outs, tc.lo, tc.hi)
		})
	}
	t.Run("over MaxRebuildRecords", func(t *testing.T) {
		j := &fakeJournal{first: 1, records: make([][]byte, MaxRebuildRecords+2), snaps: map[uint64][]byte{}}
		sm, _ := newEngine()
		var b bytes.Buffer
		_ = sm.Snapshot(&b)
		j.snaps[MaxRebuildRecords+1] = b.Bytes() // the state does not matter: it is not restored
		applied := 0
		err := FillBelowSnapshot(j, j, newEngine, func(uint64) engine.Emitter { applied++; return nil })
		if err != nil || applied != 0 {
			t.Fatalf("err %v, %d commands applied, want none", err, applied)
		}
	})
}

func trim(j *fakeJournal, last uint64) *fakeJournal {
	j.records = j.records[:last-j.first+1]
	return j
}
