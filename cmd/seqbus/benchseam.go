package main

import (
	"fmt"
	"strconv"

	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/engine"
)

// loadArgs are the load client's flags for a run's rate and size: the
// part of the harness that depends on what `seqbus client` offers.
func loadArgs(cfg clusterConfig) []string {
	rate := cfg.Rate
	if rate <= 0 {
		// Flat out: a schedule far faster than the bus, so the client
		// sends whenever its in-flight window has room.
		rate = 5_000_000
	}
	args := []string{"--rate", strconv.FormatFloat(rate, 'f', -1, 64), "--size", strconv.Itoa(cfg.Size)}
	if cfg.GeneratorNice != 0 {
		args = append(args, "--nice", strconv.Itoa(cfg.GeneratorNice))
	}
	return args
}

// checkLoadSize says whether the load client can send commands of size
// bytes: 0 (real 39-byte new orders) or an opaque command of
// CommandHeaderLen+1..client.MaxCommandLen bytes.
func checkLoadSize(size int) error {
	if size != 0 && (size <= engine.CommandHeaderLen || size > client.MaxCommandLen) {
		return fmt.Errorf("want 0 (real new orders) or %d..%d bytes, got %d", engine.CommandHeaderLen+1, client.MaxCommandLen, size)
	}
	return nil
}
