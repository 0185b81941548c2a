package witness

import (
	"encoding/json"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seqbus/seqbus/auth"
	"github.com/seqbus/seqbus/internal/syncbuf"
)

// TestStatusFile (issue 15 item 7): a witness started on a directory keeps
// DIR/status.json up to date, like a node: the lease (holder, epoch, time
// left, in-sync set), requests and grants by kind, denies and drops by
// reason; the file left after Close holds the final counters.
func TestStatusFile(t *testing.T) {
	p := genTestPair(t, true, "")
	if g := p.roundTrip(t, acquireFrame(t, 1, 1)); !g.Granted() {
		t.Fatalf("grant %+v", g)
	}
	p.roundTrip(t, renewInSyncFrame(t, 1, 2, 1, 1, 2))
	p.roundTrip(t, acquireFrame(t, 2, 1)) // denied: held
	if err := p.node.Send([][]byte{[]byte("garbage")}, p.witness); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(p.dir, StatusFileName)
	var r StatusReport
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil {
			r = StatusReport{}
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatalf("status file: %v\n%s", err, b)
			}
			if r.Drops["short"]+r.Drops["magic"] == 1 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("status file %s never showed the drop: %v %+v", path, err, r)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r.Role != "witness" || r.ID != 99 || r.Holder != 1 || r.Epoch != 1 || r.LeaseRemainingNs <= 0 ||
		r.LastHolder != 1 || r.InSyncVersion != 2 || len(r.InSync) != 1 || r.InSync[0] != 2 || r.DurableEpoch != 1 {
		t.Fatalf("lease in the status file: %+v", r)
	}
	if r.Requests["acquire"] != 2 || r.Requests["renew"] != 1 || r.Grants["acquire"] != 1 || r.Grants["renew"] != 1 ||
		r.Grants["new_epoch"] != 1 || r.Denies["held"] != 1 || r.Persists != 2 {
		t.Fatalf("counters in the status file: %+v", r)
	}
	if _, ok := r.Drops["bad-mac"]; !ok {
		t.Fatalf("drops by reason lack bad-mac: %v", r.Drops)
	}
	p.roundTrip(t, renewFrame(t, 1, 3, 1))
	if err := p.server.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &r); err != nil || r.Requests["renew"] != 2 {
		t.Fatalf("final status %v %+v: want the last renew counted", err, r)
	}
}

// TestAuthFailuresAreLoggedRateLimited (issue 15 item 7): a node whose
// key file differs from the witness's sees every request dropped; the
// witness says so in its log at once, and then at most once per 10 s
// whatever the rate.
func TestAuthFailuresAreLoggedRateLimited(t *testing.T) {
	key, err := auth.GenerateMasterKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := auth.GenerateMasterKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	cfg := testConfig()
	cfg.Key, cfg.Nodes, cfg.Stream = &key, []uint32{1, 2}, 7
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	s, err := newTestCore(cfg, &memStore{})
	if err != nil {
		t.Fatal(err)
	}
	from := netip.MustParseAddrPort("127.0.0.1:9000")
	wrong := auth.NewMAC(auth.LeaseKey(&other, 7, 1))
	const ms = int64(time.Millisecond)
	for i := range 1000 {
		s.handle(sealWith(acquireFrame(t, 1, uint64(10+i)), wrong), from, int64(i)*ms) // 1 s of requests
	}
	if n := strings.Count(logs.String(), "fail authentication"); n != 1 {
		t.Fatalf("%d log records for 1000 bad requests in 1 s, want 1:\n%s", n, logs.String())
	}
	s.handle(sealWith(acquireFrame(t, 1, 5000), wrong), from, 11_000*ms)
	out := logs.String()
	if n := strings.Count(out, "fail authentication"); n != 2 || !strings.Contains(out, "dropped_since_last_log=1000") {
		t.Fatalf("after 10 s: %d records, want 2 with the count since the last:\n%s", n, out)
	}
	if st := s.Stats(); st.Drops[DropBadMAC] != 1001 {
		t.Fatalf("bad-mac drops %d", st.Drops[DropBadMAC])
	}
}
