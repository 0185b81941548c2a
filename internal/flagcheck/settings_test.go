package flagcheck

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/seqbus/seqbus/auth"
)

// The shared checks: each refuses with a usage error naming its flag,
// and accepts its bounds.
func TestSharedChecks(t *testing.T) {
	key := filepath.Join(t.TempDir(), "seqbus.key")
	if _, err := auth.Keygen(key); err != nil {
		t.Fatal(err)
	}
	loadKey := func(path string) error { _, err := LoadKey(path); return err }
	for _, tc := range []struct {
		flag string
		err  error
		bad  bool
	}{
		{"stream", Stream(0), true},
		{"stream", Stream(1<<16 - 1), false},
		{"stream", Stream(1 << 16), true},
		{"idle", Idle("idle", "nap"), true},
		{"idle", Idle("idle", "backoff:250us"), false},
		{"fsync", Fsync("fsync", "sometimes"), true},
		{"fsync", Fsync("fsync", "group"), false},
		{"datagram-bytes", DatagramBytes(1), true},
		{"datagram-bytes", DatagramBytes(1472), false},
		{"datagram-bytes", DatagramBytes(65508), true},
		{"key", loadKey(filepath.Join(t.TempDir(), "missing")), true},
		{"key", loadKey(key), false},
		{"key", loadKey(""), false},
		{"trace-stages", TraceStages(-1), true},
		{"trace-stages", TraceStages(0), false},
		{"trace-window", TraceWindow("5-1", 10), true},
		{"trace-window", TraceWindow("1-5", 0), true},
		{"trace-window", TraceWindow("1-5", 10), false},
		{"trace-window", TraceWindow("", 0), false},
	} {
		switch {
		case !tc.bad && tc.err != nil:
			t.Errorf("--%s: refused a good value: %v", tc.flag, tc.err)
		case tc.bad && tc.err == nil:
			t.Errorf("--%s: accepted a bad value", tc.flag)
		case tc.bad && (!IsUsage(tc.err) || !strings.Contains(tc.err.Error(), "--"+tc.flag)):
			t.Errorf("--%s: %v is not a usage error naming the flag", tc.flag, tc.err)
		}
	}
	if k, err := LoadKey(""); k != nil || err != nil {
		t.Errorf("no --key: %v, %v; want nil, nil", k, err)
	}
}

// The list parsers: node ids are 1..2^32-1, none twice; "" is none.
func TestLists(t *testing.T) {
	if v, err := Ints(" 1, 2,3"); err != nil || len(v) != 3 || v[2] != 3 {
		t.Errorf("Ints: %v, %v", v, err)
	}
	if _, err := Ints("1,,2"); err == nil {
		t.Error("Ints accepted an empty element")
	}
	if v, err := NodeIDs(""); v != nil || err != nil {
		t.Errorf("NodeIDs(\"\"): %v, %v", v, err)
	}
	if v, err := NodeIDs("2,1"); err != nil || len(v) != 2 || v[0] != 2 || v[1] != 1 {
		t.Errorf("NodeIDs: %v, %v", v, err)
	}
	for _, bad := range []string{"0", "1,1", "4294967296", "-1", "a"} {
		if _, err := NodeIDs(bad); err == nil {
			t.Errorf("NodeIDs(%q) accepted", bad)
		}
	}
}
