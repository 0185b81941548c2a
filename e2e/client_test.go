package e2e

import (
	"testing"
	"time"
)

// TestClientOnAnotherHost runs the client on its own host (10.77.0.5), as
// a venue's gateway would be: every command must be answered.
func TestClientOnAnotherHost(t *testing.T) {
	c := newCluster(t, clusterOptions{})
	c.startAll()
	c.startLoadOn(c.client, 1, 10_000, 1_000, 3*time.Second).finish(t, 30*time.Second)
	c.stopAll()
	c.finalCheck()
}
