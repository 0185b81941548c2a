package nodeconfig

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/seqbus/seqbus/engine"
)

// TestConfigDurationsAreNs (issue 17 item 3): every duration in Config is
// int64 nanoseconds named ...Ns, the cores' unit; a time.Duration field
// (TickInterval was one) would mix units again.
func TestConfigDurationsAreNs(t *testing.T) {
	durationType := reflect.TypeOf(time.Duration(0))
	typ := reflect.TypeOf(Config{})
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Type == durationType {
			t.Errorf("Config.%s is a time.Duration: use int64 nanoseconds named %sNs", f.Name, f.Name)
		}
		if strings.HasSuffix(f.Name, "Ns") && f.Type.Kind() != reflect.Int64 {
			t.Errorf("Config.%s is a %s, want int64 nanoseconds", f.Name, f.Type)
		}
	}
	cfg := Config{ID: 1, Dir: t.TempDir(), Listen: netip.MustParseAddrPort("127.0.0.1:1"), Group: netip.MustParseAddrPort("239.1.1.1:1"),
		NewStateMachine: func() (engine.StateMachine, error) { return nil, nil }}
	if err := cfg.SetDefaults(); err != nil {
		t.Fatal(err)
	}
	if cfg.TickIntervalNs != DefaultTickIntervalNs || DefaultTickIntervalNs != int64(time.Millisecond) {
		t.Fatalf("tick interval %d ns after defaults, want 1 ms", cfg.TickIntervalNs)
	}
}

// TestDiskStallBound: the disk watch's bound is the in-sync timeout
// unless set; set, it is its own, and one under MinDiskStallTicks ticks
// (which the watch could never reach) is refused.
func TestDiskStallBound(t *testing.T) {
	base := func() Config {
		return Config{ID: 1, Dir: t.TempDir(), Listen: netip.MustParseAddrPort("127.0.0.1:1"), Group: netip.MustParseAddrPort("239.1.1.1:1"),
			NewStateMachine: func() (engine.StateMachine, error) { return nil, nil }}
	}
	for _, tc := range []struct {
		name                string
		insync, stall, want int64
		err                 bool
	}{
		{"default: the default in-sync timeout", 0, 0, DefaultInSyncTimeoutNs, false},
		{"default: a set in-sync timeout", 50_000_000, 0, 50_000_000, false},
		{"longer than the in-sync timeout", 50_000_000, 2_000_000_000, 2_000_000_000, false},
		{"shorter than the in-sync timeout", 0, 30_000_000, 30_000_000, false},
		{"the least", 0, MinDiskStallTicks * DefaultTickIntervalNs, MinDiskStallTicks * DefaultTickIntervalNs, false},
		{"under the least", 0, MinDiskStallTicks*DefaultTickIntervalNs - 1, 0, true},
		{"negative", 0, -1, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base()
			cfg.InSyncTimeoutNs, cfg.DiskStallNs = tc.insync, tc.stall
			err := cfg.SetDefaults()
			if tc.err {
				if err == nil || !strings.Contains(err.Error(), "disk-stall-after") {
					t.Fatalf("accepted %d ns (got %v)", tc.stall, err)
				}
				return
			}
			if err != nil || cfg.DiskStallNs != tc.want {
				t.Fatalf("DiskStallNs %d, %v; want %d", cfg.DiskStallNs, err, tc.want)
			}
		})
	}
}
