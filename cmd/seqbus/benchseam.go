package main

import (
	"fmt"
	"strconv"
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
	return []string{"--rate", strconv.FormatFloat(rate, 'f', -1, 64)}
}

// checkLoadSize says whether the load client can send commands of size
// bytes: it sends real new orders (39 bytes), asked for as size 0.
func checkLoadSize(size int) error {
	if size != 0 {
		return fmt.Errorf("the load client sends real 39-byte new orders: use 0, not %d", size)
	}
	return nil
}
