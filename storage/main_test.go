package storage

import (
	"testing"

	"go.uber.org/goleak"
)

// The fsync thread is the one goroutine a Storage's owner starts: none
// may outlive its Stop.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
