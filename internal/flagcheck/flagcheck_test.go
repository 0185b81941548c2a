package flagcheck

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestChecks(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string // "" for no error; else a part of the message
	}{
		{"positive ok", Positive("rate", 1.5), ""},
		{"positive zero", Positive("rate", 0), "--rate must be > 0, got 0"},
		{"non-negative ok", NonNegative("kill-after", time.Duration(0)), ""},
		{"non-negative", NonNegative("kill-after", -time.Second), "--kill-after must be >= 0, got -1s"},
		{"range ok", Range("stream", uint(1), 1, 65535), ""},
		{"range", Range("cpu", 9, -1, 3), "--cpu must be -1..3, got 9"},
		{"positive NaN", Positive("rate", math.NaN()), "--rate must be a finite number, got NaN"},
		{"non-negative NaN", NonNegative("rate", math.NaN()), "--rate must be a finite number, got NaN"},
		{"range NaN", Range("rate", math.NaN(), 0, 10), "--rate must be a finite number, got NaN"},
		{"range +Inf", Range("rate", math.Inf(1), 0, 10), "--rate must be a finite number, got +Inf"},
		{"rate ok", Rate("rate", 1e7, 1e7), ""},
		{"rate zero", Rate("rate", 0, 1e7), "--rate must be > 0, got 0"},
		{"rate NaN", Rate("rate", math.NaN(), 1e7), "--rate must be a finite number"},
		{"rate too high", Rate("rate", 1e20, 1e7), "--rate must be at most 1e+07 per second, got 1e+20"},
		{"required", Required("dir", ""), "--dir is required"},
		{"either a", Either("allow", true, "epoch", false), ""},
		{"either b", Either("allow", false, "epoch", true), ""},
		{"either none", Either("allow", false, "epoch", false), "give --allow or --epoch, exactly one of them"},
		{"either both", Either("allow", true, "epoch", true), "give --allow or --epoch, exactly one of them"},
		{"confirmed", Confirmed("accept-loss", true, "x"), ""},
		{"not confirmed", Confirmed("accept-loss", false, "output may be lost"), "--accept-loss is required: output may be lost"},
		{"one of ok", OneOf("hops", "4", "2", "4"), ""},
		{"one of", OneOf("hops", "3", "2", "4"), `--hops must be one of 2, 4, got "3"`},
		{"each", Each("idles", "block, fast", func(v string) error {
			if v != "block" {
				return fmt.Errorf("unknown %q", v)
			}
			return nil
		}), `--idles: unknown "fast"`},
		{"addr optional", Addr("witness", "", true), ""},
		{"addr", Addr("witness", "localhost:80", false), `--witness must be ip:port, got "localhost:80"`},
		{"listen ok", Listen("listen", "127.0.0.1:7101"), ""},
		{"listen every interface", Listen("listen", "0.0.0.0:7101"), ""},
		{"listen port 0", Listen("listen", "127.0.0.1:0"), "--listen 127.0.0.1:0: port 0 would be a port nobody is told"},
		{"listen group", Listen("listen", "239.77.0.1:7100"), "--listen 239.77.0.1:7100: a multicast group is not an address to listen on"},
		{"listen bad", Listen("listen", "x"), "--listen must be ip:port"},
		{"dest ok", Dest("primary", "127.0.0.1:7101", false), ""},
		{"dest optional", Dest("witness", "", true), ""},
		{"dest port 0", Dest("primary", "127.0.0.1:0", false), "--primary 127.0.0.1:0: port 0 is no destination"},
		{"dest unspecified", Dest("witness", "0.0.0.0:7000", false), "--witness 0.0.0.0:7000: an unspecified address is no destination"},
		{"dest group", Dest("primary", "239.77.0.1:7100", false), "--primary 239.77.0.1:7100: a multicast group is no destination"},
		{"dest bad", Dest("primary", "localhost:7101", false), `--primary must be ip:port, got "localhost:7101"`},
		{"listen port", ListenPort("127.0.0.1:7100", "239.77.0.1:7100"), "7100"},
		{"listen port ok", ListenPort("127.0.0.1:7101", "239.77.0.1:7100"), ""},
		{"group ok", Group("group", "239.77.0.1:7100", false), ""},
		{"group unicast", Group("group", "127.0.0.1:7100", false), "IPv4 multicast group"},
		{"group no port", Group("group", "239.77.0.1:0", false), "IPv4 multicast group"},
		{"node id", NodeID("id", 0), "--id must be a node id 1..4294967295"},
		{"interface", Interface("iface", "no-such-if0"), "--iface no-such-if0: no such interface"},
		{"lease ok", Lease(time.Second, 250*time.Millisecond, 100*time.Millisecond, 50*time.Millisecond), ""},
		{"lease margin", Lease(time.Second, 100*time.Millisecond, time.Second, 50*time.Millisecond), "--margin must be < --lease"},
		{"lease renew", Lease(time.Second, 800*time.Millisecond, 100*time.Millisecond, 200*time.Millisecond), "--renew (800ms) + --retry (200ms) must be < --lease - --margin (900ms)"},
		{"lease retry", Lease(time.Second, 100*time.Millisecond, 0, 0), "--retry must be > 0"},
	} {
		switch {
		case tc.want == "" && tc.err != nil:
			t.Errorf("%s: %v", tc.name, tc.err)
		case tc.want != "" && (tc.err == nil || !strings.Contains(tc.err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.name, tc.err, tc.want)
		case tc.err != nil && !IsUsage(tc.err):
			t.Errorf("%s: %v is not a usage error", tc.name, tc.err)
		}
	}
}

func TestOutputFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, want string
	}{
		{"empty", "", ""},
		{"stdout", "-", ""},
		{"new file", filepath.Join(dir, "new.json"), ""},
		{"existing file", file, ""},
		{"no directory", filepath.Join(dir, "absent", "x"), "--out: the directory for"},
		{"a directory", dir, "is a directory, want a file"},
		{"under a file", filepath.Join(file, "x"), "is not a directory"},
	} {
		err := OutputFile("out", tc.path)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !IsUsage(err)):
			t.Errorf("%s: %v, want a usage error with %q", tc.name, err, tc.want)
		}
	}
	// The probe leaves nothing behind.
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("the directory holds %d entries after the checks, want 1 (the file)", len(ents))
	}
}

func TestUsageErrors(t *testing.T) {
	base := errors.New("boom")
	if err := AsUsage(base); !IsUsage(err) || !errors.Is(err, base) {
		t.Fatalf("AsUsage: %v", err)
	}
	if AsUsage(nil) != nil || Prefixed("x", nil) != nil || First(nil, nil) != nil {
		t.Fatal("nil in, non-nil out")
	}
	u := Usagef("first")
	if AsUsage(u) != u {
		t.Fatal("AsUsage wrapped a usage error twice")
	}
	if err := First(nil, u, base); err != u {
		t.Fatalf("First = %v", err)
	}
	if err := Prefixed("size", base); err.Error() != "--size: boom" || !errors.Is(err, base) || IsUsage(err) {
		t.Fatalf("Prefixed = %v", err)
	}
	if err := Second(3, base); err != base {
		t.Fatalf("Second = %v", err)
	}
}

// TestPeers: id=host:port, each id once, a usable address; the checks
// against --min-insync and the node's own --id.
func TestPeers(t *testing.T) {
	p := Peers{}
	if err := p.Set("2=127.0.0.1:7102"); err != nil {
		t.Fatal(err)
	}
	for v, want := range map[string]string{
		"3":                "want id=host:port",
		"0=127.0.0.1:1":    "bad peer id",
		"x=127.0.0.1:1":    "bad peer id",
		"3=nowhere":        "bad peer address",
		"3=0.0.0.0:7103":   "bad peer address",
		"2=127.0.0.1:7109": "peer id 2 given twice",
	} {
		if err := p.Set(v); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Set(%q) = %v, want %q", v, err, want)
		}
	}
	if err := p.CheckMinInSync(1); err != nil {
		t.Errorf("min-insync 1 of 1 peer: %v", err)
	}
	if err := p.CheckMinInSync(2); err == nil || !IsUsage(err) {
		t.Errorf("min-insync 2 of 1 peer: %v", err)
	}
	if err := p.CheckNotSelf(1); err != nil {
		t.Errorf("own id 1: %v", err)
	}
	if err := p.CheckNotSelf(2); err == nil || !strings.Contains(err.Error(), "own --id") {
		t.Errorf("own id 2 as a peer: %v", err)
	}
}
