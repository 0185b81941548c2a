// Package sim is seqbus's deterministic cluster simulator, after
// TigerBeetle's VOPR and FoundationDB's simulation: the whole cluster runs
// in one goroutine, one seed decides everything, and a failing seed
// replays bit for bit.
//
// # What runs
//
// The real code the processes run: three node.Node (Options.Nodes: two
// to MaxNodes; sequencer, standby window, lease keeper, in-sync set,
// release gate, journal, and with Options.Keyed the frame MACs under one
// master key that the witness and the clients share), each driven by
// hand through Deliver, Tick and SyncStep, never Start; the witness's
// socket-free witness.Core (Step, then Persisted once the in-memory store
// has saved what it asks), as witness.Server drives it; and three clients
// built on the pure client.Core that follow the lease holder the witness
// reports, refuse frames of an epoch older than their fence
// (client.Core.Fence; Stats.StaleRefused counts them) and resend after
// timeouts and failovers. Nothing touches a
// socket, a disk or a clock: addresses (10.0.0.N) are labels.
//
// # What is simulated
//
//   - Time: one event queue ordered by (simulated time, insertion order).
//     Each node has its own monotonic clock with a fixed rate drawn per
//     seed within ±6 % (the lease margin is 15 %) and a random offset; a
//     node ticks every 1 ms of its own clock. The witness runs on
//     simulated time.
//   - Network: per-seed loss (0-30 %, none in a quarter of the seeds),
//     duplication (0-5 %), delay (20-220 µs plus up to 5 ms of jitter, so
//     datagrams reorder), multicast to every member of a group.
//   - Disk: a journal.MemFS per node; a crash keeps a random prefix of the
//     unsynced writes and may tear the first lost one. fsync follows the
//     journal's group-commit window (or "always"), drawn per seed.
//   - Faults, 2 to 8 per seed at random times in the fault phase (3 s
//     by default, lease 300 ms): isolate the primary (two-way), isolate
//     the witness, split one standby from the primary only, one-way loss
//     into or out of the primary, crash a node or the primary (restart
//     after up to 1.5 s, from whatever its disk kept), pause a node or the
//     primary for half a lease to three (its clock runs on; what reached
//     its socket is read on resume), crash and restart the witness (its
//     store keeps what Save returned), and delay spikes on every link to
//     and from the witness (late grants).
//   - Then a quiet phase: every fault ends, crashed nodes and the witness
//     restart, the network stops losing; every command must be answered
//     and every replica converge within 4 s.
//
// # What is checked (continuously, and at the end of each seed)
//
//  1. Every output released is in every later primary's history,
//     identical: a node becoming primary must hold the released history
//     (compared as a hash chain over the commands); at the end every
//     output a client or the market-data observer received must be an
//     output of that history (replayed into a reference engine).
//  2. Each seq is released with one command only; release epochs never go
//     back; a release happens only inside a live grant of the witness to
//     that node and epoch, and the witness never grants a new holder while
//     another's lease is live; one primary per epoch (a newer term of the
//     same process counts as a promotion); no node steps down for an epoch
//     the witness granted it and its own keeper holds.
//  3. Every replica applies seq after seq, no gap, no repeat; replicas with
//     the same history have the same state hash; at the end every journal
//     read back from its disk is gap-free and equal to the released
//     history; the nodes' own state-hash checks stay quiet.
//  4. At every release, released <= min(applied, required ack, durable)
//     with the lease held, as the node reports it, and released <= the
//     ack delivered from every standby the witness lists as in sync.
//  5. No node releases for an epoch below one it accepted, and no standby
//     applies from a DATA frame of an older epoch.
//  6. A (session, client order id) is answered with one result only.
//  7. Liveness: after the faults stop, every command is answered and the
//     replicas converge within the quiet phase.
//  8. Market data has no hole: every MD seq of the released history was
//     sent to the market-data group by some node (before the network's
//     loss, which consumers repair by re-request): what a primary applied
//     but never released before it crashed or was deposed, the next one
//     publishes at promotion (mutation no-md-republish turns that off).
//  9. Sessions: every client delivers its session's outputs as a gap-free
//     prefix of that session's outputs in the final history (the next
//     output seq each time, once), and at the end of the quiet phase the
//     whole of it: outputs lost on the network or never released by a
//     dead primary come back by replay (mutation no-session-replay).
//
// Scenarios (scenario_test.go) run a fixed fault schedule on a calm
// network instead of a drawn one and check a liveness bound while the
// faults run: a one-way cut, a reverse cut or a pause of one standby must
// not stop releases for longer than the in-sync timeout plus a witness
// round trip, and the standby must be back in the in-sync set at the end.
//
// # How to run
//
//	go test ./sim                          # the CI budget (1000 seeds) + regressions
//	go test -race ./sim                    # 100 seeds under the race detector
//	go test ./sim -run 'TestSim$' -seed=N -v           # replay seed N, print its event log
//	go test ./sim -run 'TestSim$' -seed=N -mutation=no-gating -v
//	go test ./sim -run 'TestSim$' -seeds=100000 -from=5000   # a soak
//	go test ./sim -run TestMutations -v    # each knob must be caught
//	go test ./sim -run=NONE -fuzz=FuzzSim  # random seeds, failures kept
//
// The API for a command-line soak (`seqbus sim --seeds N --from S`):
//
//  1. Run(seed, Options{}) runs one seed and returns its Result
//     (violations, schedule, a digest of every datagram for replay checks,
//     coverage Stats).
//  2. RunMany(ctx, from, n, workers, opts, known, each) runs many on
//     several goroutines (one run per goroutine), hands each result over in
//     seed order, keeps only the failures (its memory does not grow with
//     n) and returns a Summary with seeds/second and coverage; an ended
//     ctx stops it after the seeds under way (Summary.Interrupted).
//  3. ReadRegressionsFile("sim/testdata/regressions.txt") and
//     KnownSignatures give the open bugs' signatures for Tolerated.
//  4. A failure is replayed with Run(seed, Options{Trace: w}).
//
// Every seed that ever failed is kept in testdata/regressions.txt with what
// it found. A line marked known:SIGNATURE is an open bug in a core: the
// checker recognises it (the DIAG- signatures), and the budget tolerates
// seeds that fail only that way, so a new bug still fails CI. A
// documented bound is checked where it can be: a TooOld answer is
// recomputed from the answering node's disk (toocheck.go), and one the
// disk could have answered is a violation of its own.
//
// # What is not simulated
//
// Byte corruption on the wire (the CRC32C makes it a loss), disks that
// reorder unsynced writes or fail fsync, clocks that jump backwards,
// witness drift, snapshots larger than a few hundred commands, a process
// stopped in the middle of a pass (a simulated pass takes no time:
// `seqbus chaos` stops real processes), and goroutine interleavings
// inside a process (a node is one lock; the race detector and the node
// package's own tests cover its goroutines).
package sim
