package status

// dropWatch turns the counters an operator's mistake raises (a node with
// a wrong --id, --stream or --peer, a missing or different --key) into a
// warning on the status writer's goroutine, off the agent: the counters
// alone were found only by reading status.json. Each counter warns when
// it rose since the last copy, at most once a minute (by the copies'
// UptimeNs), with how many since its last warning.
type dropWatch struct {
	seen, atWarn [len(watchedDrops)]uint64
	warnedNs     [len(watchedDrops)]int64
	warned       [len(watchedDrops)]bool
}

// dropWarnEveryNs bounds the warnings of one counter.
const dropWarnEveryNs = int64(60e9)

var watchedDrops = [...]struct {
	name, hint string
	get        func(*Stats) uint64
}{
	{"DropUnknownNode", "dropping frames from a node id that is not a --peer here: a node started with a wrong --id, or another cluster's on this group",
		func(s *Stats) uint64 { return s.DropUnknownNode }},
	{"DropWrongStream", "dropping frames of another --stream at this node: a node started with a wrong --stream, or another stream's on this group or port",
		func(s *Stats) uint64 { return s.DropWrongStream }},
	{"DropNoMAC", "dropping frames without a MAC at a node run with --key: a node or client started without --key",
		func(s *Stats) uint64 { return s.DropNoMAC }},
	{"DropBadMAC", "dropping frames whose MAC fails: a node or client with another key file",
		func(s *Stats) uint64 { return s.DropBadMAC }},
	{"AcksFromOtherAddr", "acks come from a standby at another address than its --peer here: probes, NAK answers and snapshots go to the --peer address, so a wrong one makes the standby look gone",
		func(s *Stats) uint64 { return s.AcksFromOtherAddr }},
}

// note compares st with the last copy and warns of each watched counter
// that rose.
func (w *dropWatch) note(st *Status, warn func(msg string, args ...any)) {
	for i, d := range watchedDrops {
		v := d.get(&st.Node)
		rose := v > w.seen[i]
		w.seen[i] = v
		if !rose || (w.warned[i] && st.UptimeNs-w.warnedNs[i] < dropWarnEveryNs) {
			continue
		}
		warn(d.hint, "counter", d.name, "since_last_warning", v-w.atWarn[i], "total", v)
		w.warned[i], w.warnedNs[i], w.atWarn[i] = true, st.UptimeNs, v
	}
}
