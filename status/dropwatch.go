package status

// dropWatch turns the drop counters an operator's mistake raises (a node
// with a wrong --id or --stream, a missing or different --key) into a
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
	{"DropUnknownNode", "frames from a node id that is not a --peer here: a node started with a wrong --id, or another cluster's on this group",
		func(s *Stats) uint64 { return s.DropUnknownNode }},
	{"DropWrongStream", "frames of another --stream at this node: a node started with a wrong --stream, or another stream's on this group or port",
		func(s *Stats) uint64 { return s.DropWrongStream }},
	{"DropNoMAC", "frames without a MAC at a node run with --key: a node or client started without --key",
		func(s *Stats) uint64 { return s.DropNoMAC }},
	{"DropBadMAC", "frames whose MAC fails: a node or client with another key file",
		func(s *Stats) uint64 { return s.DropBadMAC }},
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
		warn("dropping "+d.hint, "counter", d.name, "dropped", v-w.atWarn[i], "total", v)
		w.warned[i], w.warnedNs[i], w.atWarn[i] = true, st.UptimeNs, v
	}
}
