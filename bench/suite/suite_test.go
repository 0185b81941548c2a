package suite

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/seqbus/seqbus/bench"
	"github.com/seqbus/seqbus/internal/cluster"
	"github.com/seqbus/seqbus/internal/stagetrace"
	"github.com/seqbus/seqbus/status"
)

func hist(t *testing.T, valuesNs ...int64) *hdrhistogram.Histogram {
	t.Helper()
	h := hdrhistogram.New(1, 10_000_000_000, 3)
	for _, v := range valuesNs {
		if err := h.RecordValue(v); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

func TestNames(t *testing.T) {
	for q, want := range map[float64]string{50: "p50", 99.9: "p99.9", 99.99: "p99.99", 100: "max"} {
		if got := QuantName(q); got != want {
			t.Errorf("QuantName(%v) = %q, want %q", q, got, want)
		}
	}
	if SizeName(0) != "order39" || SizeName(256) != "256" {
		t.Errorf("SizeName: %q %q", SizeName(0), SizeName(256))
	}
	for _, c := range []struct {
		policy string
		ns     int64
		want   string
	}{{"none", 20_000, "none"}, {"group", 0, "group (fsync thread)"}, {"always", 20_000, "always (inline <= 20µs)"}} {
		if got := fsyncText(c.policy, c.ns); got != c.want {
			t.Errorf("fsyncText(%q, %d) = %q, want %q", c.policy, c.ns, got, c.want)
		}
	}
	p := Pcts(hist(t, 10_000, 20_000, 30_000, 40_000))
	if len(p) != len(Quantiles) || p["max"] < 39.9 || p["max"] > 40.1 || p["p50"] < 19.9 || p["p50"] > 20.1 {
		t.Errorf("Pcts in µs: %v", p)
	}
}

// TestGeneratorOf counts the sends more than 10 µs late.
func TestGeneratorOf(t *testing.T) {
	m := &stagetrace.Merged{Hist: map[string]*hdrhistogram.Histogram{
		stagetrace.StageIntendedToSent: hist(t, 500, 9_000, 10_000, 12_000, 50_000),
	}}
	g := generatorOf(m)
	if g.Sent != 5 || g.Late10us != 2 || g.MaxLate < 49.9 || g.MaxLate > 50.1 {
		t.Fatalf("generatorOf = %+v, want 5 sent, 2 late, max 50 µs", g)
	}
}

// TestLatencyRunReport: a run's report has every stage's percentiles
// and files, the floors' ratios, and its table names the best floors.
func TestLatencyRunReport(t *testing.T) {
	m := &stagetrace.Merged{Hist: map[string]*hdrhistogram.Histogram{}}
	for _, s := range stagetrace.Stages {
		m.Hist[s] = hist(t, 20_000, 40_000)
	}
	m.Intervals = []*hdrhistogram.Histogram{hist(t, 20_000), hist(t)}
	floors := &FloorSet{hist: map[string]*hdrhistogram.Histogram{
		"floor-2hop-block": hist(t, 10_000), "floor-4hop-block": hist(t, 20_000),
	}, best2: "block", best4: "block", cpu: map[string]map[string]float64{
		"floor-4hop-block": floorCPU([]bench.ProcessInfo{{Role: "client", CPUSeconds: 0.2}, {Role: "relay", CPUSeconds: 0.6}, {Role: "echo", CPUSeconds: 0.4}}, 10_000),
	}}
	floors.hist["floor-2hop"], floors.hist["floor-4hop"] = floors.hist["floor-2hop-block"], floors.hist["floor-4hop-block"]
	out := t.TempDir()
	cfg := cluster.BenchConfig{Size: 32, Fsync: "none", Engine: "matching", Idle: "block", Standbys: 1, Rate: 1000, Count: 2}
	run, err := latencyRunOf(cfg, &cluster.BenchResult{Merged: m, AchievedPerSec: 999,
		Processes: []cluster.ProcessInfo{{Role: "client", Pid: 7, Window: true},
			{Role: "primary", Pid: 8, Agent: &status.AgentStatus{Passes: 9, LongestPassNs: 420_000, LongestStallNs: 101_500_000, Stalls: 2}}}}, floors, out)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(out, "latency-size32-fsync-none-auth-off")
	for _, f := range []string{"end-to-end.hgrm", "floor-2hop.hgrm", "floor-4hop-block.hgrm", "end-to-end.hlog", "intended-sent.hgrm"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
	if r := run.RatioTo2Hop["p50"]; r < 1.9 || r > 2.1 {
		t.Errorf("end-to-end p50 over the 2-hop floor = %v, want 2", r)
	}
	if run.Floor2HopFrom != "block" || run.Auth != "off" || len(run.Files) != len(stagetrace.Stages)+5 {
		t.Errorf("run %+v", run)
	}
	rows := latencyRows(run)
	if rows[0] != "floor-2hop-block" || rows[1] != "floor-4hop-block" || rows[2] != "floor-2hop" || rows[4] != stagetrace.Stages[0] {
		t.Errorf("rows %v", rows)
	}
	var buf bytes.Buffer
	WriteLatencyRun(&buf, run)
	for _, want := range []string{"size 32 B, fsync none, auth off, engine matching: 999 cmd/s achieved", "floor-2hop (block)",
		"end-to-end / floor-4hop", "syscalls/cmd", "client",
		"floor-4hop-block       client 20.0, relay 60.0 (a primary's socket calls), echo 40.0 (a standby's)",
		"primary longest pass 0.42 ms, longest stall 101.50 ms, 2 stalls over 1 ms"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, buf.String())
		}
	}
	f, err := os.Open(filepath.Join(dir, "end-to-end.hlog"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	merged, intervals, _, err := bench.SliceIntervalLog(f, 0, 1e9)
	if err != nil || intervals != 1 || merged.TotalCount() != 1 {
		t.Fatalf("interval log: %v, %d intervals, %d values", err, intervals, merged.TotalCount())
	}
}

func TestWriteSummary(t *testing.T) {
	dir := t.TempDir()
	var buf bytes.Buffer
	if err := WriteSummary(&buf, dir, map[string]any{"command": "latency", "machine": NewMachine()}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Machine map[string]any `json:"machine"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"load_before", "gomaxprocs", "num_cpu"} {
		if _, ok := got.Machine[k]; !ok {
			t.Errorf("machine lacks %s: %s", k, b)
		}
	}
	if !strings.Contains(buf.String(), "wrote "+filepath.Join(dir, "summary.json")) {
		t.Errorf("no note: %q", buf.String())
	}
}

// TestLevelCPU: a level's CPU column is each windowed process's share of
// a core, and their sum; a process whose window never closed is left out.
func TestLevelCPU(t *testing.T) {
	ps := []cluster.ProcessInfo{
		{Role: "client", Window: true, WindowCPUUsPerCommand: 1.5},
		{Role: "primary", Window: true, WindowCPUUsPerCommand: 2.5},
		{Role: "witness"},
		{Role: "standby", Window: true, WindowCPUUsPerCommand: 2},
	}
	if got, want := levelCPU(ps, 300_000), "client 45, primary 75, standby 60, sum 180"; got != want {
		t.Errorf("levelCPU = %q, want %q", got, want)
	}
	if got := levelCPU(ps[2:3], 300_000); got != "-" {
		t.Errorf("levelCPU without windows = %q, want -", got)
	}
}
