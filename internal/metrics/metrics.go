// Package metrics serves a node's and a witness's counters as Prometheus
// metrics on /metrics (github.com/prometheus/client_golang: the exposition
// format every venue's monitoring already scrapes).
//
// Nothing here runs on the path of a command. The collectors read a
// snapshot when scraped, the same way status.json is built (status.Status
// and witness.Server.Stats take the owner's lock for a copy), and the
// counter names are status.json's: a counter at status.json's
// section.Name is seqbus_counter_total{section="section",name="Name"}.
package metrics

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/node"
	"github.com/seqbus/seqbus/status"
	"github.com/seqbus/seqbus/witness"
)

// LatencyBucketsUs are the upper bounds of the assign -> release latency
// histogram, in µs: 1-2-5 steps from 5 µs (a fast loopback round) to 1 s
// (a lease's worth of stall).
var LatencyBucketsUs = []float64{5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000,
	10_000, 20_000, 50_000, 100_000, 200_000, 500_000, 1_000_000}

// counterSections are the status.json sections whose numbers are counters.
var counterSections = []string{"node", "fsync", "sequencer", "window", "naks", "fetch", "hashes", "gate", "unicast", "multicast", "agent"}

// isGauge says which numbers of those sections are levels, not counts:
// watermarks (…Seq, Applied, Released), durations (…Ns) and sizes.
func isGauge(name string) bool {
	switch name {
	case "Applied", "Released", "InSyncMembers", "CacheNodes", "DurableEpoch", "DurableInSyncVersion":
		return true
	}
	return strings.HasSuffix(name, "Ns") || strings.HasSuffix(name, "Seq")
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("seqbus_"+name, help, labels, nil)
}

var (
	descInfo           = desc("node_info", "The node's id and role (value 1).", "id", "role")
	descEpoch          = desc("epoch", "The node's current epoch.")
	descLeaseHeld      = desc("lease_held", "1 while the node holds the lease.")
	descLeaseEpoch     = desc("lease_epoch", "Epoch of the lease the node holds or last held.")
	descLeaseRemaining = desc("lease_remaining_seconds", "Time left on the lease as the node sees it (0 when not held).")
	descApplied        = desc("applied_seq", "Highest seq applied to the state machine.")
	descDurable        = desc("durable_seq", "Highest seq on stable storage (the journal's durable mark).")
	descReleased       = desc("released_seq", "Primary: highest seq whose outputs were released.")
	descAcked          = desc("acked_seq", "Standby: highest contiguous seq acknowledged to the primary.")
	descStandbyAcked   = desc("standby_acked_seq", "Primary: highest seq each standby acknowledged.", "standby")
	descStandbyInSync  = desc("standby_in_sync", "Primary: 1 when the standby is in the in-sync set.", "standby")
	descInSyncSize     = desc("in_sync_members", "Size of the in-sync set in force.")
	descJournalFirst   = desc("journal_first_seq", "Lowest seq the journal holds.")
	descJournalLast    = desc("journal_last_seq", "Highest seq the journal holds.")
	descRefetching     = desc("refetching", "1 while the node refetches its state and will not lead.")
	descJournalFailed  = desc("journal_failed", "1 once the node's journal failed (a write, fsync or cut): it releases and acknowledges nothing more and will not lead until restarted.")
	descForeign        = desc("foreign_history", "1 once the node heard that its directory holds another history than its cluster's (another cluster's, or a copy): it acknowledges nothing and will not lead; empty its directory and restart it.")
	descDiskStalled    = desc("disk_stalled", "1 while the node's disk has made nothing durable for --disk-stall-after: the node will not lead.")
	descDiskWaiting    = desc("disk_waiting_seconds", "How long written records have waited with the durable mark not moving (0: none waits).")
	descUptime         = desc("uptime_seconds", "Time since the node started.")
	descCounter        = desc("counter_total", "Every counter of status.json, by its section and name.", "section", "name")
	descGauge          = desc("gauge", "Every level (watermark, duration, size) of status.json's counter sections, by section and name.", "section", "name")
	descSocketDrops    = desc("socket_drops_total", "Datagrams a socket dropped, by socket and reason (status.json's unicast/multicast.drops).", "socket", "reason")
	descLatency        = desc("release_latency_microseconds", "Assign -> release latency of each command on the primary, µs (the histogram status.json's latency_us percentiles come from; 1% precision).")
)

// NodeCollector exports a node's status. Collect takes the node's lock
// once (node.MetricsSnapshot), as writing status.json does.
type NodeCollector struct{ N *node.Node }

var _ prometheus.Collector = NodeCollector{}

// Describe implements prometheus.Collector.
func (NodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descInfo, descEpoch, descLeaseHeld, descLeaseEpoch, descLeaseRemaining,
		descApplied, descDurable, descReleased, descAcked, descStandbyAcked, descStandbyInSync, descInSyncSize,
		descJournalFirst, descJournalLast, descRefetching, descJournalFailed, descForeign, descDiskStalled, descDiskWaiting, descUptime, descCounter, descGauge, descSocketDrops, descLatency} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c NodeCollector) Collect(ch chan<- prometheus.Metric) {
	st, lat := c.N.MetricsSnapshot(LatencyBucketsUs)
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(descInfo, 1, strconv.FormatUint(uint64(st.ID), 10), st.Role)
	gauge(descEpoch, float64(st.Epoch))
	gauge(descLeaseHeld, b2f(st.Lease.Held))
	gauge(descLeaseEpoch, float64(st.Lease.Epoch))
	gauge(descLeaseRemaining, float64(max(st.Lease.RemainingNs, 0))/1e9)
	gauge(descApplied, float64(st.Applied))
	gauge(descDurable, float64(st.Durable))
	gauge(descReleased, float64(st.Released))
	gauge(descAcked, float64(st.Ack))
	for _, sb := range st.Standbys {
		id := strconv.FormatUint(uint64(sb.ID), 10)
		gauge(descStandbyAcked, float64(sb.Acked), id)
		gauge(descStandbyInSync, b2f(sb.InSync), id)
	}
	gauge(descInSyncSize, float64(len(st.InSync.Members)))
	gauge(descJournalFirst, float64(st.Journal.FirstSeq))
	gauge(descJournalLast, float64(st.Journal.LastSeq))
	gauge(descRefetching, b2f(st.Refetching))
	gauge(descJournalFailed, b2f(st.JournalFailed))
	gauge(descForeign, b2f(st.ForeignHistory))
	gauge(descDiskStalled, b2f(st.Disk.Stalled))
	gauge(descDiskWaiting, float64(st.Disk.WaitingNs)/1e9)
	gauge(descUptime, float64(st.UptimeNs)/1e9)
	emitSections(ch, st)
	buckets := make(map[float64]uint64, len(lat.BoundsUs))
	for i, b := range lat.BoundsUs {
		buckets[b] = lat.Cumulative[i]
	}
	ch <- prometheus.MustNewConstHistogram(descLatency, lat.Count, lat.SumUs, buckets)
}

// emitSections walks status.json's own form of the counter sections, so
// the names are exactly the ones an operator reads there.
func emitSections(ch chan<- prometheus.Metric, st status.Status) {
	b, err := json.Marshal(st)
	if err != nil {
		return // a Status always marshals; nothing to export otherwise
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if dec.Decode(&m) != nil {
		return
	}
	for _, section := range counterSections {
		fields, _ := m[section].(map[string]any)
		for _, name := range sortedKeys(fields) {
			switch v := fields[name].(type) {
			case json.Number:
				f, _ := v.Float64()
				if isGauge(name) {
					ch <- prometheus.MustNewConstMetric(descGauge, prometheus.GaugeValue, f, section, name)
				} else {
					ch <- prometheus.MustNewConstMetric(descCounter, prometheus.CounterValue, f, section, name)
				}
			case map[string]any:
				if name != "drops" {
					continue
				}
				for _, reason := range sortedKeys(v) {
					if n, ok := v[reason].(json.Number); ok {
						f, _ := n.Float64()
						ch <- prometheus.MustNewConstMetric(descSocketDrops, prometheus.CounterValue, f, section, reason)
					}
				}
			}
		}
	}
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

var (
	descWitnessEpoch      = desc("witness_epoch", "Highest epoch the witness issued.")
	descWitnessHolder     = desc("witness_holder", "Node holding the live lease (0: none).")
	descWitnessRemaining  = desc("witness_lease_remaining_seconds", "Time left on the live lease, on the witness's clock.")
	descWitnessQuarantine = desc("witness_quarantine_remaining_seconds", "Time before the witness grants again after a restart.")
	descWitnessInSync     = desc("witness_in_sync_members", "Size of the in-sync set the witness holds.")
	descWitnessCounter    = desc("witness_counter_total", "Every counter of the witness's Stats, by name.", "name")
	descWitnessGauge      = desc("witness_gauge", "Levels of the witness's Stats (cache size, durable epoch), by name.", "name")
	descWitnessDrops      = desc("witness_drops_total", "Datagrams the witness dropped, by reason.", "reason")
	descWitnessDenies     = desc("witness_denies_total", "Lease denies sent, by reason.", "reason")
)

// WitnessCollector exports a witness server's lease state and counters
// (witness.Server.Stats and Status, each a copy under the server's lock).
type WitnessCollector struct{ S *witness.Server }

var _ prometheus.Collector = WitnessCollector{}

// Describe implements prometheus.Collector.
func (WitnessCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descWitnessEpoch, descWitnessHolder, descWitnessRemaining, descWitnessQuarantine,
		descWitnessInSync, descWitnessCounter, descWitnessGauge, descWitnessDrops, descWitnessDenies} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c WitnessCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.S.Status()
	stats := c.S.Stats()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(descWitnessEpoch, float64(st.Epoch))
	gauge(descWitnessHolder, float64(st.Holder))
	gauge(descWitnessRemaining, float64(max(st.RemainingNs, 0))/1e9)
	gauge(descWitnessQuarantine, float64(max(st.QuarantineRemainingNs, 0))/1e9)
	gauge(descWitnessInSync, float64(len(st.Members.Slice())))
	for i, n := range stats.Drops {
		ch <- prometheus.MustNewConstMetric(descWitnessDrops, prometheus.CounterValue, float64(n), witness.DropReason(i).String())
	}
	for i, n := range stats.Denies {
		ch <- prometheus.MustNewConstMetric(descWitnessDenies, prometheus.CounterValue, float64(n), arbiter.DenyReason(i).String())
	}
	b, err := json.Marshal(stats)
	if err != nil {
		return
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if dec.Decode(&m) != nil {
		return
	}
	for _, name := range sortedKeys(m) {
		v, ok := m[name].(json.Number)
		if !ok {
			continue // Drops and Denies: by reason above
		}
		f, _ := v.Float64()
		if isGauge(name) {
			gauge(descWitnessGauge, f, name)
		} else {
			ch <- prometheus.MustNewConstMetric(descWitnessCounter, prometheus.CounterValue, f, name)
		}
	}
}

// NewRegistry returns a registry with cs and the Go runtime and process
// collectors (memory, GC pauses, file descriptors: what an operator
// checks next to the bus's own numbers).
func NewRegistry(cs ...prometheus.Collector) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(cs...)
	return reg
}

// Server serves /metrics on one TCP address.
type Server struct {
	ln   net.Listener
	srv  *http.Server
	done chan error
}

// Serve listens on addr (host:port; port 0 picks one) and serves reg on
// /metrics until Close. Errors of a scrape are logged, never fatal.
func Serve(addr string, reg *prometheus.Registry, log *slog.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:      slogPrinter{log},
		ErrorHandling: promhttp.ContinueOnError,
		// One scrape at a time: each takes the node's lock once.
		MaxRequestsInFlight: 1,
		Timeout:             10 * time.Second,
	}))
	s := &Server{
		ln:   ln,
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second},
		done: make(chan error, 1),
	}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

// Addr is the address it listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the server and waits for it.
func (s *Server) Close() error {
	err := s.srv.Close()
	if serr := <-s.done; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Println(v ...any) {
	if p.log != nil {
		p.log.Warn("metrics", "err", fmt.Sprint(v...))
	}
}
