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
