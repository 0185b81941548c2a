package suite

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/seqbus/seqbus/bench"
)

// FloorWarmup is the round trips each floor run sends first and does
// not record (bench floor and bench latency's floors alike): a run's
// Count is at most bench.PingPongCountMax-FloorWarmup.
const FloorWarmup = 1000

// FloorConfig is one `bench floor`: the raw UDP ping-pong at one hop
// count, once per idle strategy of the hop processes.
type FloorConfig struct {
	Bin               string // the seqbus binary (`Bin bench-echo` hops)
	Hops, Size, Count int
	Rate              float64
	Idles             []string
	Dir               string    // where the .hgrm files go
	Out               io.Writer // a line per strategy
	BusyPollUs        int       // SO_BUSY_POLL on every socket (0: off)
}

// FloorResult is what RunFloorSuite measured: the comparison table (the
// first strategy the baseline) and each strategy's summary.
type FloorResult struct {
	Table     bench.Table
	Summaries []bench.Summary
}

// RunFloorSuite runs bench.RunFloor once per idle strategy, writes each
// one's histogram as Dir/floor-<hops>hop-<idle>.hgrm and a line of the
// generator's lateness to Out, and compares them.
func RunFloorSuite(ctx context.Context, cfg FloorConfig) (*FloorResult, error) {
	var series []bench.Named
	out := &FloorResult{}
	for _, name := range cfg.Idles {
		res, err := bench.RunFloor(ctx, bench.FloorConfig{Binary: cfg.Bin, Hops: cfg.Hops, Idle: name, Size: cfg.Size, Rate: cfg.Rate, Count: cfg.Count, Warmup: FloorWarmup, BusyPollUs: cfg.BusyPollUs})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		stage := bench.FloorStage(cfg.Hops, name)
		if _, err := WriteHGRM(cfg.Dir, stage, res.Hist); err != nil {
			return nil, err
		}
		fmt.Fprintf(cfg.Out, "  %s: intended->sent p50 %.1f µs p99 %.1f µs max %.1f µs, %d of %d sent > 10 µs late\n", stage,
			float64(res.IntendedToSent.ValueAtQuantile(50))/NsPerUs, float64(res.IntendedToSent.ValueAtQuantile(99))/NsPerUs,
			float64(res.Pace.MaxLateNs)/NsPerUs, res.Pace.Late10us, res.Pace.Sent)
		series = append(series, bench.Named{Name: name, Dist: bench.FromHistogram(res.Hist, NsPerUs)})
		out.Summaries = append(out.Summaries, bench.NewSummary(name, res.Hist, NsPerUs))
	}
	t, err := bench.Compare(series)
	if err != nil {
		return nil, err
	}
	out.Table = t
	return out, nil
}

// ReadHGRMs reads .hgrm files for `bench compare`, each named by its
// directory and file ("latency-size32-fsync-none-auth-off/end-to-end").
func ReadHGRMs(paths []string) ([]bench.Named, error) {
	var series []bench.Named
	for _, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		d, err := bench.ReadHGRM(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		name := strings.TrimSuffix(filepath.Base(path), ".hgrm")
		if parent := filepath.Base(filepath.Dir(path)); parent != "." && parent != "/" {
			name = parent + "/" + name
		}
		series = append(series, bench.Named{Name: name, Dist: d})
	}
	return series, nil
}
