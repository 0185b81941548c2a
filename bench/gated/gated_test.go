package gated

import (
	"context"
	"testing"
	"time"

	"github.com/seqbus/seqbus/auth"
	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/journal"
)

// TestRunStages runs a short gated load and checks every stage was
// measured for every command, in path order: nothing is released before
// the standby acknowledged it and the journal made it durable.
func TestRunStages(t *testing.T) {
	for _, size := range []int{0, 32, 1024} {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		res, err := Run(ctx, Config{Size: size, Fsync: journal.SyncGroup, Rate: 5000, Count: 2000, Idle: bus.DefaultIdle})
		cancel()
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if res.Answered != 2000 || res.Sent != 2000 {
			t.Fatalf("size %d: sent %d answered %d", size, res.Sent, res.Answered)
		}
		for _, s := range Stages {
			if got := res.Hist[s].TotalCount(); got != 2000 {
				t.Errorf("size %d: stage %s has %d samples, want 2000", size, s, got)
			}
		}
		// The gate: release comes after both ack and durability, for
		// every command, so its minimum is at least theirs.
		rel := res.Hist[StageReleased]
		for _, s := range []string{StageAcked, StageDurable, StageStandby} {
			if rel.Min() < res.Hist[s].Min() || rel.Max() < res.Hist[s].Max() {
				t.Errorf("size %d: released (min %d max %d) before %s (min %d max %d)", size, rel.Min(), rel.Max(), s, res.Hist[s].Min(), res.Hist[s].Max())
			}
		}
	}
}

// TestRunAuthenticated: the same path with every frame sealed: every
// command is answered (so the MACs verify end to end).
func TestRunAuthenticated(t *testing.T) {
	key, err := auth.GenerateMasterKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := Run(ctx, Config{Size: 256, Fsync: journal.SyncNone, Rate: 5000, Count: 2000, Idle: bus.DefaultIdle, Key: &key})
	if err != nil || res.Answered != 2000 {
		t.Fatalf("%v: answered %d", err, res.Answered)
	}
}
