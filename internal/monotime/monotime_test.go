package monotime

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Now must be the kernel's CLOCK_MONOTONIC, not a per-process clock: the
// stage merge across processes depends on it.
func TestNowIsClockMonotonic(t *testing.T) {
	var ts unix.Timespec
	before := Now()
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Skipf("clock_gettime: %v", err)
	}
	after := Now()
	kernel := ts.Nano()
	if kernel < before || kernel > after {
		t.Fatalf("CLOCK_MONOTONIC %d not within [%d, %d]", kernel, before, after)
	}
}

func TestNowAdvancesWithTime(t *testing.T) {
	start, t0 := Now(), time.Now()
	for time.Since(t0) < time.Millisecond {
	}
	if d := Now() - start; d < int64(time.Millisecond) {
		t.Fatalf("advanced %d ns over a millisecond", d)
	}
}

func TestNowAllocatesNothing(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _ = Now() }); n != 0 {
		t.Fatalf("%v allocs", n)
	}
}
