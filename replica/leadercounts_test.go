package replica

import (
	"reflect"
	"testing"
)

// TestLeaderCountsAny: any sees each field of LeaderCounts, so a count
// added later cannot be left out of HasReady.
func TestLeaderCountsAny(t *testing.T) {
	var zero LeaderCounts
	if zero.any() {
		t.Fatal("any() of zero counts")
	}
	typ := reflect.TypeOf(zero)
	for i := range typ.NumField() {
		var c LeaderCounts
		reflect.ValueOf(&c).Elem().Field(i).SetUint(1)
		if !c.any() {
			t.Errorf("any() misses LeaderCounts.%s", typ.Field(i).Name)
		}
	}
}
