// Package suite runs the benchmark suites of `seqbus bench latency` and
// `seqbus bench throughput`: their cells (size × fsync × auth, or size ×
// fsync × engine), each a cluster of separate processes run by
// internal/cluster's RunBench next to the raw UDP floor of package bench,
// and their reports (.hgrm files, an interval log, the rows of
// summary.json and the text tables, written to an io.Writer). The
// command parses and checks the flags; this package does the rest.
package suite

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/seqbus/seqbus/bench"
)

// NsPerUs: histograms record nanoseconds; .hgrm files are in µs.
const NsPerUs = 1000.0

// Quantiles are the percentiles every report gives (100: the max).
var Quantiles = []float64{50, 90, 99, 99.9, 99.99, 100}

// QuantName names a quantile in a report: "p99.9", "max".
func QuantName(q float64) string {
	if q == 100 {
		return "max"
	}
	return "p" + strconv.FormatFloat(q, 'f', -1, 64)
}

// Pcts are h's Quantiles in µs, by QuantName.
func Pcts(h *hdrhistogram.Histogram) map[string]float64 {
	m := map[string]float64{}
	for _, q := range Quantiles {
		m[QuantName(q)] = float64(h.ValueAtQuantile(q)) / NsPerUs
	}
	return m
}

// SizeName names a command size: its bytes, or "order39" for 0 (real
// new orders).
func SizeName(size int) string {
	if size == 0 {
		return "order39"
	}
	return strconv.Itoa(size)
}

// WriteHGRM writes h (ns) as dir/name.hgrm in µs and returns the path.
func WriteHGRM(dir, name string, h *hdrhistogram.Histogram) (string, error) {
	path := filepath.Join(dir, name+".hgrm")
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if err := bench.WriteHGRM(f, h, NsPerUs); err != nil {
		f.Close()
		return "", err
	}
	return path, f.Close()
}

// WriteSummary writes v as dir/summary.json and says so on w.
func WriteSummary(w io.Writer, dir string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(dir, "summary.json")
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nwrote %s and the .hgrm files beside it (compare them with `seqbus bench compare --plot out.png A.hgrm B.hgrm`)\n", path)
	return nil
}

// MachineText is the machine in one phrase: CPU, CPUs, kernel, Go.
func MachineText(m bench.MachineInfo) string {
	cpu := m.CPUModel
	if cpu == "" {
		cpu = m.GOARCH
	}
	return fmt.Sprintf("%s, %d CPUs, %s, %s", cpu, m.NumCPU, m.Kernel, m.GoVersion)
}

// Machine is summary.json's "machine": what the machine is and how busy
// it was (load average before and after, CPU time stolen by the
// hypervisor over the command).
type Machine struct {
	bench.MachineInfo
	GOMAXPROCS int     `json:"gomaxprocs"`
	LoadBefore float64 `json:"load_before"`
	LoadAfter  float64 `json:"load_after"`
	StealPct   float64 `json:"steal_pct"`
	cpu0       bench.CPUTimes
}

// NewMachine reads the machine and its conditions at the start.
func NewMachine() *Machine {
	return &Machine{MachineInfo: bench.Machine(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		LoadBefore: bench.LoadAverage(), cpu0: bench.ReadCPUTimes()}
}

// Finish reads the conditions at the end of the command.
func (m *Machine) Finish() {
	m.LoadAfter = bench.LoadAverage()
	m.StealPct = bench.StealPercent(m.cpu0, bench.ReadCPUTimes())
}

// Text is the machine and its load at the start, for a heading.
func (m *Machine) Text() string {
	return fmt.Sprintf("%s, GOMAXPROCS %d, load %.2f", MachineText(m.MachineInfo), m.GOMAXPROCS, m.LoadBefore)
}

// WriteConditions writes the conditions line (after Finish).
func (m *Machine) WriteConditions(w io.Writer) {
	fmt.Fprintf(w, "\nconditions: load average %.2f before, %.2f after; CPU steal %.2f%% over the run\n", m.LoadBefore, m.LoadAfter, m.StealPct)
}
