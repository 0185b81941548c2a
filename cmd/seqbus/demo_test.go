package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	imagepng "image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seqbus/seqbus/bench"
	"github.com/seqbus/seqbus/internal/stagetrace"
	"github.com/seqbus/seqbus/wire"
)

// buildBinary builds seqbus once per test binary run.
func buildBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "seqbus-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "seqbus")
		if out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput(); err != nil {
			binErr = fmt.Errorf("build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// noChildLeft fails if any process still runs bin.
func noChildLeft(t *testing.T, bin string) {
	t.Helper()
	time.Sleep(200 * time.Millisecond)
	procs, _ := filepath.Glob("/proc/[0-9]*/exe")
	for _, p := range procs {
		if target, err := os.Readlink(p); err == nil && target == bin {
			t.Fatalf("a child survived: %s", p)
		}
	}
}

// TestDrill runs every drill with the built binary: the safe one must
// pass, each unsafe one must detect its anomaly, and no child survives.
func TestDrill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary for ~40 s")
	}
	bin := buildBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "drill", "--rate", "2000")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("drill: %v\n%s", err, out.String())
	}
	text := out.String()
	for _, want := range []string{
		"verdict: PASS",
		"stepped down",
		"ANOMALY DETECTED (expected with --unsafe-no-fencing): the deposed primary",
		"ANOMALY DETECTED (expected with --unsafe-no-gating)",
		"vanished in the failover",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("drill output lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(text)
	}
	noChildLeft(t, bin)
}

// TestUnsafeSwitchesOnlyUnderDrill: `seqbus node` refuses the unsafe
// switches; `seqbus drill node` has them.
func TestUnsafeSwitchesOnlyUnderDrill(t *testing.T) {
	bin := buildBinary(t)
	out, err := exec.Command(bin, "node", "--id", "1", "--dir", t.TempDir(), "--unsafe-no-gating").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "flag provided but not defined: -unsafe-no-gating") {
		t.Fatalf("seqbus node accepted --unsafe-no-gating: %v\n%s", err, out)
	}
	out, _ = exec.Command(bin, "drill", "node", "--help").CombinedOutput()
	if !strings.Contains(string(out), "unsafe-no-gating") || !strings.Contains(string(out), "UNSAFE, drills only") {
		t.Fatalf("seqbus drill node --help lacks the unsafe switches:\n%s", out)
	}
}

// TestConfigFile: settings come from --config, the command line wins,
// and a bad line is an error naming the file and line.
func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.conf")
	conf := "# cluster settings\nrate = 5\ncount = 7 # trailing comment\nnode = 1=127.0.0.1:9\nnode = 2=127.0.0.1:10\n"
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("client", flag.ContinueOnError)
	rate := fs.Float64("rate", 1, "")
	count := fs.Uint64("count", 1, "")
	nodes := peerFlags{}
	fs.Var(nodes, "node", "")
	if err := parseFlags(fs, []string{"--config", path, "--count", "9"}); err != nil {
		t.Fatal(err)
	}
	if *rate != 5 || *count != 9 || len(nodes) != 2 {
		t.Fatalf("rate %v count %v nodes %v: want 5, 9 (command line wins), 2 nodes", *rate, *count, nodes)
	}
	for _, bad := range []struct{ text, want string }{
		{"rate 5\n", "c.conf:1: want `name = value`"},
		{"\nbogus = 1\n", "c.conf:2: unknown setting \"bogus\""},
		{"rate = fast\n", "c.conf:1: rate = fast: parse error"},
		{"config = other\n", "cannot include another"},
	} {
		if err := os.WriteFile(path, []byte(bad.text), 0o644); err != nil {
			t.Fatal(err)
		}
		fs := flag.NewFlagSet("client", flag.ContinueOnError)
		fs.Float64("rate", 1, "")
		err := parseFlags(fs, []string{"--config", path})
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("config %q: err %v, want it to contain %q", bad.text, err, bad.want)
		}
	}
	if err := parseFlags(flag.NewFlagSet("x", flag.ContinueOnError), []string{"--config", filepath.Join(dir, "missing")}); err == nil {
		t.Error("a missing config file was accepted")
	}
}

// TestDemo runs the built binary's demo: it must exit 0 with nothing lost,
// show a promotion, and leave no child process behind.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary for ~10 s")
	}
	bin := buildBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "demo", "--duration", "5s", "--kill-after", "2s", "--rate", "3000")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	text := out.String()
	for _, want := range []string{"lost (received but not in node", "): 0", "promoted in", "verdict: OK"} {
		if !strings.Contains(text, want) {
			t.Fatalf("demo output lacks %q:\n%s", want, text)
		}
	}
	if !regexp.MustCompile(`cmd/s answered .* p99=[0-9]+µs\n`).MatchString(text) || regexp.MustCompile(`p99=[0-9.]+(ms|s)\b`).MatchString(text) {
		t.Fatalf("demo progress lines without p99 in µs:\n%s", text)
	}
	noChildLeft(t, bin)
}

// TestStatJSON: `seqbus stat --json` prints a node's status as JSON with
// its role, and the human view names the watermarks.
func TestStatJSON(t *testing.T) {
	dir := t.TempDir()
	status := `{"id":1,"role":"primary","epoch":3,"applied":10,"state_hash":18446744073709551615,"lease":{"held":true,"remaining_ns":500000000}}`
	if err := os.WriteFile(filepath.Join(dir, "status.json"), []byte(status), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := buildBinary(t)
	out, err := exec.Command(bin, "stat", "--dir", dir, "--json").Output()
	if err != nil || !strings.Contains(string(out), `"role":"primary"`) {
		t.Fatalf("stat --json: %v %s", err, out)
	}
	out, err = exec.Command(bin, "stat", "--dir", dir, "--once").Output()
	if err != nil || !strings.Contains(string(out), "role primary") || !strings.Contains(string(out), "state hash ffffffffffffffff") {
		t.Fatalf("stat --once: %v %s", err, out)
	}
	if _, err := exec.Command(bin, "stat", "--dir", filepath.Join(dir, "missing")).Output(); err == nil {
		t.Fatal("stat of a missing node succeeded")
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// TestBenchCommands runs each `seqbus bench` subcommand briefly with the
// built binary: each writes its .hgrm files and summary.json, and compare
// draws a PNG that decodes.
func TestBenchCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the benchmarks briefly")
	}
	bin := buildBinary(t)
	out := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		b, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("seqbus %v: %v\n%s", args, err, b)
		}
		return string(b)
	}
	text := run("bench", "latency", "--sizes", "32", "--fsync", "none", "--count", "2000", "--warmup", "500", "--rate", "5000",
		"--floor-count", "1000", "--floor-idles", "block", "--auth", "both", "--out", filepath.Join(out, "lat"))
	for _, want := range []string{"end-to-end / floor-2hop", "end-to-end / floor-4hop", "with MAC / without", "sequenced->released",
		"intended->sent", "layout unpinned", "conditions: load average", "syscalls/cmd", "cpu µs/cmd"} {
		if !strings.Contains(text, want) {
			t.Errorf("bench latency output lacks %q:\n%s", want, text)
		}
	}
	runDir := filepath.Join(out, "lat", "latency-size32-fsync-none-auth-off")
	e2e := filepath.Join(runDir, "end-to-end.hgrm")
	floor := filepath.Join(runDir, "floor-2hop.hgrm")
	hlog := filepath.Join(runDir, "end-to-end.hlog")
	for _, f := range []string{e2e, floor, hlog, filepath.Join(runDir, "floor-4hop-block.hgrm")} {
		if _, err := os.Stat(f); err != nil {
			t.Fatal(err)
		}
	}
	checkLatencySummary(t, filepath.Join(out, "lat", "summary.json"), 2000)
	if f, err := os.Open(hlog); err != nil {
		t.Fatal(err)
	} else {
		merged, intervals, _, err := bench.SliceIntervalLog(f, 0, 1e9)
		f.Close()
		if err != nil || intervals == 0 || merged.TotalCount() != 2000 {
			t.Fatalf("interval log: %v, %d intervals, %v", err, intervals, merged)
		}
	}
	text = run("bench", "throughput", "--sizes", "32", "--count", "2000", "--latency-seconds", "0.3", "--out", filepath.Join(out, "tp"))
	for _, want := range []string{"engine matching: flat out", "engine none: flat out", "50%", "(client window 1024)", "(client window 8192)"} {
		if !strings.Contains(text, want) {
			t.Errorf("bench throughput output lacks %q:\n%s", want, text)
		}
	}
	checkThroughputSummary(t, filepath.Join(out, "tp", "summary.json"))
	png := filepath.Join(out, "cmp.png")
	text = run("bench", "compare", "--plot", png, floor, e2e)
	if !strings.Contains(text, "p99") || !strings.Contains(text, "plot: ") {
		t.Errorf("bench compare output:\n%s", text)
	}
	f, err := os.Open(png)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := imagepng.Decode(f); err != nil {
		t.Fatalf("plot does not decode as PNG: %v", err)
	}
}

// checkLatencySummary: summary.json has every stage's percentiles, at
// least three processes (client, primary, standby, witness) with distinct
// pids and their figures, and the machine's conditions.
func checkLatencySummary(t *testing.T, path string, count int) {
	t.Helper()
	var sum struct {
		Machine       map[string]any `json:"machine"`
		DatagramBytes int            `json:"datagram_bytes"`
		Runs          []struct {
			Stages    map[string]map[string]float64 `json:"stages_us"`
			Ratio4    map[string]float64            `json:"end_to_end_over_floor_4hop"`
			Processes []struct {
				Role      string  `json:"role"`
				Pid       int     `json:"pid"`
				CPUs      string  `json:"cpus"`
				CPUPerM   float64 `json:"cpu_s_per_million"`
				Syscalls  float64 `json:"syscalls_per_command"`
				Window    bool    `json:"window"`
				WindowSC  float64 `json:"window_syscalls_per_command"`
				WindowCPU float64 `json:"window_cpu_us_per_command"`
			} `json:"processes"`
		} `json:"runs"`
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	if sum.DatagramBytes != wire.DefaultDatagramLen {
		t.Errorf("summary says datagram_bytes %d, want the default %d", sum.DatagramBytes, wire.DefaultDatagramLen)
	}
	for _, k := range []string{"load_before", "load_after", "steal_pct", "gomaxprocs", "cpu_model", "num_cpu"} {
		if _, ok := sum.Machine[k]; !ok {
			t.Errorf("machine lacks %s: %v", k, sum.Machine)
		}
	}
	if len(sum.Runs) != 2 {
		t.Fatalf("%d runs, want 2 (auth off and on)", len(sum.Runs))
	}
	for _, run := range sum.Runs {
		for _, stage := range append([]string{"floor-2hop", "floor-4hop", "floor-2hop-block", "floor-4hop-block"}, stagetrace.Stages...) {
			p, ok := run.Stages[stage]
			if !ok {
				t.Errorf("no stage %s", stage)
				continue
			}
			for _, q := range []string{"p50", "p90", "p99", "p99.9", "max"} {
				if _, ok := p[q]; !ok {
					t.Errorf("stage %s lacks %s", stage, q)
				}
			}
		}
		if run.Ratio4["p50"] <= 0 {
			t.Errorf("no end-to-end / floor-4hop ratio: %v", run.Ratio4)
		}
		pids := map[int]bool{}
		roles := map[string]bool{}
		for _, p := range run.Processes {
			pids[p.Pid] = p.Pid > 0
			roles[p.Role] = true
			if p.Role != "witness" && (p.CPUPerM <= 0 || p.Syscalls <= 0) {
				t.Errorf("process %+v without CPU or syscall figures", p)
			}
			// Every traced process closed its measured window, with the
			// CPU time its commands took (getrusage at its two ends).
			if p.Role != "witness" && (!p.Window || p.WindowSC <= 0 || p.WindowCPU <= 0) {
				t.Errorf("process %+v without its measured-window figures", p)
			}
		}
		if len(pids) < 3 || len(pids) != len(run.Processes) || !roles["client"] || !roles["primary"] || !roles["standby"] {
			t.Errorf("processes %+v: want client, primary and standby with distinct pids", run.Processes)
		}
	}
}

// checkThroughputSummary: both maxima and the per-process figures.
func checkThroughputSummary(t *testing.T, path string) {
	t.Helper()
	var sum struct {
		DatagramBytes int `json:"datagram_bytes"`
		Runs          []struct {
			Released   float64           `json:"max_released_per_second"`
			Replicated float64           `json:"max_replicated_per_second"`
			InFlight   int               `json:"replicated_in_flight"`
			Processes  []json.RawMessage `json:"processes"`
			Levels     []struct {
				Percent  int                `json:"percent"`
				EndToEnd map[string]float64 `json:"end_to_end_us"`
			} `json:"levels"`
		} `json:"runs"`
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	if len(sum.Runs) != 1 {
		t.Fatalf("%d runs", len(sum.Runs))
	}
	if sum.DatagramBytes != wire.DefaultDatagramLen {
		t.Errorf("summary says datagram_bytes %d, want the default %d", sum.DatagramBytes, wire.DefaultDatagramLen)
	}
	r := sum.Runs[0]
	if r.Released <= 0 || r.Replicated <= 0 || len(r.Processes) < 3 || len(r.Levels) != 6 || r.InFlight != 8192 {
		t.Fatalf("throughput summary: %s", b)
	}
}

// TestBenchFlagsChecked: a bad flag of bench latency or throughput exits
// with status 2 naming the flag, before anything starts (not even --out).
func TestBenchFlagsChecked(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	for _, tc := range []struct{ args, flag string }{
		{"latency --cpus primary=99", "--cpus"},
		{"latency --cpus leader=1", "--cpus"},
		{"latency --standbys 0", "--standbys"},
		{"latency --sizes 8", "--sizes"},
		{"latency --floor-idles fast", "--floor-idles"},
		{"latency --engine lua", "--engine"},
		{"throughput --count 3", "--count"},
		{"throughput --fsync sometimes", "--fsync"},
	} {
		out := filepath.Join(t.TempDir(), "out")
		cmd := exec.Command(bin, append(append([]string{"bench"}, strings.Fields(tc.args)...), "--out", out)...)
		b, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(b), tc.flag) {
			t.Errorf("bench %s: %v, want exit 2 naming %s:\n%s", tc.args, err, tc.flag, b)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("bench %s created --out before checking its flags", tc.args)
		}
	}
}
