package bench

import (
	"runtime"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Summary is one run's result as JSON, for files next to the .hgrm and for
// machines that compare runs: what ran, where, and the percentiles.
type Summary struct {
	Name    string      `json:"name"`
	Machine MachineInfo `json:"machine"`
	// Config says what ran, as the caller describes it (PingPongConfig.Describe
	// for the floor).
	Config map[string]string `json:"config,omitempty"`
	// Count is the number of recorded values; Lost the operations that
	// never completed (and so are not in the percentiles).
	Count int64 `json:"count"`
	Lost  int64 `json:"lost"`
	// RatePerSecond is the achieved rate; TargetRatePerSecond the asked one
	// (0: back to back).
	RatePerSecond       float64 `json:"rate_per_second"`
	TargetRatePerSecond float64 `json:"target_rate_per_second"`
	ElapsedSeconds      float64 `json:"elapsed_seconds"`
	// PercentilesUs maps each ComparePoints label ("p50" … "max") to its
	// value, read exactly from the histogram (not from printed ticks).
	PercentilesUs  map[string]float64 `json:"percentiles_us"`
	MinUs          float64            `json:"min_us"`
	MeanUs         float64            `json:"mean_us"`
	StdDeviationUs float64            `json:"std_deviation_us"`
	MaxUs          float64            `json:"max_us"`
}

// NewSummary summarises h (values divided by valueUnitRatio, so NsPerUs
// for a nanosecond histogram) and describes this machine. The caller fills
// Config, Lost and the rates.
func NewSummary(name string, h *hdrhistogram.Histogram, valueUnitRatio float64) Summary {
	checkRatio(valueUnitRatio)
	s := Summary{
		Name:           name,
		Machine:        Machine(),
		Count:          h.TotalCount(),
		PercentilesUs:  make(map[string]float64, len(ComparePoints)),
		MinUs:          float64(h.Min()) / valueUnitRatio,
		MeanUs:         h.Mean() / valueUnitRatio,
		StdDeviationUs: h.StdDev() / valueUnitRatio,
		MaxUs:          float64(h.Max()) / valueUnitRatio,
	}
	for _, p := range ComparePoints {
		v := float64(h.ValueAtPercentile(p.Percentile)) / valueUnitRatio
		if p.Percentile >= 100 {
			v = s.MaxUs
		}
		s.PercentilesUs[p.Label] = v
	}
	return s
}

// Summary summarises a PingPong run, config included.
func (r *PingPongResult) Summary(name string, cfg PingPongConfig) Summary {
	s := NewSummary(name, r.Histogram, NsPerUs)
	s.Config = cfg.Describe()
	s.Lost = int64(r.Lost)
	s.RatePerSecond = r.AchievedRatePerSecond()
	s.TargetRatePerSecond = cfg.RatePerSecond
	s.ElapsedSeconds = r.Elapsed.Seconds()
	return s
}

// MachineInfo describes the machine a run was measured on; numbers from
// different machines do not compare.
type MachineInfo struct {
	GOOS      string `json:"goos"`
	GOARCH    string `json:"goarch"`
	NumCPU    int    `json:"num_cpu"`
	GoVersion string `json:"go_version"`
	// CPUModel is /proc/cpuinfo's first "model name" ("" where unreadable).
	CPUModel string `json:"cpu_model,omitempty"`
	// Kernel is uname's system name and release ("Linux 6.1.0-18-amd64"),
	// KernelVersion its version string; "" where uname is unavailable.
	Kernel        string `json:"kernel,omitempty"`
	KernelVersion string `json:"kernel_version,omitempty"`
	Hostname      string `json:"hostname,omitempty"`
}

// Machine describes this machine. What it cannot read stays empty.
func Machine() MachineInfo {
	m := MachineInfo{
		GOOS:      runtime.GOOS,
		GOARCH:    runtime.GOARCH,
		NumCPU:    runtime.NumCPU(),
		GoVersion: runtime.Version(),
	}
	platformMachine(&m)
	return m
}
