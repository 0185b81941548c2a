package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seqbus/seqbus/internal/syncbuf"
)

// runBin runs the built binary with args in dir (also its TMPDIR), bounded
// in time, and returns its stdout, stderr and exit status.
func runBin(t *testing.T, bin, dir string, timeout time.Duration, args ...string) (stdout, stderr string, status int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TMPDIR="+dir)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		status = ee.ExitCode()
	default:
		t.Fatalf("seqbus %v: %v", args, err)
	}
	if ctx.Err() != nil {
		t.Errorf("seqbus %v ran past %v: it started instead of refusing its flags", args, timeout)
	}
	return out.String(), errb.String(), status
}

// TestBadFlagsRefusedBeforeAnything walks every subcommand's flags with
// bad values. Each must exit with status 2 and one line on stderr naming
// the flag (for a missing interface: the interfaces that exist), print
// nothing else, and start nothing: no child process, no file in its
// --dir, its --out, the working directory or TMPDIR (where the demo makes
// its directory).
func TestBadFlagsRefusedBeforeAnything(t *testing.T) {
	bin := buildBinary(t)
	confDir := t.TempDir()
	conf := func(name, text string) string {
		p := filepath.Join(confDir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ifaceConf := conf("iface.conf", "iface = sbnope0\n")
	badLine := conf("bad.conf", "fsync group\n")
	badValue := conf("badvalue.conf", "insync-timeout = -1s\n")
	missing := filepath.Join(confDir, "missing.conf")
	datagramConf := conf("datagram.conf", "datagram-bytes = 1000\n")
	const dirArg = "DIR" // replaced by a path inside the run's directory that must stay absent
	node := func(extra ...string) []string {
		return append([]string{"node", "--id", "1", "--dir", dirArg}, extra...)
	}
	cases := []struct {
		args []string
		want []string // every one must be in the line
	}{
		// node
		{[]string{"node", "--dir", dirArg}, []string{"--id must be a node id 1..4294967295"}},
		{node("--id", "0"), []string{"--id must be a node id 1..4294967295", "got 0"}},
		{node("--id", "4294967296"), []string{"--id must be a node id"}},
		{[]string{"node", "--id", "1"}, []string{"--dir is required"}},
		{node("--iface", "sbnope0"), []string{"--iface sbnope0: no such interface", "this host has: ", "lo"}},
		{node("--config", ifaceConf), []string{"--iface sbnope0: no such interface", "lo"}},
		{node("--fsync", "often"), []string{"--fsync", `"often"`, "none, group, always"}},
		{node("--fsync-inline", "-1us"), []string{"--fsync-inline must be >= 0"}},
		{node("--idle", "nap"), []string{"--idle", `"nap"`}},
		{node("--ttl", "256"), []string{"--ttl must be 0..255, got 256"}},
		{node("--ttl", "-1"), []string{"--ttl must be 0..255"}},
		{node("--lease", "-1s"), []string{"--lease must be > 0, got -1s"}},
		{node("--renew", "0s"), []string{"--renew must be > 0, got 0s"}},
		{node("--retry", "-5ms"), []string{"--retry must be > 0"}},
		{node("--margin", "-1ms"), []string{"--margin must be >= 0"}},
		{node("--margin", "2s"), []string{"--margin must be < --lease"}},
		{node("--renew", "900ms"), []string{"--renew (900ms) + --retry"}},
		{node("--insync-timeout", "0s"), []string{"--insync-timeout must be > 0, got 0s"}},
		{node("--config", badValue), []string{"--insync-timeout must be > 0, got -1s"}},
		{node("--ack-delay", "-1ms"), []string{"--ack-delay must be >= 0"}},
		{node("--probe-after", "-1ms"), []string{"--probe-after must be >= 0"}},
		{node("--probe-after", "300ms"), []string{"--probe-after must be < --insync-timeout (200ms), got 300ms"}},
		{node("--insync-timeout", "1ms"), []string{"--probe-after must be < --insync-timeout (1ms), got 2ms"}},
		{node("--disk-stall-after", "-1s"), []string{"--disk-stall-after must be >= 0"}},
		{node("--disk-stall-after", "5ms"), []string{"--disk-stall-after must be 0 (the --insync-timeout) or at least 20ms, got 5ms"}},
		{node("--snapshot-every", "0"), []string{"--snapshot-every must be > 0"}},
		{node("--session-history", "-1"), []string{"--session-history must be 0..16777216, got -1"}},
		{node("--session-history", "16777217"), []string{"--session-history must be 0..16777216"}},
		{node("--md-ring", "8"), []string{"--md-ring must be 16..4194304, got 8"}},
		{node("--segment-bytes", "4096"), []string{"--segment-bytes must be 65536..1073741824, got 4096"}},
		{node("--segment-bytes", "2147483648"), []string{"--segment-bytes must be 65536..1073741824"}},
		{node("--recv-buffer", "0"), []string{"--recv-buffer must be > 0"}},
		{node("--recv-buffer", "-4096"), []string{"--recv-buffer must be > 0"}},
		{node("--busy-poll", "-1us"), []string{"--busy-poll must be >= 0"}},
		{node("--cpu", "4096"), []string{"--cpu must be -1.."}},
		{node("--min-insync", "1"), []string{"--min-insync must be 0..0"}},
		{node("--min-insync", "-1", "--peer", "2=127.0.0.1:9"), []string{"--min-insync must be 0..1"}},
		{node("--peer", "1=127.0.0.1:9"), []string{"--peer 1=127.0.0.1:9 is this node's own --id"}},
		{node("--peer", "x"), []string{"-peer", "id=host:port"}},
		{node("--peer", "2=127.0.0.1:9", "--peer", "2=127.0.0.1:10"), []string{"peer id 2 given twice (127.0.0.1:9 and 127.0.0.1:10)"}},
		{node("--listen", "127.0.0.1:7100"), []string{"--listen 127.0.0.1:7100 uses the --group's port 7100", "0.0.0.0:7100"}},
		{node("--group", "127.0.0.1:7100"), []string{"--group must be an IPv4 multicast group"}},
		{node("--market-data", "10.0.0.1:1"), []string{"--market-data must be an IPv4 multicast group"}},
		{node("--listen", "nowhere"), []string{"--listen must be ip:port"}},
		{node("--listen", "127.0.0.1:0"), []string{"--listen 127.0.0.1:0: port 0"}},
		{node("--listen", "239.1.2.3:7000"), []string{"--listen 239.1.2.3:7000: a multicast group"}},
		{node("--role", "leader"), []string{"--role", `"leader"`}},
		{node("--epoch", "0"), []string{"--epoch must be > 0"}},
		{node("--epoch", "5"), []string{"--epoch is a static primary's (--role primary)"}},
		{node("--role", "primary", "--witness", "127.0.0.1:7000"), []string{"--role primary is a static primary (no lease)"}},
		{node("--stream", "0"), []string{"--stream must be 1..65535"}},
		{node("--stream", "65536"), []string{"--stream must be 1..65535"}},
		{node("--witness", "nowhere"), []string{"--witness must be ip:port"}},
		{node("--witness", "0.0.0.0:7000"), []string{"--witness 0.0.0.0:7000: an unspecified address is no destination"}},
		{node("--peer", "2=127.0.0.1:0"), []string{`bad peer address "127.0.0.1:0": port 0 is no destination`}},
		{node("--witness", "127.0.0.1:7000", "--arbiter", "etcd://127.0.0.1:2379"), []string{"--witness and --arbiter are exclusive"}},
		{node("--arbiter", "http://x"), []string{"--arbiter: want etcd://"}},
		{node("--key", filepath.Join(confDir, "no.key")), []string{"--key", "no.key"}},
		{node("--ttl", "many"), []string{`invalid value "many" for flag -ttl`}},
		{node("--bogus"), []string{"flag provided but not defined: -bogus"}},
		{node("--config", missing), []string{"--config", "missing.conf"}},
		{node("--config", badLine), []string{"bad.conf:1: want `name = value`"}},
		{node("extra"), []string{`unexpected argument "extra"`}},
		{node("--datagram-bytes", "1199"), []string{"--datagram-bytes must be 1200..65507, got 1199"}},
		{node("--datagram-bytes", "65508"), []string{"--datagram-bytes must be 1200..65507, got 65508"}},
		{node("--config", datagramConf), []string{"--datagram-bytes must be 1200..65507, got 1000"}},
		{node("--status-file", filepath.Join(confDir, "absent", "status.json")), []string{"--status-file: the directory for", "no such file or directory"}},
		{node("--status-file", confDir), []string{"--status-file:", "is a directory, want a file"}},
		{node("--status-file", filepath.Join(badLine, "status.json")), []string{"--status-file:", "bad.conf is not a directory"}},
		{node("--trace-stages", "5", "--trace-file", filepath.Join(confDir, "absent", "t")), []string{"--trace-file: the directory for"}},
		{[]string{"drill", "node", "--id", "0", "--dir", dirArg}, []string{"--id must be a node id"}},
		// witness
		{[]string{"witness"}, []string{"--dir is required"}},
		{[]string{"witness", "--dir", dirArg, "--listen", "x"}, []string{"--listen must be ip:port"}},
		{[]string{"witness", "--dir", dirArg, "--listen", "239.1.2.3:7000"}, []string{"--listen 239.1.2.3:7000: a multicast group"}},
		{[]string{"witness", "--dir", dirArg, "--listen", "127.0.0.1:0"}, []string{"--listen 127.0.0.1:0: port 0"}},
		{[]string{"witness", "--dir", dirArg, "--lease", "0s"}, []string{"--lease must be 1ms..24h0m0s, got 0s"}},
		{[]string{"witness", "--dir", dirArg, "--nodes", "1,2"}, []string{"--nodes names the nodes --key holds keys for; without --key it does nothing"}},
		{[]string{"witness", "--dir", dirArg, "--nodes", "1,1"}, []string{"--nodes: node id 1 given twice"}},
		{[]string{"witness", "--dir", dirArg, "--nodes", "0,1"}, []string{"--nodes", "bad node id 0"}},
		{[]string{"witness", "--dir", dirArg, "--stream", "70000"}, []string{"--stream must be 1..65535"}},
		{[]string{"witness", "override", "--dir", dirArg, "--allow", "2"}, []string{"--accept-loss is required"}},
		{[]string{"witness", "override", "--allow", "2", "--accept-loss"}, []string{"--dir is required"}},
		{[]string{"witness", "override", "--dir", dirArg, "--accept-loss"}, []string{"give --allow or --epoch, exactly one of them"}},
		{[]string{"witness", "override", "--dir", dirArg, "--allow", "2", "--epoch", "9", "--accept-loss"}, []string{"give --allow or --epoch"}},
		{[]string{"witness", "override", "--dir", dirArg, "--allow", "0", "--accept-loss"}, []string{"--allow", "bad node id 0"}},
		{[]string{"witness", "--dir", dirArg, "--config", badLine}, []string{"bad.conf:1"}},
		// client
		{[]string{"client", "--rate", "0"}, []string{"--rate must be > 0, got 0"}},
		{[]string{"client", "--json", filepath.Join(confDir, "absent", "s.json")}, []string{"--json: the directory for", "no such file or directory"}},
		{[]string{"client", "--record", confDir}, []string{"--record:", "is a directory, want a file"}},
		{[]string{"client", "--trace-stages", "5", "--trace-file", filepath.Join(confDir, "absent", "t")}, []string{"--trace-file: the directory for"}},
		{[]string{"client", "--primary", "127.0.0.1:0"}, []string{"--primary 127.0.0.1:0: port 0 is no destination"}},
		{[]string{"client", "--primary", "239.77.0.1:7100"}, []string{"--primary 239.77.0.1:7100: a multicast group is no destination"}},
		{[]string{"client", "--witness", "127.0.0.1:7000", "--node", "1=0.0.0.0:7101"}, []string{`bad peer address "0.0.0.0:7101": an unspecified address`}},
		{[]string{"client", "--rate", "-5"}, []string{"--rate must be > 0, got -5"}},
		{[]string{"client", "--rate", "NaN"}, []string{"--rate must be a finite number, got NaN"}},
		{[]string{"client", "--rate", "Inf"}, []string{"--rate must be a finite number, got +Inf"}},
		{[]string{"client", "--rate", "1e20"}, []string{"--rate must be at most 1e+07 per second"}},
		{[]string{"client", "--count", "0"}, []string{"--count must be > 0"}},
		{[]string{"client", "--nice", "-30"}, []string{"--nice", "-30"}},
		{[]string{"client", "--coalesce", "1s"}, []string{"--coalesce", "1s"}},
		{[]string{"client", "--coalesce", "-1ms"}, []string{"--coalesce", "-1ms"}},
		{[]string{"client", "--spin", "100000h"}, []string{"--spin", "100000h"}},
		{[]string{"client", "--spin", "-1us"}, []string{"--spin", "-1µs"}},
		{[]string{"client", "--session", "0"}, []string{"--session must be > 0"}},
		{[]string{"client", "--max-in-flight", "0"}, []string{"--max-in-flight must be 1..65536, got 0"}},
		{[]string{"client", "--max-in-flight", "65537"}, []string{"--max-in-flight must be 1..65536, got 65537"}},
		{[]string{"client", "--drain", "-1s"}, []string{"--drain must be > 0, got -1s"}},
		{[]string{"client", "--instruments", "0"}, []string{"--instruments must be 1.."}},
		{[]string{"client", "--idle", "nap"}, []string{"--idle"}},
		{[]string{"client", "--primary", "x"}, []string{"--primary must be ip:port"}},
		{[]string{"client", "--stream", "0"}, []string{"--stream must be 1..65535"}},
		{[]string{"client", "--witness", "127.0.0.1:7000"}, []string{"--node id=host:port"}},
		{[]string{"client", "--arbiter", "etcd://", "--node", "1=127.0.0.1:9"}, []string{"--arbiter: want etcd://"}},
		{[]string{"client", "--key", filepath.Join(confDir, "no.key")}, []string{"--key", "no.key"}},
		{[]string{"client", "--datagram-bytes", "0"}, []string{"--datagram-bytes must be 1200..65507, got 0"}},
		{[]string{"client", "--datagram-bytes", "70000"}, []string{"--datagram-bytes must be 1200..65507, got 70000"}},
		// stat
		{[]string{"stat"}, []string{"--dir", "is required"}},
		{[]string{"verify", "--bogus"}, []string{"flag provided but not defined: -bogus"}},
		{[]string{"journal"}, []string{"want a subcommand"}},
		{[]string{"journal", "bogus", confDir}, []string{`unknown subcommand "bogus"`}},
		{[]string{"journal", "dump"}, []string{"want the journal directory"}},
		{[]string{"journal", "verify", "--bogus", confDir}, []string{"-bogus"}},
		{[]string{"journal", "dump", confDir, "--from", "-1"}, []string{"-from"}},
		{[]string{"journal", "dump", confDir, "--from", "10", "--to", "5"}, []string{"--to 5 is before --from 10"}},
		{[]string{"journal", "dump", confDir, "--format", "xml"}, []string{`got "xml"`}},
		{[]string{"stat", "--dir", confDir, "--interval", "0s"}, []string{"--interval must be > 0"}},
		// demo
		{[]string{"demo", "--duration", "-1s"}, []string{"--duration must be > 0, got -1s"}},
		{[]string{"demo", "--duration", "0s"}, []string{"--duration must be > 0, got 0s"}},
		{[]string{"demo", "--rate", "-5"}, []string{"--rate must be > 0, got -5"}},
		{[]string{"demo", "--rate", "0"}, []string{"--rate must be > 0, got 0"}},
		{[]string{"demo", "--rate", "NaN"}, []string{"--rate must be a finite number"}},
		{[]string{"demo", "--rate", "1e20"}, []string{"--rate must be at most 1e+07 per second"}},
		{[]string{"demo", "--rate", "0.5", "--duration", "1s", "--kill-after", "0s"}, []string{"less than one command"}},
		{[]string{"demo", "--kill-after", "-1s"}, []string{"--kill-after must be >= 0"}},
		{[]string{"demo", "--kill-after", "9s"}, []string{"--kill-after must be < --duration (8s)"}},
		{[]string{"demo", "--config", missing}, []string{"--config", "missing.conf"}},
		// chaos
		{[]string{"chaos", "--nodes", "1"}, []string{"--nodes must be 2..5, got 1"}},
		{[]string{"chaos", "--nodes", "6"}, []string{"--nodes must be 2..5, got 6"}},
		{[]string{"chaos", "--rounds", "-1"}, []string{"--rounds must be >= 0"}},
		{[]string{"chaos", "--rate", "0"}, []string{"--rate must be > 0, got 0"}},
		{[]string{"chaos", "--rate", "NaN"}, []string{"--rate must be a finite number"}},
		{[]string{"chaos", "--duration", "2s"}, []string{"--duration must be at least 8s"}},
		{[]string{"chaos", "--fsync", "sometimes"}, []string{"--fsync", `"sometimes"`}},
		{[]string{"chaos", "--faults", "kill-primary,flood"}, []string{"--faults", `unknown fault "flood"`}},
		// keygen
		{[]string{"keygen", "--out", ""}, []string{"--out is required"}},
		// sim
		{[]string{"sim", "--seeds", "0"}, []string{"seeds 0: want at least 1"}},
		{[]string{"sim", "--workers", "0"}, []string{"workers 0: want 1..256"}},
		{[]string{"sim", "--workers", "4294967296"}, []string{"workers 4294967296: want 1..256"}},
		{[]string{"sim", "--from", "18446744073709551615", "--seeds", "2"}, []string{"run past the last seed"}},
		{[]string{"sim", "--mutation", "chaos"}, []string{"--mutation"}},
		// drill
		{[]string{"drill", "--rate", "0"}, []string{"--rate must be > 0"}},
		{[]string{"drill", "--rate", "NaN"}, []string{"--rate must be a finite number"}},
		{[]string{"drill", "--scenario", "flood"}, []string{"--scenario", `"flood"`}},
		// bench
		{[]string{"bench", "fastest"}, []string{`unknown bench subcommand "fastest"`}},
		{[]string{"bench", "latency", "--rate", "0"}, []string{"--rate", "got 0"}},
		{[]string{"bench", "latency", "--count", "-1"}, []string{"--count", "got -1"}},
		{[]string{"bench", "latency", "--floor-count", "0"}, []string{"--floor-count", "got 0"}},
		{[]string{"bench", "latency", "--warmup", "-1"}, []string{"--warmup", "got -1"}},
		{[]string{"bench", "latency", "--sizes", "32,5"}, []string{"--sizes", "got 5"}},
		{[]string{"bench", "latency", "--sizes", "32,x"}, []string{"--sizes", `"x"`}},
		{[]string{"bench", "latency", "--fsync", "none,often"}, []string{"--fsync", `"often"`}},
		{[]string{"bench", "latency", "--fsync-inline", "-1us"}, []string{"--fsync-inline", "got -1µs"}},
		{[]string{"bench", "throughput", "--fsync-inline", "-1us"}, []string{"--fsync-inline", "got -1µs"}},
		{[]string{"bench", "latency", "--auth", "maybe"}, []string{"--auth", `"maybe"`}},
		{[]string{"bench", "latency", "--idle", "nap"}, []string{"--idle"}},
		{[]string{"bench", "latency", "--floor-idles", "block,nap"}, []string{"--floor-idles", `"nap"`}},
		{[]string{"bench", "latency", "--standbys", "0"}, []string{"--standbys", "got 0"}},
		{[]string{"bench", "latency", "--cpus", "primary=99"}, []string{"--cpus"}},
		{[]string{"bench", "latency", "--engine", "fast"}, []string{"--engine", `"fast"`}},
		{[]string{"bench", "latency", "--generator-nice", "25"}, []string{"--generator-nice", "got 25"}},
		{[]string{"bench", "latency", "--out", ""}, []string{"--out is required"}},
		{[]string{"bench", "throughput", "--count", "0"}, []string{"--count", "got 0"}},
		{[]string{"bench", "throughput", "--latency-seconds", "0"}, []string{"--latency-seconds", "got 0"}},
		{[]string{"bench", "throughput", "--idle", "nap"}, []string{"--idle"}},
		{[]string{"bench", "throughput", "--generator-coalesce", "20ms"}, []string{"--generator-coalesce", "got 20ms"}},
		{[]string{"bench", "throughput", "--generator-coalesce", "-1us"}, []string{"--generator-coalesce", "got -1µs"}},
		{[]string{"bench", "throughput", "--generator-nice", "30"}, []string{"--generator-nice", "got 30"}},
		{[]string{"bench", "throughput", "--replicated-in-flight", "65537"}, []string{"--replicated-in-flight", "got 65537"}},
		{[]string{"bench", "throughput", "--replicated-in-flight", "-1"}, []string{"--replicated-in-flight", "got -1"}},
		{[]string{"bench", "latency", "--datagram-bytes", "512"}, []string{"--datagram-bytes must be 1200..65507, got 512"}},
		{[]string{"bench", "throughput", "--datagram-bytes", "65508"}, []string{"--datagram-bytes must be 1200..65507, got 65508"}},
		{[]string{"bench", "floor", "--size", "1"}, []string{"--size must be 8..8192"}},
		{[]string{"bench", "floor", "--hops", "3"}, []string{"--hops must be one of 2, 4"}},
		{[]string{"bench", "floor", "--rate", "-1"}, []string{"--rate must be 0..1e+07, got -1"}},
		{[]string{"bench", "floor", "--rate", "NaN"}, []string{"--rate must be a finite number"}},
		{[]string{"bench", "floor", "--count", "9223372036854775807"}, []string{"--count must be 1..99999000"}},
		{[]string{"bench", "latency", "--rate", "NaN"}, []string{"--rate", "got NaN"}},
		{[]string{"bench", "floor", "--count", "0"}, []string{"--count must be 1..99999000, got 0"}},
		{[]string{"bench", "compare"}, []string{"usage: seqbus bench compare"}},
		{[]string{"bench", "compare", "--plot", "x.gif", "a.hgrm"}, []string{"--plot must name a .png or .svg"}},
	}
	if ifi := smallMTUInterface(); ifi != nil {
		// One byte more than the interface's MTU carries with the IPv4 and
		// UDP headers: refused naming both numbers, before the journal.
		over := strconv.Itoa(ifi.MTU - 28 + 1)
		cases = append(cases, struct {
			args []string
			want []string
		}{node("--iface", ifi.Name, "--datagram-bytes", over), []string{"--datagram-bytes " + over + " does not fit --iface " + ifi.Name, "its MTU is " + strconv.Itoa(ifi.MTU)}})
	}
	for _, tc := range cases {
		name := strings.Join(tc.args, " ")
		t.Run(name, func(t *testing.T) {
			run := t.TempDir()
			dir := filepath.Join(run, "state")
			args := make([]string, len(tc.args))
			for i, a := range tc.args {
				if a == dirArg {
					a = dir
				}
				args[i] = a
			}
			stdout, stderr, status := runBin(t, bin, run, 20*time.Second, args...)
			line := strings.TrimSuffix(stderr, "\n")
			if status != 2 || line == "" || strings.Contains(line, "\n") || stdout != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q: want status 2, one line on stderr and nothing on stdout", status, stdout, stderr)
			}
			if want := "seqbus " + tc.args[0] + ": "; !strings.HasPrefix(line, want) {
				t.Errorf("line %q does not start with %q", line, want)
			}
			for _, w := range tc.want {
				if !strings.Contains(line, w) {
					t.Errorf("line %q lacks %q", line, w)
				}
			}
			if entries, _ := os.ReadDir(run); len(entries) != 0 {
				t.Errorf("files were created: %v", entries)
			}
		})
	}
	noChildLeft(t, bin)
}

// TestMessages: error lines without doubled prefixes, keygen refusing to
// overwrite (naming the file), the client against a dead primary, and
// --config shown as taking a FILE.
func TestMessages(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	key := filepath.Join(dir, "seqbus.key")
	if _, _, status := runBin(t, bin, dir, 10*time.Second, "keygen", "--out", key); status != 0 {
		t.Fatalf("keygen: status %d", status)
	}
	_, stderr, status := runBin(t, bin, dir, 10*time.Second, "keygen", "--out", key)
	if status == 0 || !strings.Contains(stderr, "will not overwrite "+key) {
		t.Errorf("keygen over an existing file: status %d, %q: want it to refuse, naming %s", status, stderr, key)
	}
	if err := os.Chmod(key, 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, status = runBin(t, bin, dir, 10*time.Second, "client", "--key", key)
	if status != 2 || strings.Count(stderr, "auth:") != 1 || !strings.Contains(stderr, "chmod 600") {
		t.Errorf("client with an open key file: status %d, %q: want status 2 and \"auth:\" once", status, stderr)
	}

	// A loopback port nobody listens on.
	l, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	dead := l.LocalAddr().String()
	l.Close()
	_, stderr, status = runBin(t, bin, dir, 30*time.Second, "client", "--primary", dead, "--rate", "1000", "--count", "5", "--drain", "300ms")
	if status != 1 || !strings.Contains(stderr, "seqbus client: the primary never answered") || !strings.Contains(stderr, dead) {
		t.Errorf("client against a dead primary: status %d, %q: want status 1 and \"the primary never answered\" naming %s", status, stderr, dead)
	}
	if strings.Contains(stderr, "client: client: ") {
		t.Errorf("doubled prefix in %q", stderr)
	}

	_, help, _ := runBin(t, bin, dir, 10*time.Second, "node", "--help")
	if !strings.Contains(help, "-config FILE") || strings.Contains(help, "-config name") {
		t.Errorf("node --help shows --config as:\n%s", help)
	}
}

// TestDemoInterrupt: SIGINT during the load prints the summary so far and
// exits 130 (it said "context canceled" with status 1), and no child or
// demo directory is left behind.
func TestDemoInterrupt(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo for a few seconds")
	}
	bin := buildBinary(t)
	tmp := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "demo", "--duration", "60s", "--rate", "1000", "--kill-after", "0s")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	var out syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait (bounded) for the load to run, then interrupt it.
	for !strings.Contains(out.String(), "cmd/s answered") {
		if ctx.Err() != nil {
			t.Fatalf("the demo never started its load:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	text := out.String()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("demo after SIGINT: %v, want exit status 130\n%s", err, text)
	}
	for _, want := range []string{"interrupted after", "summary", "commands sent", "lost (received but not in node", "client round trip", "seqbus demo: interrupted"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(text, "context canceled") {
		t.Errorf("output says context canceled")
	}
	if t.Failed() {
		t.Log(text)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Errorf("the demo left %v behind", entries)
	}
	noChildLeft(t, bin)
}

// smallMTUInterface is an interface of this host that is up and whose MTU
// cannot carry the largest datagram (lo's 65536 can), with room for the
// smallest; nil without one.
func smallMTUInterface() *net.Interface {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil
	}
	for i := range ifs {
		if ifi := &ifs[i]; ifi.Flags&net.FlagUp != 0 && ifi.MTU > 1200+28 && ifi.MTU < 65507+28 {
			return ifi
		}
	}
	return nil
}
