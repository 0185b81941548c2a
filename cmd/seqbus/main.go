// Command seqbus is the one binary: witness, node, client (and, as they
// land, demo, drill, bench and stat).
package main

import (
	"fmt"
	"os"
)

type command struct {
	name, summary string
	run           func(args []string) error
}

var commands = []command{
	{"node", "run a replica (standby, or a static primary with --role primary)", runNode},
	{"witness", "run the lease witness (on a third box); witness override: let a named node be promoted when none may be", runWitness},
	{"client", "send a fixed-rate load of orders and report the answers", runClient},
	{"stat", "show a node's live status (role, lease, watermarks, counters)", runStat},
	{"journal", "read a journal without changing it: dump, verify, describe", runJournal},
	{"verify", "check client records against the nodes' histories: lost, duplicates, conflicts, hashes, stale", runVerify},
	{"demo", "run a witness, two nodes and a client on loopback; kill the primary; show the failover", runDemo},
	{"keygen", "write a new master key file for frame authentication", runKeygen},
	{"bench", "measure: gated latency by stage vs the raw UDP floor, throughput, compare and plot histograms", runBench},
	{"sim", "soak the deterministic cluster simulator over many seeds", runSim},
	{"chaos", "kill, pause and restart the primary, standbys and witness under load, one fault after another; check nothing was lost", runChaos},
	{"drill", "failure lessons: a paused primary, and what happens without fencing or gating", runDrill},
}

func usage() {
	fmt.Fprintf(os.Stderr, "usage: seqbus <command> [flags]\n\ncommands:\n")
	for _, c := range commands {
		if c.summary == "" {
			continue // hidden (bench-echo)
		}
		fmt.Fprintf(os.Stderr, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(os.Stderr, "\nRun 'seqbus <command> --help' for a command's flags.\n")
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage()
		if len(os.Args) < 2 {
			os.Exit(2)
		}
		return
	}
	for _, c := range commands {
		if c.name == os.Args[1] {
			if err := c.run(os.Args[2:]); err != nil {
				if isHelp(err) {
					return
				}
				fmt.Fprintf(os.Stderr, "seqbus %s: %s\n", c.name, errorLine(c.name, err))
				os.Exit(exitStatus(err))
			}
			return
		}
	}
	fmt.Fprintf(os.Stderr, "seqbus: unknown command %q\n\n", os.Args[1])
	usage()
	os.Exit(2)
}
