// Package bench is seqbus's latency measurement and report library: HDR
// percentile files (.hgrm) that HdrHistogram's own tools read and write,
// interval logs for slicing long runs by time, side-by-side comparison
// tables, percentile plots, JSON run summaries, and the floor every
// replicated number is judged against — a raw UDP ping-pong on loopback
// over bus sockets with no seqbus framing.
//
// Latencies are recorded in nanoseconds into hdrhistogram-go histograms
// (1 ns .. 60 s, 3 significant digits) and reported in microseconds: every
// writer takes a value-unit ratio (NsPerUs for nanosecond histograms).
//
// Usage contract:
//  1. Measure into an *hdrhistogram.Histogram in nanoseconds: RunFloor
//     (or FloorAll, every idle strategy) for the floor with its hops in
//     separate processes, PingPong for the older in-process floor, or the
//     caller's own loop (the gated end-to-end path). For a fixed-rate run,
//     record each latency from the operation's intended start, not its
//     actual one (coordinated omission; both floors do), and pace the
//     sends with internal/pace, the generator RunFloor and client.Load use,
//     so the floor and the gated run share one generator.
//  2. Save the distribution with WriteHGRM(w, h, NsPerUs) — the same text
//     Java's outputPercentileDistribution prints, 5 ticks per half
//     distance — and the summary with NewSummary / PingPongResult.Summary
//     as JSON beside it.
//  3. For long runs, also log intervals (IntervalLog, or
//     PingPongConfig.IntervalLog) and cut them later with SliceIntervalLog.
//  4. Read saved files back, ours or any HdrHistogram tool's, with
//     ReadHGRM; it treats its input as untrusted.
//  5. Compare distributions with Compare (first = baseline) and render the
//     Table with WriteText or as JSON; plot them with PlotPercentiles.
//
// Example, the floor against a gated run:
//
//	res, err := bench.PingPong(ctx, bench.PingPongConfig{
//		Count: 100_000, Warmup: 5_000, RatePerSecond: 20_000, Hops: 2,
//		Idle: bus.Idle{Kind: bus.IdleBackoff},
//	})
//	if err != nil && !errors.Is(err, bench.ErrLost) { ... }
//	bench.WriteHGRM(floorFile, res.Histogram, bench.NsPerUs)
//	floor := bench.FromHistogram(res.Histogram, bench.NsPerUs)
//	gated, err := bench.ReadHGRM(gatedFile)
//	series := []bench.Named{{Name: "floor", Dist: floor}, {Name: "gated", Dist: gated}}
//	table, _ := bench.Compare(series)
//	table.WriteText(os.Stdout)
//	bench.PlotPercentiles("latency.png", "4-hop gated vs floor", series)
//
// Everything but PingPong, RunFloor and ServeEcho (sockets, processes,
// goroutines, the clock) and
// PlotPercentiles (a file) works on values and io.Reader/io.Writer only.
package bench
