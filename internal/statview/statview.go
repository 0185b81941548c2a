// Package statview reads the status.json a node or a witness rewrites
// in its --dir and renders it for `seqbus stat`: one status, or several
// side by side (like AeronStat), each marked STALE when it is older than
// a few of its own write intervals and when its process is gone. It reads
// either form of the fields (today's and the older one) and never fails
// on a field it does not know.
package statview

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// staleIntervals: a status older than this many of its write intervals is
// marked STALE. A killed primary's file still says "primary, lease held";
// three missed rewrites (300 ms at the default) is far beyond a scheduling
// stall of the status writer yet quick for an operator.
const staleIntervals = 3

// defaultStatusIntervalNs is the write interval assumed for a status that
// does not state its own (written before write_interval_ns existed).
const defaultStatusIntervalNs = int64(100 * time.Millisecond)

// Render writes one view of the statuses in dirs at now: a node's (or
// witness's) status, or several side by side, one column each, with
// each marked STALE when older than staleIntervals of its own write
// interval. The error is the one status's when it cannot be read.
func Render(w io.Writer, dirs []string, now time.Time) error {
	if len(dirs) == 1 {
		st, err := loadStatus(dirs[0])
		if err != nil {
			return err
		}
		printStat(w, st, now)
		return nil
	}
	var sts []loadedStatus
	for _, d := range dirs {
		st, err := loadStatus(d)
		if err != nil {
			st = loadedStatus{path: Path(d), err: err}
		}
		sts = append(sts, st)
	}
	printCluster(w, sts, now)
	return nil
}

// Watch writes Render's view of dirs to w every interval until w fails
// (once: one view, then nil). clear starts each view with a terminal's
// clear-screen codes; without it views are separated by a blank line
// (a pipe or a file, where screen codes break grep and diff).
func Watch(w io.Writer, dirs []string, once, clear bool, interval time.Duration) error {
	for {
		var buf bytes.Buffer
		if !once && clear {
			buf.WriteString("\033[H\033[2J")
		}
		if err := Render(&buf, dirs, time.Now()); err != nil {
			return err
		}
		if !once && !clear {
			buf.WriteString("\n")
		}
		if _, err := w.Write(buf.Bytes()); err != nil || once {
			return err
		}
		time.Sleep(interval)
	}
}

// CopyJSON writes dir's status file to w as it is, with a newline.
func CopyJSON(w io.Writer, dir string) error {
	b, err := os.ReadFile(Path(dir))
	if err != nil {
		return fmt.Errorf("read %s: %v (is the node running with this --dir?)", Path(dir), err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// Path is the status file of a node's (or witness's) --dir, or the
// path itself when it is not a directory.
func Path(dir string) string {
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return filepath.Join(dir, "status.json")
	}
	return dir
}

// loadedStatus is one status file, parsed, with what says how fresh it is.
type loadedStatus struct {
	path  string
	s     map[string]any
	mtime time.Time
	err   error
}

func loadStatus(dir string) (loadedStatus, error) {
	path := Path(dir)
	b, err := os.ReadFile(path)
	if err != nil {
		return loadedStatus{}, fmt.Errorf("read %s: %v (is the node running with this --dir?)", path, err)
	}
	st := loadedStatus{path: path}
	if fi, err := os.Stat(path); err == nil {
		st.mtime = fi.ModTime()
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // keep 64-bit counters exact
	if err := dec.Decode(&st.s); err != nil {
		return loadedStatus{}, fmt.Errorf("parse %s: %v", path, err)
	}
	return st, nil
}

// freshness says how old the status is and whether that is STALE: older
// than staleIntervals of its own write interval, by its written_at (or
// the file's mtime when it has none).
func (st loadedStatus) freshness(now time.Time) (age time.Duration, stale bool, limit time.Duration) {
	written := st.mtime
	if at, ok := st.s["written_at"].(string); ok {
		if t, err := time.Parse(time.RFC3339Nano, at); err == nil {
			written = t
		}
	}
	intervalNs := defaultStatusIntervalNs
	if v := toF(st.s["write_interval_ns"]); v > 0 {
		intervalNs = int64(v)
	}
	limit = time.Duration(staleIntervals * intervalNs)
	age = now.Sub(written)
	return age, age > limit, limit
}

// processGone reports whether the status names a pid that no longer runs
// on this host (only meaningful when reading a local node's directory).
func (st loadedStatus) processGone() (int, bool) {
	pid := int(toF(st.s["pid"]))
	if pid <= 0 {
		return 0, false
	}
	err := syscall.Kill(pid, 0)
	return pid, errors.Is(err, syscall.ESRCH)
}

func get(m map[string]any, k string) any {
	if v, ok := m[k]; ok && v != nil { // null (an empty set) prints as "-", not Go's <nil>
		return v
	}
	return "-"
}

func sub(m map[string]any, k string) map[string]any {
	v, _ := m[k].(map[string]any)
	return v
}

// stateHash reads the hash in either form: hex text (now) or a number.
func stateHash(s map[string]any) string {
	switch v := s["state_hash"].(type) {
	case string:
		return v
	case json.Number:
		if h, err := strconv.ParseUint(v.String(), 10, 64); err == nil {
			return fmt.Sprintf("%016x", h)
		}
	}
	return "-"
}

// socketDropNames names the old form's unnamed drop array (bus.DropReason).
var socketDropNames = []string{"accept", "wrong_group", "bad_header", "unknown_sender", "other", "reason_5", "reason_6", "reason_7"}

// socketDrops returns a socket's drops by name, in either form.
func socketDrops(sock map[string]any) map[string]any {
	switch d := sock["drops"].(type) {
	case map[string]any:
		return d
	}
	if arr, ok := sock["Drops"].([]any); ok {
		out := map[string]any{}
		for i, v := range arr {
			if i < len(socketDropNames) && toF(v) != 0 {
				out[socketDropNames[i]] = v
			}
		}
		return out
	}
	return nil
}

func nonZero(m map[string]any) string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(m)) {
		v := m[name]
		switch {
		case toF(v) == 0:
		case strings.HasSuffix(name, "Ns"):
			// A duration in ns, also in a unit a reader takes in.
			d := time.Duration(toF(v))
			if d >= time.Microsecond {
				d = d.Round(time.Microsecond)
			}
			parts = append(parts, fmt.Sprintf("%s=%v (%v)", name, v, d))
		default:
			parts = append(parts, fmt.Sprintf("%s=%v", name, v))
		}
	}
	return strings.Join(parts, " ")
}

// standbyAcks is the primary's view of its standbys, "2:1234 3:1200".
func standbyAcks(s map[string]any) string {
	list, _ := s["standbys"].([]any)
	var parts []string
	for _, e := range list {
		m, _ := e.(map[string]any)
		flag := ""
		switch {
		case m["leaving"] == true:
			flag = " (leaving)"
		case m["unreachable"] == true:
			flag = " (gone: port unreachable)"
		case m["in_sync"] != true:
			flag = " (not in sync)"
		}
		parts = append(parts, fmt.Sprintf("%v:%v%s", get(m, "id"), get(m, "acked"), flag))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

func printStat(w io.Writer, st loadedStatus, now time.Time) {
	s := st.s
	age, stale, limit := st.freshness(now)
	if stale {
		fmt.Fprintf(w, "STALE: written %s ago (more than %d× its %s write interval): the node is dead or stalled; below is its LAST status, not the present\n",
			age.Round(time.Millisecond), staleIntervals, limit/staleIntervals)
	}
	if pid, gone := st.processGone(); gone {
		fmt.Fprintf(w, "process %d is not running\n", pid)
	}
	if s["role"] == "witness" {
		printWitnessStat(w, s)
		return
	}
	datagram := ""
	if d, ok := s["datagram_bytes"]; ok {
		datagram = fmt.Sprintf("  datagram %v B", d)
	}
	fmt.Fprintf(w, "node %v  role %v  epoch %v  primary %v  uptime %.1fs  pid %v%s  written %s ago\n",
		get(s, "id"), get(s, "role"), get(s, "epoch"), get(s, "primary"), toF(get(s, "uptime_ns"))/1e9, get(s, "pid"), datagram, age.Round(time.Millisecond))
	lease := sub(s, "lease")
	fmt.Fprintf(w, "lease held %v  epoch %v  time left %.0f ms\n", get(lease, "held"), get(lease, "epoch"), toF(get(lease, "remaining_ns"))/1e6)
	acked := fmt.Sprint(get(s, "ack"))
	if s["role"] == "primary" {
		acked = "by standby " + standbyAcks(s)
	}
	fmt.Fprintf(w, "applied %v  durable %v  released %v  acked %s  state hash %s\n",
		get(s, "applied"), get(s, "durable"), get(s, "released"), acked, stateHash(s))
	if nd, _ := s["new_directory"].(bool); nd {
		fmt.Fprintln(w, "NEW DIRECTORY: has not caught up with a primary yet; acknowledges nothing, and leads only a term no other node can hold a history for")
	}
	if f, _ := s["foreign_history"].(bool); f {
		fmt.Fprintf(w, "FOREIGN HISTORY: its directory holds history %v, and its primary or the arbiter another: acknowledges nothing and will not lead; stop it, empty its directory, restart it\n", get(s, "history"))
	}
	if r, _ := s["refetching"].(bool); r {
		fmt.Fprintln(w, "REFETCHING: history discarded (or journal set aside); will not lead until caught up")
	}
	if f, _ := s["journal_failed"].(bool); f {
		fmt.Fprintf(w, "JOURNAL FAILED: a write, fsync or cut failed (JournalErrors %v, SyncErrors %v; the log says which): nothing more becomes durable, released or acknowledged, and it will not lead: restart the node once the disk is fixed\n",
			get(sub(s, "node"), "JournalErrors"), get(sub(s, "node"), "SyncErrors"))
	}
	if d := sub(s, "disk"); d != nil && d["stalled"] == true {
		fmt.Fprintf(w, "DISK STALLED: nothing written has become durable for %.0f ms (--disk-stall-after %.0f ms); will not lead until the disk catches up\n",
			toF(get(d, "waiting_ns"))/1e6, toF(get(d, "stall_after_ns"))/1e6)
	}
	if j := sub(s, "journal"); j != nil && j["next_segment_error"] != nil {
		fmt.Fprintf(w, "DISK: the journal cannot prepare its next segment (%v); it fails when the current one fills, in %.1f MiB of records: free disk space\n",
			get(j, "next_segment_error"), toF(get(j, "room_bytes"))/(1<<20))
	}
	if a := sub(s, "agent"); a != nil && toF(get(a, "Stalls")) > 0 {
		fmt.Fprintf(w, "AGENT STALLS: %v times the agent thread was away from its sockets over 1 ms beyond its work and its parks (longest %.1f ms; longest pass %.1f ms): the machine did not run it when it should have (an overloaded or shared core, a stopped process); every datagram meanwhile waited (docs/tuning.md)\n",
			get(a, "Stalls"), toF(get(a, "LongestStallNs"))/1e6, toF(get(a, "LongestPassNs"))/1e6)
	}
	if l := sub(s, "latency_us"); l != nil {
		fmt.Fprintf(w, "assign->release µs: p50 %v  p99 %v  p99.9 %v  max %v\n", get(l, "p50"), get(l, "p99"), get(l, "p99.9"), get(l, "max"))
	}
	for _, k := range []string{"unicast", "multicast"} {
		if d := socketDrops(sub(s, k)); d != nil {
			text := nonZero(d)
			if text == "" {
				text = "none"
			}
			fmt.Fprintf(w, "%s socket drops: %s\n", k, text)
		}
	}
	for _, k := range []string{"node", "fsync", "sequencer", "window", "naks", "gate", "unicast", "multicast", "agent"} {
		m := sub(s, k)
		if m == nil {
			continue
		}
		text := nonZero(m)
		if text == "" {
			text = "all zero" // a group whose counters never moved, not a missing line
		}
		fmt.Fprintf(w, "%s: %s\n", k, text)
	}
}

// clusterRows are the rows of the side-by-side view: a label and how to
// read it from one status.
var clusterRows = []struct {
	label string
	value func(s map[string]any) string
}{
	{"role", func(s map[string]any) string { return fmt.Sprint(get(s, "role")) }},
	{"epoch", func(s map[string]any) string { return fmt.Sprint(get(s, "epoch")) }},
	{"primary", func(s map[string]any) string { return fmt.Sprint(get(s, "primary")) }},
	{"lease held", func(s map[string]any) string { return fmt.Sprint(get(sub(s, "lease"), "held")) }},
	{"lease left ms", func(s map[string]any) string {
		if s["role"] == "witness" { // the live holder's, as the witness sees it
			return fmt.Sprintf("%.0f", toF(get(s, "lease_remaining_ns"))/1e6)
		}
		return fmt.Sprintf("%.0f", toF(get(sub(s, "lease"), "remaining_ns"))/1e6)
	}},
	{"holder", func(s map[string]any) string { return fmt.Sprint(get(s, "holder")) }},
	{"applied", func(s map[string]any) string { return fmt.Sprint(get(s, "applied")) }},
	{"durable", func(s map[string]any) string { return fmt.Sprint(get(s, "durable")) }},
	{"released", func(s map[string]any) string { return fmt.Sprint(get(s, "released")) }},
	{"acked", func(s map[string]any) string {
		if s["role"] == "primary" {
			return standbyAcks(s)
		}
		return fmt.Sprint(get(s, "ack"))
	}},
	{"in-sync", func(s map[string]any) string {
		switch s["role"] {
		case "witness": // the set in force
			return fmt.Sprint(get(s, "in_sync"))
		case "primary": // the set it gates on
			return fmt.Sprint(get(sub(s, "in_sync"), "members"))
		}
		return "-" // a standby's copy is the last grant's, stale once another node leads
	}},
	{"state hash", stateHash},
	{"p99 µs", func(s map[string]any) string { return fmt.Sprint(get(sub(s, "latency_us"), "p99")) }},
	{"datagram B", func(s map[string]any) string { return fmt.Sprint(get(s, "datagram_bytes")) }},
	{"disk", func(s map[string]any) string {
		if d := sub(s, "disk"); d == nil || s["role"] == "witness" {
			return "-"
		} else if s["journal_failed"] == true {
			return "JOURNAL FAILED"
		} else if d["stalled"] == true {
			return fmt.Sprintf("STALLED %.0f ms", toF(get(d, "waiting_ns"))/1e6)
		}
		return "ok"
	}},
	{"next segment", func(s map[string]any) string {
		if j := sub(s, "journal"); j == nil || s["role"] == "witness" {
			return "-"
		} else if j["next_segment_error"] != nil {
			return fmt.Sprintf("FAILING, %.1f MiB left", toF(get(j, "room_bytes"))/(1<<20))
		}
		return "ok"
	}},
	{"socket drops", func(s map[string]any) string {
		var parts []string
		for _, k := range []string{"unicast", "multicast"} {
			if t := nonZero(socketDrops(sub(s, k))); t != "" {
				parts = append(parts, k[:1]+":"+t)
			}
		}
		return strings.Join(parts, " ")
	}},
	{"stalls", func(s map[string]any) string {
		// The agent's time away from its sockets: count over 1 ms, longest.
		if a := sub(s, "agent"); a != nil && toF(get(a, "Passes")) > 0 {
			return fmt.Sprintf("%.0f, %.1f ms", toF(get(a, "Stalls")), toF(get(a, "LongestStallNs"))/1e6)
		}
		return "-"
	}},
	{"naks sent", func(s map[string]any) string { return fmt.Sprint(get(sub(s, "node"), "NaksSent")) }},
	{"retransmits", func(s map[string]any) string { return fmt.Sprint(get(sub(s, "sequencer"), "RetransmitFrames")) }},
	{"step-downs", func(s map[string]any) string { return fmt.Sprint(get(sub(s, "node"), "StepDowns")) }},
	{"drops", func(s map[string]any) string {
		// A witness's (and any other) drops by reason.
		if d, ok := s["drops"].(map[string]any); ok {
			return nonZero(d)
		}
		return "-"
	}},
}

// printCluster shows several statuses side by side, one column each.
func printCluster(w io.Writer, sts []loadedStatus, now time.Time) {
	heads, cols := clusterColumns(sts, now)
	labels := []string{"written ago"}
	for _, r := range clusterRows {
		labels = append(labels, r.label)
	}
	tw := bufio.NewWriter(w)
	defer tw.Flush()
	widths := make([]int, len(sts))
	for i := range sts {
		widths[i] = len(heads[i])
		for _, v := range cols[i] {
			widths[i] = max(widths[i], len(v))
		}
	}
	fmt.Fprintf(tw, "%-14s", "")
	for i, h := range heads {
		fmt.Fprintf(tw, "  %-*s", widths[i], h)
	}
	fmt.Fprintln(tw)
	for row, label := range labels {
		empty := true
		for i := range sts {
			if row < len(cols[i]) && cols[i][row] != "-" && cols[i][row] != "" {
				empty = false
			}
		}
		if empty && row > 0 {
			continue // a row no status has (a witness row among nodes)
		}
		fmt.Fprintf(tw, "%-14s", label)
		for i := range sts {
			v := ""
			if row < len(cols[i]) {
				v = cols[i][row]
			}
			fmt.Fprintf(tw, "  %-*s", widths[i], v)
		}
		fmt.Fprintln(tw)
	}
	for i, st := range sts {
		if st.err != nil {
			fmt.Fprintf(tw, "%s: %v\n", heads[i], st.err)
		}
	}
	if sizes := datagramSizes(sts); len(sizes) > 1 {
		fmt.Fprintf(tw, "DATAGRAM SIZES DIFFER (%s bytes): a datagram larger than a receiver's is dropped; every member and client must use the same --datagram-bytes\n", strings.Join(sizes, ", "))
	}
}

// datagramSizes lists the distinct datagram sizes the nodes' statuses
// report (a witness reports none), in order of first appearance.
func datagramSizes(sts []loadedStatus) []string {
	var sizes []string
	for _, st := range sts {
		if st.err != nil || st.s == nil {
			continue
		}
		v, ok := st.s["datagram_bytes"]
		if !ok {
			continue
		}
		if d := fmt.Sprint(v); !slices.Contains(sizes, d) {
			sizes = append(sizes, d)
		}
	}
	return sizes
}

// clusterColumns is each status's column head and values.
func clusterColumns(sts []loadedStatus, now time.Time) (heads []string, cols [][]string) {
	cols = make([][]string, len(sts))
	heads = make([]string, len(sts))
	for i, st := range sts {
		heads[i] = filepath.Base(filepath.Dir(st.path))
		if st.err != nil {
			cols[i] = []string{"unreadable"}
			continue
		}
		age, stale, _ := st.freshness(now)
		fresh := age.Round(time.Millisecond).String()
		if stale {
			fresh = "STALE " + fresh
		}
		if _, gone := st.processGone(); gone {
			fresh += " (exited)"
		}
		cols[i] = append(cols[i], fresh)
		for _, r := range clusterRows {
			cols[i] = append(cols[i], r.value(st.s))
		}
	}
	return heads, cols
}

func toF(v any) float64 {
	switch x := v.(type) {
	case json.Number:
		f, _ := x.Float64()
		return f
	case float64:
		return x
	}
	return 0
}

// printWitnessStat prints a witness's status.json (seqbus witness writes
// it in its --dir like a node).
func printWitnessStat(w io.Writer, s map[string]any) {
	holder := fmt.Sprint(get(s, "holder"))
	if holder == "0" {
		holder = "none"
	}
	fmt.Fprintf(w, "witness %v  uptime %.1fs\n", get(s, "id"), toF(get(s, "uptime_ns"))/1e9)
	fmt.Fprintf(w, "lease holder %s  epoch %v  time left %.0f ms  last holder %v  durable epoch %v\n",
		holder, get(s, "epoch"), toF(get(s, "lease_remaining_ns"))/1e6, get(s, "last_holder"), get(s, "durable_epoch"))
	if q := toF(get(s, "quarantine_remaining_ns")); q > 0 {
		fmt.Fprintf(w, "RESTART QUARANTINE: %.0f ms left (only the last holder may renew its epoch)\n", q/1e6)
	}
	fmt.Fprintf(w, "in-sync set v%v: %v\n", get(s, "in_sync_version"), get(s, "in_sync"))
	if b := toF(get(s, "promotion_blocked")); b > 0 {
		fmt.Fprintf(w, "NO NODE MAY BE PROMOTED: node %v refused (not in sync) and the set is empty: only the last holder may lead (if it is lost for good: seqbus witness override, docs/witness.md)\n", get(s, "promotion_blocked"))
	}
	fmt.Fprintf(w, "persists %v  persist failures %v  receive errors %v  send errors %v\n",
		get(s, "persists"), get(s, "persist_failures"), get(s, "receive_errors"), get(s, "send_errors"))
	for _, k := range []string{"requests", "grants", "denies", "drops"} {
		m, _ := s[k].(map[string]any)
		fmt.Fprintf(w, "%s:", k)
		for _, name := range slices.Sorted(maps.Keys(m)) {
			if v := m[name]; toF(v) != 0 || k == "requests" {
				fmt.Fprintf(w, " %s=%v", name, v)
			}
		}
		fmt.Fprintln(w)
	}
}
