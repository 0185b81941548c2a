package status

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqbus/seqbus/bus"
)

func TestHash64JSON(t *testing.T) {
	for _, h := range []Hash64{0, 1, 1<<53 + 1, 1<<64 - 1} {
		b, err := json.Marshal(h)
		if err != nil || string(b) != fmt.Sprintf(`"%016x"`, uint64(h)) {
			t.Fatalf("%d: %s %v", h, b, err)
		}
		var back Hash64
		if err := json.Unmarshal(b, &back); err != nil || back != h {
			t.Fatalf("%s: %d %v", b, back, err)
		}
	}
	var old Hash64
	if err := json.Unmarshal([]byte("18446744073709551615"), &old); err != nil || old != 1<<64-1 {
		t.Fatalf("numeric form: %d %v", old, err)
	}
	if err := json.Unmarshal([]byte(`"xyz"`), &old); err == nil {
		t.Fatal("accepted a non-hex hash")
	}
}

// A socket's drops appear once in status.json, by name: with the bus's
// unnamed array beside them (a JSON name differing only in case) the file
// no longer decoded into a Status (seen in the hostile-traffic test).
func TestSocketStatusJSONRoundTrip(t *testing.T) {
	var c bus.Counters
	c.Drops[bus.DropBadHeader] = 7
	c.Drops[bus.DropSendOnly] = 2
	st := Status{Unicast: FromCounters(c)}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(strings.ToLower(string(b)), `"drops":`); n != 3 {
		t.Fatalf("%d drops fields in %s, want one per socket (unicast, multicast, multicast_send)", n, b)
	}
	var back Status
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("status.json does not decode: %v\n%s", err, b)
	}
	if back.Unicast.Drops.BadHeader != 7 || back.Unicast.Drops.SendOnly != 2 {
		t.Fatalf("drops after a round trip: %+v", back.Unicast.Drops)
	}
}

// The publisher writes the latest copy it was handed, on its own
// goroutine, and the file decodes back into what was published.
func TestPublisherWritesTheLatest(t *testing.T) {
	path := t.TempDir() + "/status.json"
	wrote := make(chan uint64, 16)
	p := NewPublisher(path, func(path string, b []byte) error {
		var st Status
		if err := json.Unmarshal(b, &st); err != nil {
			t.Errorf("written status does not decode: %v", err)
		}
		if st.WrittenAt != "prepared" {
			t.Errorf("written before prepare completed it: written_at %q", st.WrittenAt)
		}
		err := WriteFileAtomic(path, b)
		wrote <- st.Applied
		return err
	}, nil, func(st *Status) { st.WrittenAt = "prepared" })
	p.Start()
	defer p.Stop()
	for applied := uint64(1); applied <= 3; applied++ {
		p.Publish(&Status{Applied: applied, StateHash: 1<<64 - 1})
	}
	deadline := time.After(10 * time.Second)
	for last := uint64(0); last != 3; {
		select {
		case last = <-wrote:
		case <-deadline:
			t.Fatalf("the latest status (applied 3) was never written; last %d", last)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var back Status
	if err := json.Unmarshal(b, &back); err != nil || back.Applied != 3 || back.StateHash != 1<<64-1 {
		t.Fatalf("on disk: %+v %v", back.Applied, err)
	}
}

// TestPublisherReportsFailures: report hears of the first failed write
// of an episode and of the first good one after it, once each, however
// many writes fail in between.
func TestPublisherReportsFailures(t *testing.T) {
	path := t.TempDir() + "/status.json"
	full := errors.New("no space left on device")
	var fail atomic.Bool
	wrote := make(chan struct{}, 64)
	reports := make(chan error, 64)
	p := NewPublisher(path, func(path string, b []byte) error {
		defer func() { wrote <- struct{}{} }()
		if fail.Load() {
			return full
		}
		return WriteFileAtomic(path, b)
	}, func(err error) { reports <- err }, nil)
	p.Start()
	defer p.Stop()
	publish := func(n int) {
		for range n {
			p.Publish(&Status{})
			select {
			case <-wrote:
			case <-time.After(10 * time.Second):
				t.Fatal("no write within 10 s of a publish")
			}
		}
	}
	publish(2)
	fail.Store(true)
	publish(3)
	fail.Store(false)
	publish(2)
	p.Stop()
	close(reports)
	var got []error
	for err := range reports {
		got = append(got, err)
	}
	if len(got) != 2 || !errors.Is(got[0], full) || got[1] != nil {
		t.Fatalf("reports %v, want [the failure, nil]", got)
	}
}

// TestReadLast: the durable seq and the market data known released, for
// this node only; a missing, unreadable or other node's file is not ok.
func TestReadLast(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "status.json")
	if err := os.WriteFile(path, []byte(`{"id": 3, "durable": 41, "md": {"Released": 17, "RingLast": 20}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if last, ok := ReadLast(path, 3); !ok || last != (Last{Durable: 41, MDReleased: 17}) {
		t.Fatalf("ReadLast = %+v %v", last, ok)
	}
	if _, ok := ReadLast(path, 4); ok {
		t.Fatal("another node's status file read")
	}
	if _, ok := ReadLast(filepath.Join(dir, "none.json"), 3); ok {
		t.Fatal("a missing file read")
	}
	if err := os.WriteFile(path, []byte(`{"id": 3, "durab`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok := ReadLast(path, 3); ok {
		t.Fatal("a torn file read")
	}
}

// FuzzReadLast: a status file is read at start-up, whatever a crash or
// a person left in it. ReadLast never panics on any content; it reads a
// file only as this node's (another id is not ok); and what a node wrote
// (Write) reads back exactly.
func FuzzReadLast(f *testing.F) {
	f.Add([]byte(`{"id": 3, "durable": 41, "md": {"Released": 17, "RingLast": 20}}`), uint32(3), uint64(5), uint64(2))
	f.Add([]byte(`{"id": 3, "durab`), uint32(3), uint64(0), uint64(0))
	f.Add([]byte(`{"id": -1, "durable": 1e30}`), uint32(1), uint64(1<<63), uint64(1))
	dir := f.TempDir()
	path := filepath.Join(dir, "status.json")
	f.Fuzz(func(t *testing.T, b []byte, id uint32, durable, mdReleased uint64) {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, ok := ReadLast(path, id); ok {
			var st struct{ ID uint32 }
			if json.Unmarshal(b, &st) != nil || st.ID != id {
				t.Fatalf("read %q as node %d's", b, id)
			}
		}
		st := Status{ID: id, Durable: durable}
		st.MD.Released = mdReleased
		if err := Write(path, &st, nil); err != nil {
			t.Fatal(err)
		}
		if last, ok := ReadLast(path, id); !ok || last != (Last{Durable: durable, MDReleased: mdReleased}) {
			t.Fatalf("wrote durable %d md %d, read %+v %v", durable, mdReleased, last, ok)
		}
	})
}
