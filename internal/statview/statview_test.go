package statview

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// statusAt is a node's status in today's form, written at at.
func statusAt(id int, role string, at time.Time) string {
	return fmt.Sprintf(`{"id":%d,"role":%q,"epoch":3,"applied":10,"durable":10,"released":9,"ack":0,"primary":1,
"lease":{"held":true,"epoch":3,"remaining_ns":500000000},"state_hash":"ffffffffffffff01",
"standbys":[{"id":2,"acked":9,"last_ack_age_ns":1000,"in_sync":true},{"id":3,"acked":4,"in_sync":false},{"id":4,"acked":9,"in_sync":true,"leaving":true},{"id":5,"acked":8,"in_sync":true,"unreachable":true}],
"unicast":{"DatagramsReceived":9900,"drops":{"wrong_group":0,"bad_header":9806,"unknown_sender":0,"other":0}},
"multicast":{"Drops":[0,0,3,0,0,0,0,0]},
"node":{"NaksSent":4,"StepDowns":1},
"fsync":{"Inline":7,"Thread":1,"AvgNs":2100},
"gate":{"Held":0,"Dropped":0},
"written_at":%q,"pid":0,"write_interval_ns":100000000}`, id, role, at.UTC().Format(time.RFC3339Nano))
}

func writeStatus(t *testing.T, name, body string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "status.json"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestRenderOne: a status older than 3 write intervals is STALE; the
// socket drops in both forms (named, and the old unnamed array), each
// standby's ack and the state hash are shown.
func TestRenderOne(t *testing.T) {
	now := time.Now()
	dir := writeStatus(t, "node1", statusAt(1, "primary", now.Add(-301*time.Millisecond)))
	var buf bytes.Buffer
	if err := Render(&buf, []string{dir}, now); err != nil {
		t.Fatal(err)
	}
	text := buf.String()
	if !strings.HasPrefix(text, "STALE: written 301ms ago (more than 3× its 100ms write interval)") {
		t.Fatalf("not STALE:\n%s", text)
	}
	for _, want := range []string{"unicast socket drops: bad_header=9806", "multicast socket drops: bad_header=3",
		"acked by standby 2:9 3:4 (not in sync) 4:9 (leaving) 5:8 (gone: port unreachable)", "state hash ffffffffffffff01", "node: NaksSent=4 StepDowns=1", "fsync: AvgNs=2100 (2µs) Inline=7 Thread=1", "gate: all zero\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("lacks %q:\n%s", want, text)
		}
	}
	buf.Reset()
	if err := Render(&buf, []string{dir}, now.Add(-301*time.Millisecond)); err != nil || strings.Contains(buf.String(), "STALE") {
		t.Fatalf("a status 0 ms old is STALE: %v\n%s", err, buf.String())
	}
	if err := Render(&buf, []string{filepath.Join(dir, "missing")}, now); err == nil || !strings.Contains(err.Error(), "is the node running") {
		t.Fatalf("missing status: %v", err)
	}
}

// TestRenderSideBySide: one column per directory; an unreadable one is
// named, not fatal.
func TestRenderSideBySide(t *testing.T) {
	now := time.Now()
	a := writeStatus(t, "node1", statusAt(1, "primary", now.Add(-time.Minute)))
	b := writeStatus(t, "node2", statusAt(2, "standby", now))
	c := writeStatus(t, "node3", "{not json")
	var buf bytes.Buffer
	if err := Render(&buf, []string{a, b, c}, now); err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{}
	for _, l := range strings.Split(buf.String(), "\n") {
		for _, label := range []string{"role", "written ago", "acked", "socket drops"} {
			if strings.HasPrefix(l, label+" ") {
				rows[label] = strings.Fields(strings.TrimPrefix(l, label))
			}
		}
	}
	if r := rows["role"]; len(r) != 2 || r[0] != "primary" || r[1] != "standby" {
		t.Errorf("role row %q:\n%s", r, buf.String())
	}
	if r := rows["written ago"]; len(r) < 3 || r[0] != "STALE" || r[2] != "0s" || r[3] != "unreadable" {
		t.Errorf("written row %q:\n%s", r, buf.String())
	}
	if r := rows["socket drops"]; len(r) < 2 || r[0] != "u:bad_header=9806" {
		t.Errorf("drops row %q:\n%s", r, buf.String())
	}
	if !strings.Contains(buf.String(), "node3: parse ") {
		t.Errorf("the unreadable status is not named:\n%s", buf.String())
	}
}

// TestRenderWitness: a witness's status has its own view.
func TestRenderWitness(t *testing.T) {
	now := time.Now()
	dir := writeStatus(t, "witness", fmt.Sprintf(`{"role":"witness","id":9,"holder":0,"epoch":4,"lease_remaining_ns":0,
"quarantine_remaining_ns":250000000,"in_sync":[1,2],"in_sync_version":2,"requests":{"acquire":0,"renew":5},"grants":{"renew":5},"promotion_blocked":3,
"written_at":%q,"write_interval_ns":100000000}`, now.UTC().Format(time.RFC3339Nano)))
	var buf bytes.Buffer
	if err := Render(&buf, []string{dir}, now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"witness 9", "lease holder none  epoch 4", "RESTART QUARANTINE: 250 ms left", "in-sync set v2: [1 2]",
		"requests: acquire=0 renew=5", "grants: renew=5", "NO NODE MAY BE PROMOTED: node 3 refused (not in sync)", "seqbus witness override"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("lacks %q:\n%s", want, buf.String())
		}
	}
}

// TestRenderDatagramSizes: each node's datagram size has a row, and
// members whose sizes differ get a warning naming the fix; equal sizes
// (or statuses from before the field) get none.
func TestRenderDatagramSizes(t *testing.T) {
	now := time.Now()
	sized := func(id int, role string, bytes int) string {
		return strings.Replace(statusAt(id, role, now), `"epoch":3,`, fmt.Sprintf(`"epoch":3,"datagram_bytes":%d,`, bytes), 1)
	}
	a := writeStatus(t, "node1", sized(1, "primary", 8972))
	b := writeStatus(t, "node2", sized(2, "standby", 1472))
	c := writeStatus(t, "node3", sized(3, "standby", 1472))
	old := writeStatus(t, "node4", statusAt(4, "standby", now))
	for _, tc := range []struct {
		dirs []string
		warn bool
	}{
		{[]string{a, b}, true},
		{[]string{b, c}, false},
		{[]string{b, old}, false},
		{[]string{a, b, c, old}, true},
	} {
		var buf bytes.Buffer
		if err := Render(&buf, tc.dirs, now); err != nil {
			t.Fatal(err)
		}
		text := buf.String()
		if got := strings.Contains(text, "DATAGRAM SIZES DIFFER"); got != tc.warn {
			t.Errorf("%d statuses: warning %v, want %v:\n%s", len(tc.dirs), got, tc.warn, text)
		}
		if tc.warn && !strings.Contains(text, "(8972, 1472 bytes)") {
			t.Errorf("the warning does not name both sizes:\n%s", text)
		}
		if !strings.Contains(text, "datagram B") {
			t.Errorf("no datagram row:\n%s", text)
		}
	}
	var buf bytes.Buffer
	if err := Render(&buf, []string{a}, now); err != nil || !strings.Contains(buf.String(), "datagram 8972 B") {
		t.Fatalf("one node's view lacks its datagram size: %v\n%s", err, buf.String())
	}
}

// TestRenderNextSegmentWarning: a journal that cannot prepare its next
// segment is shown as a DISK line with the room left; without the
// warning there is no such line.
func TestRenderNextSegmentWarning(t *testing.T) {
	f := renderWarning(t, `"journal":{"first_seq":1,"last_seq":10,"next_segment_error":"journal: prepare the next segment (67108864 bytes): no space left on device","room_bytes":3145728},`,
		`"journal":{"first_seq":1,"last_seq":10},`,
		"DISK: the journal cannot prepare its next segment (journal: prepare the next segment (67108864 bytes): no space left on device); it fails when the current one fills, in 3.0 MiB of records: free disk space",
		"DISK", "next segment")
	if len(f) != 5 || f[0] != "FAILING," || f[1] != "3.0" || f[4] != "ok" {
		t.Fatalf("next segment row %q", f)
	}
}

// TestRenderDiskStalled: a node whose disk watch found its disk stalled
// says so, with how long and the bound, in its own view and in the
// cluster's disk row; a healthy one does neither.
func TestRenderDiskStalled(t *testing.T) {
	f := renderWarning(t, `"disk":{"stalled":true,"waiting_ns":1500000000,"stall_after_ns":1000000000},`, `"disk":{"stall_after_ns":1000000000},`,
		"DISK STALLED: nothing written has become durable for 1500 ms (--disk-stall-after 1000 ms); will not lead until the disk catches up",
		"STALLED", "disk")
	if len(f) != 4 || f[0] != "STALLED" || f[1] != "1500" || f[3] != "ok" {
		t.Fatalf("disk row %q", f)
	}
}

// TestRenderAgentStalls: a node whose agent was away from its sockets
// over a millisecond says how often and how long, in its own view and
// in the cluster's stalls row; one that never was has no such line.
func TestRenderAgentStalls(t *testing.T) {
	f := renderWarning(t, `"agent":{"Passes":10,"Parks":5,"LongestPassNs":2000000,"LongestStallNs":104000000,"Stalls":3},`,
		`"agent":{"Passes":10,"Parks":5,"LongestPassNs":30000,"LongestStallNs":400000},`,
		"AGENT STALLS: 3 times the agent thread was away from its sockets over 1 ms beyond its work and its parks (longest 104.0 ms; longest pass 2.0 ms)",
		"AGENT STALLS", "stalls")
	if len(f) != 6 || f[0] != "3," || f[1] != "104.0" || f[3] != "0," || f[4] != "0.4" {
		t.Fatalf("stalls row %q", f)
	}
}

// TestRenderJournalFailed: a node whose journal failed says so, and that
// it needs a restart, in its own view and in the cluster's disk row; a
// healthy one does neither.
func TestRenderJournalFailed(t *testing.T) {
	f := renderWarning(t, `"journal_failed":true,"disk":{"stall_after_ns":1000000000},`, `"disk":{"stall_after_ns":1000000000},`,
		"JOURNAL FAILED: a write, fsync or cut failed", "JOURNAL FAILED", "disk")
	if len(f) != 3 || f[0] != "JOURNAL" || f[1] != "FAILED" || f[2] != "ok" {
		t.Fatalf("disk row %q", f)
	}
}

// renderWarning renders a primary whose status carries sick (JSON fields)
// and checks its view has the line want; a standby whose status carries
// healthy must have no absent in its view. It returns the fields of the
// two nodes' cluster view's row label.
func renderWarning(t *testing.T, sick, healthy, want, absent, label string) []string {
	t.Helper()
	now := time.Now()
	body := strings.Replace(statusAt(1, "primary", now), `"primary":1,`, `"primary":1,`+sick, 1)
	well := strings.Replace(statusAt(2, "standby", now), `"primary":1,`, `"primary":1,`+healthy, 1)
	var buf bytes.Buffer
	if err := Render(&buf, []string{writeStatus(t, "node1", body)}, now); err != nil || !strings.Contains(buf.String(), want) {
		t.Fatalf("lacks %q: %v\n%s", want, err, buf.String())
	}
	buf.Reset()
	if err := Render(&buf, []string{writeStatus(t, "node2", well)}, now); err != nil || strings.Contains(buf.String(), absent) {
		t.Fatalf("%s without the warning: %v\n%s", absent, err, buf.String())
	}
	buf.Reset()
	if err := Render(&buf, []string{writeStatus(t, "node1", body), writeStatus(t, "node2", well)}, now); err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(buf.String(), "\n") {
		if strings.HasPrefix(l, label+" ") {
			return strings.Fields(strings.TrimPrefix(l, label))
		}
	}
	t.Fatalf("no %s row:\n%s", label, buf.String())
	return nil
}

// failAfter accepts n writes, then fails.
type failAfter struct {
	bytes.Buffer
	n int
}

func (f *failAfter) Write(b []byte) (int, error) {
	if f.n == 0 {
		return 0, os.ErrClosed
	}
	f.n--
	return f.Buffer.Write(b)
}

// TestWatch: once writes one view; refreshing writes views until the
// writer fails, each starting with the clear-screen codes on a terminal
// and separated by a blank line elsewhere; CopyJSON copies the file and
// names it when it is missing.
func TestWatch(t *testing.T) {
	dir := writeStatus(t, "n1", statusAt(1, "primary", time.Now()))
	var once bytes.Buffer
	if err := Watch(&once, []string{dir}, true, true, time.Millisecond); err != nil || strings.Contains(once.String(), "\033[H") || !strings.Contains(once.String(), "primary") {
		t.Fatalf("once: %v\n%s", err, once.String())
	}
	tty := &failAfter{n: 2}
	if err := Watch(tty, []string{dir}, false, true, time.Millisecond); err == nil {
		t.Fatal("a failed write did not end the watch")
	}
	if got := strings.Count(tty.String(), "\033[H\033[2J"); got != 2 {
		t.Fatalf("terminal: %d clear-screens in 2 views", got)
	}
	pipe := &failAfter{n: 2}
	if err := Watch(pipe, []string{dir}, false, false, time.Millisecond); err == nil || strings.Contains(pipe.String(), "\033[") || !strings.HasSuffix(pipe.String(), "\n\n") {
		t.Fatalf("pipe: %v %q", err, pipe.String())
	}
	var js bytes.Buffer
	if err := CopyJSON(&js, dir); err != nil || !strings.HasPrefix(js.String(), `{"id":1`) || !strings.HasSuffix(js.String(), "}\n") {
		t.Fatalf("json: %v %q", err, js.String())
	}
	if err := CopyJSON(&js, filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "is the node running") {
		t.Fatalf("missing: %v", err)
	}
}

// TestRenderForeignHistory: a node that heard another history says so,
// with its directory's id.
func TestRenderForeignHistory(t *testing.T) {
	renderWarning(t, `"foreign_history":true,"history":"00000000000000aa",`, ``,
		"FOREIGN HISTORY: its directory holds history 00000000000000aa", "FOREIGN HISTORY", "role")
}

// TestRenderNewDirectory: a node whose directory is new says it
// acknowledges nothing yet; an empty in-sync set (JSON null) never
// prints as Go's <nil>.
func TestRenderNewDirectory(t *testing.T) {
	renderWarning(t, `"new_directory":true,"in_sync":{"members":null},`, `"in_sync":{"members":null},`,
		"NEW DIRECTORY: has not caught up with a primary yet", "NEW DIRECTORY", "role")
	now := time.Now()
	body := strings.Replace(statusAt(1, "standby", now), `"primary":1,`, `"primary":1,"in_sync":{"members":null},`, 1)
	for _, dirs := range [][]string{{writeStatus(t, "node1", body)}, {writeStatus(t, "node1", body), writeStatus(t, "node2", body)}} {
		var buf bytes.Buffer
		if err := Render(&buf, dirs, now); err != nil || strings.Contains(buf.String(), "<nil>") {
			t.Fatalf("%v\n%s", err, buf.String())
		}
	}
}
