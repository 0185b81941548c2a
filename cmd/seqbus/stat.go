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

// runStat prints a node's status (DIR/status.json, rewritten by the node
// every 100 ms), refreshed in place, or once as JSON.
func runStat(args []string) error {
	fs := flag.NewFlagSet("stat", flag.ContinueOnError)
	dir := fs.String("dir", "", "the node's --dir (or a status.json path)")
	asJSON := fs.Bool("json", false, "print the status as JSON once and exit")
	once := fs.Bool("once", false, "print once and exit")
	interval := fs.Duration("interval", time.Second, "refresh interval")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := firstError(checkRequired("dir", *dir), checkPositive("interval", *interval)); err != nil {
		return err
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
