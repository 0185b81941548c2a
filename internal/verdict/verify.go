package verdict

// Verify is seqbus verify, and the verdict of the demo and the drills: it
// checks the promise against what clients recorded (client.Recorder files)
// and the nodes' directories, read-only (journal.Scan, journal.Inspect,
// journal.OpenSnapshotReadOnly; never journal.Open, which recovers and may
// write).
//
// What is compared:
//   - The final primary (Options.Primary, else the node whose journal ends
//     at the highest epoch, then the highest seq) is replayed through the
//     engine from its oldest snapshot that reaches its journal (or from an
//     empty engine when the journal starts at seq 1), collecting every
//     output per session with its seq. A received output is then looked up
//     at its (epoch, seq): the OUTPUT frame's seq is its first output's, and
//     a frame holds consecutive outputs of one session, so output Index of
//     a frame is the session's Index-th output from that seq on. It must be
//     there byte for byte, and the journal record at its seq must carry the
//     frame's epoch. Not there (no record at that seq, or a record of
//     another epoch): lost. A record of the same epoch whose outputs differ:
//     conflict.
//   - A received output older than the replay (compacted behind the
//     snapshot) is checked against the snapshot's dedup table when it is an
//     answer (lost when the table does not have it); an older execution
//     cannot be checked and is counted as such.
//   - Every other node is a standby when its journal ends at the final
//     primary's epoch (it followed the final primary), else deposed (an old
//     primary, or a node cut off: its tail after the histories part is not
//     part of the final history and is reported, not failed). A standby must
//     hold every checked output's record byte for byte (epoch and command)
//     where its journal reaches; a record it holds that differs is a
//     conflict, one it does not reach is counted as behind.
//   - Any two nodes: where both journals have the same seq with the same
//     epoch and different bytes, conflict. Every node is replayed from its
//     own snapshot; the state hashes are compared at each seq both replays
//     reach, up to where the histories part (the first seq whose records
//     differ), so nodes whose snapshots are at different seqs are compared
//     from the later snapshot on.
//   - Duplicates: a (session, client order id) applied at two seqs: acked
//     (a new order's one result; a duplicate answer does not count) at two
//     seqs in a replay, or received acked at two different (epoch, seq,
//     index). Cancels are not counted: one command may cancel more than
//     once under its own id (a market order's remainder).
//   - Answers from the dedup table: a primary answers the resend of an
//     applied (or in-flight) command from its replicated dedup table
//     without sequencing it (engine.Deduper), in a frame under its last
//     applied seq, so that answer is no command's output in any replay. A
//     received duplicate answer not found at its (epoch, seq) is backed
//     when the final history emitted its original result (the same bytes
//     after the duplicate kind) to the session at or before the frame's
//     seq, or, older than the replay, when the snapshot's dedup table has
//     the order; else lost. A reject the table alone gives (too old for
//     the dedup window, client order id 0) reveals no state and is counted
//     as unchecked.
//   - Replayed outputs (marked in the record): their frame's epoch is the
//     replaying primary's, and their command's record may be of an
//     earlier epoch (at most the frame's).
//   - Stale: in each record file, in the order received, an output of an
//     epoch lower than one already received.
//
// The journals are held in memory while verifying.

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/journal"
)

// MaxExamples bounds the findings a Result keeps of each kind.
const MaxExamples = 10

// Options say what to verify.
type Options struct {
	FS journal.FS // nil: journal.OSFS
	// Records are client record files; Nodes are node directories.
	Records []string
	Nodes   []string
	// Primary is the final primary's directory (one of Nodes); "" picks
	// the node whose journal ends at the highest epoch, then seq.
	Primary string
	// Engine configures the replay of a journal that starts at seq 1
	// (a snapshot carries its own); it must be the nodes' configuration.
	Engine engine.Config
}

// Finding is one problem, for the report.
type Finding struct {
	Kind string // lost, duplicate, conflict, hash_mismatch, stale
	Text string
}

// NodeReport is what Verify read and concluded of one node.
type NodeReport struct {
	Dir  string
	Role string // primary, standby, deposed, foreign
	// History is the directory's history id (journal.HistoryFile), 16 hex
	// digits; "" when it has none. A node of another history than the
	// final primary's is foreign: reported, never compared.
	History string `json:",omitempty"`
	// Journal records First..Last, LastEpoch the last record's epoch.
	First, Last, LastEpoch uint64
	// ReplayFrom is the first seq replayed (after the snapshot at
	// ReplayFrom-1, 0 for none); Replayed how many records.
	SnapshotSeq, ReplayFrom, Replayed uint64
	// Damage is the journal's first damage (its valid prefix was used).
	Damage string
	// Against the final primary (not set for it): the first seq whose
	// records differ (0: none in the common range), state hashes
	// compared, checked outputs whose seq this node does not reach.
	PartsAt, HashesCompared, Behind uint64
}

// Result is Verify's outcome.
type Result struct {
	Primary string
	Nodes   []NodeReport
	// Received outputs in the record files, Answers of them answers.
	Received, Answers uint64
	// Checked byte for byte in the final primary's replay; InSnapshot
	// answers older than the replay found in the snapshot's dedup table;
	// Unchecked older executions and table-only rejects; FromTable
	// duplicate answers backed by their original result in the history.
	Checked, InSnapshot, Unchecked, FromTable          uint64
	Lost, Duplicates, Conflicts, HashMismatches, Stale uint64
	// Sessions: per client session in the records, what it delivered
	// against its outputs in the final history; SessionFaults how many
	// did not get it exactly once, in order.
	Sessions      []SessionReport
	SessionFaults uint64
	Findings      []Finding
	// FirstStale is the first stale output received (when Stale > 0).
	FirstStale *client.RecordLine `json:",omitempty"`
	// StaleDelivered: stale outputs the client delivered to the
	// application anyway. Its epoch fence (client.Core.Fence) refuses
	// an output of an older epoch than one it has seen, and that fence
	// is what guarantees it: a primary checks its lease by the clock
	// right before its send syscall, but no sender can check past its
	// own send, so one stopped (SIGSTOP, a descheduled VM) between that
	// check and the sendmmsg sends those frames when it resumes, after
	// its lease ran out. A stale output that arrived and was refused is
	// reported, and is no failure when found in the final history (Lost
	// and Conflicts count it otherwise); one delivered is a failure.
	// The drill "pause" still counts every arrival: it holds acks
	// waiting at the resume, the case a missing lease check would send.
	StaleDelivered uint64
	// TornRecords names each record whose last line was torn (its client
	// stopped while writing it: client.ErrTornTail); the lines before it
	// were verified.
	TornRecords []string `json:",omitempty"`
}

// staleFate says what the client did with a stale output: refused it
// (its epoch fence; the record marks it dropped) or delivered it.
func staleFate(dropped bool) string {
	if dropped {
		return ", refused by the client"
	}
	return ", DELIVERED by the client"
}

// staleDelivered is the counts line's note on stale outputs: how many
// of them the client delivered (none when nothing was stale).
func (r *Result) staleDelivered() string {
	if r.Stale == 0 {
		return ""
	}
	return fmt.Sprintf(" (delivered %d, refused by the client's epoch fence %d)", r.StaleDelivered, r.Stale-r.StaleDelivered)
}

// OK is true when nothing was lost, duplicated, conflicting or
// mismatched, and no stale output was delivered (StaleDelivered).
func (r *Result) OK() bool {
	return r.Lost == 0 && r.Duplicates == 0 && r.Conflicts == 0 && r.HashMismatches == 0 && r.StaleDelivered == 0 && r.SessionFaults == 0
}

func (r *Result) find(kind string, count *uint64, format string, args ...any) {
	*count++
	n := 0
	for _, f := range r.Findings {
		if f.Kind == kind {
			n++
		}
	}
	if n < MaxExamples {
		r.Findings = append(r.Findings, Finding{Kind: kind, Text: fmt.Sprintf(format, args...)})
	}
}

// received is one recorded output.
type received struct {
	client.RecordLine
	payload []byte
	where   string // file:line
}

type record struct {
	epoch   uint64
	payload []byte
}

type outAt struct {
	seq     uint64
	payload []byte
}

type sessionID struct{ session, coid uint64 }

// replica is one node's history and replay.
type replica struct {
	NodeReport
	// saysPrimary: its status file says its node led (saysPrimary).
	saysPrimary bool
	history     uint64         // journal.HistoryFile's id (0: none)
	recs        []record       // seq First+i
	snap        *engine.Engine // the snapshot at SnapshotSeq, as restored
	hashes      []uint64       // state hash after seq ReplayFrom+i
	outs        map[uint64][]outAt
}

func (p *replica) at(seq uint64) (record, bool) {
	if p.First == 0 || seq < p.First || seq > p.Last {
		return record{}, false
	}
	return p.recs[seq-p.First], true
}

func (p *replica) hash(seq uint64) (uint64, bool) {
	if p.snap != nil && seq == p.SnapshotSeq {
		return p.snap.StateHash(), true
	}
	if p.ReplayFrom == 0 || seq < p.ReplayFrom || seq >= p.ReplayFrom+uint64(len(p.hashes)) {
		return 0, false
	}
	return p.hashes[seq-p.ReplayFrom], true
}

// Verify reads the records and nodes and checks them. An error means
// something could not be read at all; what is wrong with the history is
// in the Result.
func Verify(opts Options) (*Result, error) {
	if opts.FS == nil {
		opts.FS = journal.OSFS{}
	}
	if len(opts.Nodes) == 0 {
		return nil, errors.New("verify: no node directory")
	}
	if opts.Engine.MaxInstruments == 0 {
		opts.Engine = engine.DefaultConfig()
	}
	res := &Result{}
	var rcv [][]received
	for _, path := range opts.Records {
		lines, err := readRecords(path)
		var torn tornTail
		if errors.As(err, &torn) {
			res.TornRecords, err = append(res.TornRecords, string(torn)), nil
		}
		if err != nil {
			return nil, err
		}
		rcv = append(rcv, lines)
	}
	reps := make([]*replica, 0, len(opts.Nodes))
	for _, dir := range opts.Nodes {
		p, err := loadReplica(opts.FS, dir)
		if err != nil {
			return nil, err
		}
		reps = append(reps, p)
	}
	if err := oneHistory(reps, opts.Primary); err != nil {
		return nil, err
	}
	prim := pickPrimary(reps, opts.Primary)
	if prim == nil {
		return nil, fmt.Errorf("verify: --primary %s is not one of the node directories", opts.Primary)
	}
	all := reps
	reps = ofHistory(reps, prim)
	res.Primary = prim.Dir
	if prim.First > 1 && prim.snap == nil {
		// Every received output would count as lost: say what is wrong.
		return nil, fmt.Errorf("verify: the final primary %s cannot be replayed: its journal starts at seq %d and no snapshot that verifies reaches it (missing or corrupt); restore its snapshots, or name another node with --primary", prim.Dir, prim.First)
	}
	for _, p := range reps {
		p.replay(opts.Engine, p == prim, res)
	}
	assignRoles(reps, prim)
	// Replicas against the final primary: records at common seqs, hashes.
	for _, p := range reps {
		if p != prim {
			compareReplicas(prim, p, res)
		}
	}
	for i, a := range reps {
		for _, b := range reps[i+1:] {
			if a != prim && b != prim {
				compareRecords(a, b, res)
			}
		}
	}
	// What clients received.
	applied := map[sessionID]string{}
	for _, lines := range rcv {
		checkRecord(prim, reps, lines, applied, res)
	}
	res.addSessions(sessionReports(prim, rcv))
	for _, p := range all {
		if !slices.Contains(reps, p) {
			p.Role = "foreign"
		}
		res.Nodes = append(res.Nodes, p.NodeReport)
	}
	return res, nil
}

// assignRoles names each node of the final primary's history: the
// primary, a standby (its journal ends at the primary's epoch: it
// followed it), else deposed (an old primary, or a node cut off).
func assignRoles(reps []*replica, prim *replica) {
	for _, p := range reps {
		switch {
		case p == prim:
			p.Role = "primary"
		case p.Last != 0 && p.LastEpoch == prim.LastEpoch:
			p.Role = "standby"
		default:
			p.Role = "deposed"
		}
	}
}

// oneHistory refuses, when no final primary is named, directories that
// hold different history ids (journal.HistoryFile): which history is the
// cluster's is the operator's to say (--primary), since the longest
// journal may be another cluster's copied in.
func oneHistory(reps []*replica, primary string) error {
	if primary != "" {
		return nil
	}
	var first *replica
	for _, p := range reps {
		switch {
		case p.history == 0:
		case first == nil:
			first = p
		case p.history != first.history:
			return fmt.Errorf("verify: the directories hold different histories (%s: %s, %s: %s): one is another cluster's, or a copy; name the final primary with --primary, and the other history's nodes are reported as foreign, not compared",
				first.Dir, first.History, p.Dir, p.History)
		}
	}
	return nil
}

// ofHistory is reps without the nodes of another history than prim's
// (both ids known): they are reported as foreign, never compared.
func ofHistory(reps []*replica, prim *replica) []*replica {
	own := make([]*replica, 0, len(reps))
	for _, p := range reps {
		if p.history == 0 || prim.history == 0 || p.history == prim.history {
			own = append(own, p)
		}
	}
	return own
}

// checkRecord checks one client's record, in arrival order: stale
// outputs, each output against the histories, and acks applied twice
// (applied holds, per order, where its ack was first seen, across
// records).
func checkRecord(prim *replica, reps []*replica, lines []received, applied map[sessionID]string, res *Result) {
	var maxEpoch uint64
	var maxWhere string
	for i := range lines {
		l := &lines[i]
		res.Received++
		if l.Answer {
			res.Answers++
		}
		if l.Epoch < maxEpoch {
			if res.FirstStale == nil {
				first := l.RecordLine
				res.FirstStale = &first
			}
			res.find("stale", &res.Stale, "%s: %s of order %d at epoch %d seq %d received after an output of epoch %d (%s)%s",
				l.where, l.Kind, l.ClientOrderID, l.Epoch, l.Seq, maxEpoch, maxWhere, staleFate(l.Dropped))
			if !l.Dropped {
				res.StaleDelivered++
			}
		} else if l.Epoch > maxEpoch {
			maxEpoch, maxWhere = l.Epoch, l.where
		}
		checkReceived(prim, reps, l, res)
		if l.Kind == "ack" && !l.Dropped {
			// (A dropped one is a repeat the client did not deliver: a
			// replay's copy of an ack it had, or the reverse.)
			// One output received twice has the same (epoch, seq,
			// index); another new ack of the same order is a second
			// application.
			k := sessionID{l.Session, l.ClientOrderID}
			at := fmt.Sprintf("epoch %d seq %d index %d", l.Epoch, l.Seq, l.Index)
			if prev, seen := applied[k]; seen && prev != at {
				res.find("duplicate", &res.Duplicates, "%s: session %d order %d got a new %s at %s, and before at %s",
					l.where, l.Session, l.ClientOrderID, l.Kind, at, prev)
			} else if !seen {
				applied[k] = at
			}
		}
	}
}

func readRecords(path string) ([]received, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []received
	n := 0
	err = client.ReadRecord(f, func(l client.RecordLine) error {
		n++
		p, err := hex.DecodeString(l.Payload)
		if err != nil {
			return fmt.Errorf("line %d: payload: %v", n, err)
		}
		out = append(out, received{RecordLine: l, payload: p, where: fmt.Sprintf("%s:%d", filepath.Base(path), n)})
		return nil
	})
	if errors.Is(err, client.ErrTornTail) {
		// What the client saw on that line is not in the record: verify
		// what is, and say so.
		torn := fmt.Sprintf("%s: %v", filepath.Base(path), err)
		return out, tornTail(torn)
	}
	if err != nil {
		return nil, fmt.Errorf("verify: %s: %w", path, err)
	}
	return out, nil
}

// tornTail is readRecords' word that a record ended in a torn line.
type tornTail string

func (t tornTail) Error() string { return string(t) }

func loadReplica(fsys journal.FS, dir string) (*replica, error) {
	p := &replica{NodeReport: NodeReport{Dir: dir}, outs: map[uint64][]outAt{}, saysPrimary: saysPrimary(fsys, dir)}
	var err error
	if p.history, err = journal.ReadHistoryID(fsys, dir); err != nil {
		return nil, fmt.Errorf("verify: %s: %w", dir, err)
	}
	if p.history != 0 {
		p.History = fmt.Sprintf("%016x", p.history)
	}
	err = journal.Scan(fsys, dir, journal.InspectOptions{}, func(r journal.Record) bool {
		if p.First == 0 {
			p.First = r.Seq
		}
		if r.Seq != p.First+uint64(len(p.recs)) {
			p.Damage = fmt.Sprintf("seq %d after %d", r.Seq, p.Last)
			return false
		}
		p.recs = append(p.recs, record{epoch: r.Epoch, payload: bytes.Clone(r.Payload)})
		p.Last, p.LastEpoch = r.Seq, r.Epoch
		return true
	})
	var prob *journal.Problem
	switch {
	case errors.As(err, &prob):
		p.Damage = prob.Error()
	case err != nil:
		return nil, fmt.Errorf("verify: %s: %w", dir, err)
	}
	// The oldest valid snapshot that reaches the journal: the replay then
	// covers as much of the journal as can be rebuilt.
	d, err := journal.Inspect(fsys, dir, journal.InspectOptions{})
	if err != nil {
		return nil, fmt.Errorf("verify: %s: %w", dir, err)
	}
	snaps := slices.Clone(d.Snapshots)
	sort.Slice(snaps, func(a, b int) bool { return snaps[a].Seq < snaps[b].Seq })
	if p.First > 1 || p.First == 0 {
		for _, s := range snaps {
			if !s.Valid || (p.First != 0 && s.Seq+1 < p.First) {
				continue
			}
			eng, err := loadSnapshot(fsys, dir, s.Seq)
			if err != nil {
				return nil, err
			}
			p.snap, p.SnapshotSeq = eng, s.Seq
			if p.First == 0 {
				// Nothing journaled after an installed snapshot: the
				// snapshot's record is where its history ends.
				p.Last, p.LastEpoch = s.Seq, s.Epoch
			}
			break
		}
	}
	return p, nil
}

func loadSnapshot(fsys journal.FS, dir string, seq uint64) (*engine.Engine, error) {
	_, r, err := journal.OpenSnapshotReadOnly(fsys, dir, seq)
	if err != nil {
		return nil, fmt.Errorf("verify: %s: snapshot %d: %w", dir, seq, err)
	}
	defer r.Close()
	eng, err := engine.LoadSnapshot(r) // verifies the state hash
	if err != nil {
		return nil, fmt.Errorf("verify: %s: snapshot %d: %w", dir, seq, err)
	}
	return eng, nil
}

func pickPrimary(reps []*replica, dir string) *replica {
	var best *replica
	for _, p := range reps {
		if dir != "" {
			if filepath.Clean(p.Dir) == filepath.Clean(dir) {
				return p
			}
			continue
		}
		if best == nil || p.LastEpoch > best.LastEpoch || (p.LastEpoch == best.LastEpoch && p.Last > best.Last) ||
			(p.LastEpoch == best.LastEpoch && p.Last == best.Last && !best.saysPrimary && p.saysPrimary) {
			best = p
		}
	}
	return best
}

// saysPrimary reads whether dir's status file (its node's last) says it
// led: of two journals that end at the same (epoch, seq), the final
// primary is the one that led, whatever the order the directories were
// named in.
func saysPrimary(fsys journal.FS, dir string) bool {
	if _, ok := fsys.(journal.OSFS); !ok {
		return false
	}
	b, err := os.ReadFile(filepath.Join(dir, "status.json"))
	var st struct {
		Role string `json:"role"`
	}
	return err == nil && json.Unmarshal(b, &st) == nil && st.Role == "primary"
}

// collector gathers one Apply's outputs (for the primary's replay, keep)
// and notes whether the command was acked under its own client order id
// (a new application, not a duplicate answer).
type collector struct {
	p       *replica
	keep    bool
	seq     uint64
	session uint64
	coid    uint64
	acked   bool
}

func (c *collector) Emit(to uint64, payload []byte) {
	if to == engine.MarketData {
		return
	}
	if to == c.session && len(payload) > 0 && engine.OutputKind(payload[0]) == engine.KindAck {
		if o, err := engine.ParseOutput(payload); err == nil && o.ClientOrderID == c.coid {
			c.acked = true
		}
	}
	if c.keep {
		c.p.outs[to] = append(c.p.outs[to], outAt{seq: c.seq, payload: bytes.Clone(payload)})
	}
}

// replay applies the journal after the starting point, recording the
// state hash after every seq (and the outputs, for the primary), and
// checks that no (session, client order id) is applied twice.
func (p *replica) replay(cfg engine.Config, withOutputs bool, res *Result) {
	var eng *engine.Engine
	switch {
	case p.First == 1:
		e, err := engine.New(cfg)
		if err != nil {
			p.Damage = fmt.Sprintf("engine: %v", err)
			return
		}
		eng = e
	case p.snap != nil:
		// A copy: the snapshot itself stays as it was, for its hash and
		// its dedup table.
		var buf bytes.Buffer
		if err := p.snap.Snapshot(&buf); err != nil {
			p.Damage = fmt.Sprintf("snapshot %d: %v", p.SnapshotSeq, err)
			return
		}
		e, err := engine.LoadSnapshot(&buf)
		if err != nil {
			p.Damage = fmt.Sprintf("snapshot %d: %v", p.SnapshotSeq, err)
			return
		}
		eng = e
	default:
		if p.First > 1 && p.Damage == "" {
			p.Damage = fmt.Sprintf("cannot replay: its journal starts at seq %d and no snapshot that verifies reaches it", p.First)
		}
		return // nothing can rebuild the state: no hashes, no outputs
	}
	from := p.SnapshotSeq + 1
	if p.First == 0 || from > p.Last {
		return
	}
	p.ReplayFrom = from
	applied := map[sessionID]uint64{}
	col := &collector{p: p, keep: withOutputs}
	for seq := from; seq <= p.Last; seq++ {
		r := p.recs[seq-p.First]
		col.seq, col.acked = seq, false
		h, herr := engine.ParseCommand(r.payload)
		col.session, col.coid = h.Session, h.ClientOrderID
		eng.Apply(seq, r.payload, col)
		p.hashes = append(p.hashes, eng.StateHash())
		p.Replayed++
		if herr != nil || !col.acked {
			continue
		}
		k := sessionID{h.Session, h.ClientOrderID}
		if prev, ok := applied[k]; ok {
			res.find("duplicate", &res.Duplicates, "%s: session %d order %d applied at seq %d and at seq %d", p.Dir, h.Session, h.ClientOrderID, prev, seq)
		} else {
			applied[k] = seq
		}
	}
}

// checkReceived checks one received output against the final primary and
// the standbys; it returns the output's resolved seq when it was found.
func checkReceived(prim *replica, reps []*replica, l *received, res *Result) (uint64, bool) {
	if l.Kind == "market_data" {
		return 0, false
	}
	if (prim.snap != nil && l.Seq <= prim.SnapshotSeq) || (prim.ReplayFrom != 0 && l.Seq < prim.ReplayFrom) {
		return checkCompacted(prim, l, res)
	}
	if seq, ok, done := checkFromTable(prim, l, res); done {
		return seq, ok
	}
	// A replayed output (wire.FlagReplay) comes from a primary of frame
	// epoch l.Epoch, but its command may be of an earlier epoch (applied
	// by the new primary as a standby, never released by the old one):
	// its record's epoch is at most the frame's.
	epochOK := func(e uint64) bool { return e == l.Epoch || (l.Replay && e < l.Epoch) }
	rec, ok := prim.at(l.Seq)
	if !ok || !epochOK(rec.epoch) {
		what := "no record at that seq"
		if ok {
			what = fmt.Sprintf("its seq %d holds a record of epoch %d", l.Seq, rec.epoch)
		}
		res.find("lost", &res.Lost, "%s: %s of session %d order %d (epoch %d, seq %d) is not in the final primary's history: %s",
			l.where, l.Kind, l.Session, l.ClientOrderID, l.Epoch, l.Seq, what)
		return 0, false
	}
	outs := prim.outs[l.Session]
	i := sort.Search(len(outs), func(i int) bool { return outs[i].seq >= l.Seq })
	// The Index-th output of the session from the frame's seq on; failing
	// that (an output the primary did not send), the first equal one
	// after it, in a bounded window.
	found := -1
	if j := i + l.Index; j < len(outs) && bytes.Equal(outs[j].payload, l.payload) {
		found = j
	} else {
		for j := i; j < len(outs) && j < i+l.Index+4096; j++ {
			if bytes.Equal(outs[j].payload, l.payload) {
				found = j
				break
			}
		}
	}
	if found < 0 {
		// A frame may run past the end of its epoch's part of the final
		// history (its first outputs survived, the later ones did not):
		// lost, not a conflict.
		if j := i + l.Index; j >= len(outs) || !epochOK(prim.recs[outs[j].seq-prim.First].epoch) {
			res.find("lost", &res.Lost, "%s: %s of session %d order %d (epoch %d, frame seq %d, index %d) is not in the final primary's history: the frame runs past the end of epoch %d there",
				l.where, l.Kind, l.Session, l.ClientOrderID, l.Epoch, l.Seq, l.Index, l.Epoch)
			return 0, false
		}
		res.find("conflict", &res.Conflicts, "%s: %s of session %d order %d at epoch %d seq %d: the final primary's history at that (epoch, seq) emits something else",
			l.where, l.Kind, l.Session, l.ClientOrderID, l.Epoch, l.Seq)
		return 0, false
	}
	seq := outs[found].seq
	if r, _ := prim.at(seq); !epochOK(r.epoch) {
		res.find("lost", &res.Lost, "%s: %s of session %d order %d (epoch %d) is at seq %d in the final primary's history, at epoch %d there",
			l.where, l.Kind, l.Session, l.ClientOrderID, l.Epoch, seq, r.epoch)
		return 0, false
	}
	res.Checked++
	want, _ := prim.at(seq)
	for _, p := range reps {
		if p == prim || p.Role != "standby" {
			continue
		}
		got, ok := p.at(seq)
		switch {
		case !ok && seq > p.Last:
			p.Behind++
		case !ok:
			// compacted behind the standby's snapshot: not checkable here
		case got.epoch != want.epoch || !bytes.Equal(got.payload, want.payload):
			res.find("conflict", &res.Conflicts, "%s: standby %s holds another record at seq %d (epoch %d) than the final primary (epoch %d)",
				l.where, p.Dir, seq, got.epoch, want.epoch)
		}
	}
	return seq, true
}

// checkFromTable handles an answer a primary may have given from its
// dedup table without sequencing it (see Verify): done is false when l is
// another kind of output, or when it is found at its (epoch, seq) as a
// sequenced command's output (the normal check then counts it).
func checkFromTable(prim *replica, l *received, res *Result) (seq uint64, ok, done bool) {
	o, err := engine.ParseOutput(l.payload)
	if err != nil {
		return 0, false, false
	}
	if o.Kind == engine.KindReject && (o.Reason == engine.ReasonTooOld || o.Reason == engine.ReasonBadClientOrderID) {
		res.Unchecked++
		return 0, false, true
	}
	if o.Kind != engine.KindDuplicate || len(l.payload) < 2 {
		return 0, false, false
	}
	outs := prim.outs[l.Session]
	original := l.payload[1:] // the original result, after the duplicate kind
	// A frame's seq is its first output's: the outputs before this one in
	// its frame (l.Index of them, to this session) may be of later seqs,
	// and the original may be one of them. So the original may lie at any
	// seq up to the frame's, or among the next l.Index outputs after it.
	first := sort.Search(len(outs), func(i int) bool { return outs[i].seq >= l.Seq })
	end := min(first+l.Index, len(outs))
	for end < len(outs) && outs[end].seq <= l.Seq {
		end++
	}
	for j := range outs[:end] {
		if bytes.Equal(outs[j].payload, l.payload) {
			return 0, false, false // a sequenced duplicate: checked at its seq
		}
	}
	for j := range outs[:end] {
		if bytes.Equal(outs[j].payload, original) {
			res.FromTable++
			return outs[j].seq, true, true
		}
	}
	if prim.snap != nil {
		if state, _ := prim.snap.DedupLookup(l.Session, l.ClientOrderID); state == engine.DedupApplied || state == engine.DedupBelowWindow {
			res.InSnapshot++
			return 0, false, true
		}
	}
	res.find("lost", &res.Lost, "%s: duplicate answer of session %d order %d (epoch %d, frame seq %d): the final primary's history emits no original result for it at or before that seq",
		l.where, l.Session, l.ClientOrderID, l.Epoch, l.Seq)
	return 0, false, true
}

// checkCompacted checks an output whose frame is older than the
// primary's replay: one of the frame's later outputs may be of a seq the
// replay has (straddling), else an answer is looked up in the snapshot's
// dedup table.
func checkCompacted(prim *replica, l *received, res *Result) (uint64, bool) {
	if seq, ok := straddling(prim, l); ok {
		res.Checked++
		return seq, true
	}
	isAnswer := l.Kind == "ack" || l.Kind == "reject" || l.Kind == "cancelled" || l.Kind == "duplicate"
	if !isAnswer {
		res.Unchecked++
		return 0, false
	}
	if prim.snap == nil {
		res.find("lost", &res.Lost, "%s: %s of session %d order %d (epoch %d, seq %d) is older than the final primary's journal, and no snapshot covers it",
			l.where, l.Kind, l.Session, l.ClientOrderID, l.Epoch, l.Seq)
		return 0, false
	}
	state, _ := prim.snap.DedupLookup(l.Session, l.ClientOrderID)
	if state == engine.DedupApplied || state == engine.DedupBelowWindow {
		res.InSnapshot++
		return 0, false
	}
	res.find("lost", &res.Lost, "%s: %s of session %d order %d (epoch %d, seq %d) is older than the final primary's journal and not in its snapshot's dedup table (%s)",
		l.where, l.Kind, l.Session, l.ClientOrderID, l.Epoch, l.Seq, state)
	return 0, false
}

// straddling finds an output of a frame that began below the primary's
// replay at one of the replayed seqs: a frame holds consecutive outputs
// of one session from its seq on, and its first output (index 0) is of a
// seq the replay lacks, so output Index, if the replay has it, is one of
// the session's first Index replayed outputs, byte for byte, under a
// record of the frame's epoch (of an earlier one for a replayed output).
func straddling(prim *replica, l *received) (uint64, bool) {
	outs := prim.outs[l.Session]
	for j := 0; j < len(outs) && j < l.Index; j++ {
		if !bytes.Equal(outs[j].payload, l.payload) {
			continue
		}
		if r, ok := prim.at(outs[j].seq); ok && (r.epoch == l.Epoch || (l.Replay && r.epoch < l.Epoch)) {
			return outs[j].seq, true
		}
	}
	return 0, false
}

// compareReplicas compares p with the final primary: records where both
// have the same seq, and state hashes up to where they part.
func compareReplicas(prim, p *replica, res *Result) {
	p.PartsAt = compareRecords(prim, p, res)
	end := min(prim.Last, p.Last)
	if p.PartsAt != 0 {
		end = p.PartsAt - 1
	}
	from := max(prim.SnapshotSeq, p.SnapshotSeq, 1)
	for seq := from; seq <= end; seq++ {
		a, okA := prim.hash(seq)
		b, okB := p.hash(seq)
		if !okA || !okB {
			continue
		}
		p.HashesCompared++
		if a != b {
			res.find("hash_mismatch", &res.HashMismatches, "seq %d: state hash %016x on %s, %016x on %s", seq, a, prim.Dir, b, p.Dir)
		}
	}
}

// compareRecords finds where a and b part (the first common seq whose
// records differ, 0 for none) and reports a conflict for every common seq
// whose records have the same epoch and different bytes.
func compareRecords(a, b *replica, res *Result) (partsAt uint64) {
	if a.First == 0 || b.First == 0 {
		return 0
	}
	for seq := max(a.First, b.First); seq <= min(a.Last, b.Last); seq++ {
		ra, rb := a.recs[seq-a.First], b.recs[seq-b.First]
		if ra.epoch == rb.epoch && bytes.Equal(ra.payload, rb.payload) {
			continue
		}
		if partsAt == 0 {
			partsAt = seq
		}
		if ra.epoch == rb.epoch {
			res.find("conflict", &res.Conflicts, "seq %d epoch %d: %s and %s hold different commands", seq, ra.epoch, a.Dir, b.Dir)
		}
	}
	return partsAt
}

// Lines describes the result for a terminal: the nodes, what was checked,
// the five counts, then the findings (at most MaxExamples of each kind).
func (r *Result) Lines() []string {
	var out []string
	for _, n := range r.Nodes {
		line := fmt.Sprintf("%-8s %s: journal seqs %d..%d (last epoch %d)", n.Role, n.Dir, n.First, n.Last, n.LastEpoch)
		if n.First == 0 {
			line = fmt.Sprintf("%-8s %s: journal empty (epoch %d)", n.Role, n.Dir, n.LastEpoch)
		}
		if n.SnapshotSeq != 0 {
			line += fmt.Sprintf(", snapshot at %d", n.SnapshotSeq)
		}
		if n.Replayed > 0 {
			line += fmt.Sprintf(", replayed %d..%d", n.ReplayFrom, n.ReplayFrom+n.Replayed-1)
		}
		if n.Role != "primary" {
			line += fmt.Sprintf(", %d state hashes compared with the primary", n.HashesCompared)
			if n.PartsAt != 0 {
				line += fmt.Sprintf(", histories part at seq %d", n.PartsAt)
			}
			if n.Behind != 0 {
				line += fmt.Sprintf(", %d checked outputs beyond its journal", n.Behind)
			}
		}
		if n.Role == "foreign" {
			line += fmt.Sprintf(", history %s: another history than the final primary's, not compared", n.History)
		}
		if n.Damage != "" {
			line += ", damaged: " + n.Damage
		}
		out = append(out, line)
	}
	out = append(out,
		fmt.Sprintf("received %d outputs (%d answers): %d found byte for byte at their (epoch, seq) in the final primary's history, %d duplicate answers from the dedup table backed by their original there, %d answers older than its journal found in its snapshot's dedup table, %d older executions or table-only rejects not checkable",
			r.Received, r.Answers, r.Checked, r.FromTable, r.InSnapshot, r.Unchecked),
		fmt.Sprintf("lost %d  duplicates %d  conflicts %d  hash mismatches %d  stale %d%s", r.Lost, r.Duplicates, r.Conflicts, r.HashMismatches, r.Stale, r.staleDelivered()))
	for _, t := range r.TornRecords {
		out = append(out, "record "+t+": that line was not verified")
	}
	for i := range r.Sessions {
		out = append(out, r.Sessions[i].Line())
	}
	for _, f := range r.Findings {
		out = append(out, fmt.Sprintf("  %s: %s", f.Kind, f.Text))
	}
	return out
}
