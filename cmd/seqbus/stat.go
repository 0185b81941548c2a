package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"
)

// runStat prints a node's or a witness's status (DIR/status.json,
// rewritten every 100 ms), refreshed in place, or once as JSON.
func runStat(args []string) error {
	fs := flag.NewFlagSet("stat", flag.ContinueOnError)
	dir := fs.String("dir", "", "the node's or the witness's --dir (or a status.json path)")
	asJSON := fs.Bool("json", false, "print the status as JSON once and exit")
	once := fs.Bool("once", false, "print once and exit")
	interval := fs.Duration("interval", time.Second, "refresh interval")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *dir == "" {
		return fmt.Errorf("--dir is required")
	}
	path := *dir
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		path = filepath.Join(path, "status.json")
	}
	for {
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("read %s: %v (is the node running with this --dir?)", path, err)
		}
		if *asJSON {
			_, err := os.Stdout.Write(append(b, '\n'))
			return err
		}
		var s map[string]any
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber() // keep 64-bit counters and hashes exact
		if err := dec.Decode(&s); err != nil {
			return fmt.Errorf("parse %s: %v", path, err)
		}
		if !*once {
			fmt.Print("\033[H\033[2J")
		}
		printStat(s)
		if *once {
			return nil
		}
		time.Sleep(*interval)
	}
}

func printStat(s map[string]any) {
	if s["role"] == "witness" {
		printWitnessStat(s)
		return
	}
	get := func(m map[string]any, k string) any {
		if v, ok := m[k]; ok {
			return v
		}
		return "-"
	}
	sub := func(k string) map[string]any {
		m, _ := s[k].(map[string]any)
		return m
	}
	fmt.Printf("node %v  role %v  epoch %v  primary %v  uptime %.1fs\n",
		get(s, "id"), get(s, "role"), get(s, "epoch"), get(s, "primary"), toF(get(s, "uptime_ns"))/1e9)
	lease := sub("lease")
	fmt.Printf("lease held %v  epoch %v  time left %.0f ms\n", get(lease, "held"), get(lease, "epoch"), toF(get(lease, "remaining_ns"))/1e6)
	hash, _ := strconv.ParseUint(fmt.Sprint(get(s, "state_hash")), 10, 64)
	fmt.Printf("applied %v  durable %v  released %v  acked %v  state hash %016x\n",
		get(s, "applied"), get(s, "durable"), get(s, "released"), get(s, "ack"), hash)
	if r, _ := s["refetching"].(bool); r {
		fmt.Println("REFETCHING: history discarded (or journal set aside); will not lead until caught up")
	}
	if l := sub("latency_us"); l != nil {
		fmt.Printf("assign->release µs: p50 %v  p99 %v  p99.9 %v  max %v\n", get(l, "p50"), get(l, "p99"), get(l, "p99.9"), get(l, "max"))
	}
	for _, k := range []string{"node", "sequencer", "window", "naks", "gate", "unicast", "multicast"} {
		m := sub(k)
		if m == nil {
			continue
		}
		fmt.Printf("%s:", k)
		for _, name := range slices.Sorted(maps.Keys(m)) {
			if v := m[name]; toF(v) != 0 {
				fmt.Printf(" %s=%v", name, v)
			}
		}
		fmt.Println()
	}
}

func toF(v any) float64 {
	switch x := v.(type) {
	case json.Number:
		f, _ := x.Float64()
		return f
	case float64:
		return x
	}
	return 0
}

// printWitnessStat prints a witness's status: the lease it grants, then
// requests and grants by kind, denies and drops by reason (non-zero ones).
func printWitnessStat(s map[string]any) {
	get := func(k string) any {
		if v, ok := s[k]; ok {
			return v
		}
		return "-"
	}
	holder := fmt.Sprint(get("holder"))
	if holder == "0" {
		holder = "none"
	}
	fmt.Printf("witness %v  uptime %.1fs\n", get("id"), toF(get("uptime_ns"))/1e9)
	fmt.Printf("lease holder %s  epoch %v  time left %.0f ms  last holder %v  durable epoch %v\n",
		holder, get("epoch"), toF(get("lease_remaining_ns"))/1e6, get("last_holder"), get("durable_epoch"))
	if q := toF(get("quarantine_remaining_ns")); q > 0 {
		fmt.Printf("RESTART QUARANTINE: %.0f ms left (only the last holder may renew its epoch)\n", q/1e6)
	}
	fmt.Printf("in-sync set v%v: %v\n", get("in_sync_version"), get("in_sync"))
	fmt.Printf("persists %v  persist failures %v  receive errors %v  send errors %v\n",
		get("persists"), get("persist_failures"), get("receive_errors"), get("send_errors"))
	for _, k := range []string{"requests", "grants", "denies", "drops"} {
		m, _ := s[k].(map[string]any)
		fmt.Printf("%s:", k)
		for _, name := range slices.Sorted(maps.Keys(m)) {
			if v := m[name]; toF(v) != 0 || k == "requests" {
				fmt.Printf(" %s=%v", name, v)
			}
		}
		fmt.Println()
	}
}
