// Package cluster is the one harness of seqbus: it starts and supervises
// the processes of a cluster (witness, nodes, clients: subcommands of the
// seqbus binary) on loopback or inside network namespaces
// (internal/netns), waits for a primary, taps the outputs a client
// receives, injects faults (SIGKILL, SIGSTOP/SIGCONT, partitions and loss
// through nftables inside a namespace) and verifies a history: what a
// client received against the nodes' journals (internal/verdict for
// recorded runs, ReadJournal for digests and replays).
//
// The demo (internal/demo), the drills (internal/drill), the benchmarks
// (bench/suite, and bench's floor hops) and the end-to-end tests (e2e)
// all run their processes through it.
// Every socket it opens is on 127.0.0.0/8 or inside a namespace the
// caller created; every loop in it is bounded in time.
package cluster
