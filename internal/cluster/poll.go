package cluster

import (
	"context"
	"errors"
	"time"
)

// ErrTimeout is Poll's timeout.
var ErrTimeout = errors.New("timed out")

// Poll checks cond every interval until it holds (nil), ctx ends (ctx's
// error) or timeout passes (ErrTimeout). cond runs at least once.
func Poll(ctx context.Context, timeout, interval time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if err := ctx.Err(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return ErrTimeout
		}
		time.Sleep(interval)
	}
	return nil
}
