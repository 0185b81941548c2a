package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/seqbus/seqbus/internal/journalview"
)

// runJournal reads a node's journal without changing it
// (internal/journalview): dump, verify, describe. Flags only.
func runJournal(args []string) error {
	if len(args) == 0 {
		return usagef("want a subcommand: dump, verify or describe (see seqbus journal --help)")
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(os.Stderr, journalUsage)
		return errHelp
	}
	sub, rest := args[0], args[1:]
	fs := flag.NewFlagSet("journal "+sub, flag.ContinueOnError)
	set := fs.String("set", "", "inspect a journal set aside as *.corrupt-<time>: give corrupt-<time> (default: the live journal, or the only set there is)")
	var from, to *uint64
	var format *string
	var allowTorn *bool
	switch sub {
	case "dump":
		from = fs.Uint64("from", 0, "first seq to print")
		to = fs.Uint64("to", 0, "last seq to print (0: to the end)")
		format = fs.String("format", "json", "json (one object per record) or text")
	case "verify":
		allowTorn = fs.Bool("allow-torn-tail", false, "exit 0 on a torn tail (a crash mid-write; Open would cut it)")
	case "describe":
		format = fs.String("format", "text", "text or json")
	default:
		return usagef("unknown subcommand %q (dump, verify, describe; see seqbus journal --help)", sub)
	}
	dir, err := parseWithDir(fs, rest)
	if err != nil {
		return err
	}
	if from != nil && *to != 0 && *to < *from {
		return usagef("--to %d is before --from %d", *to, *from)
	}
	if format != nil && *format != "json" && *format != "text" {
		return usagef("--format: want text or json, got %q", *format)
	}
	opts, err := journalview.PickSet(os.Stderr, dir, *set)
	if err != nil {
		return err
	}
	switch sub {
	case "dump":
		return journalview.Dump(os.Stdout, dir, opts, *from, *to, *format)
	case "verify":
		return journalview.Verify(os.Stdout, dir, opts, *allowTorn)
	default:
		return journalview.Describe(os.Stdout, dir, opts, *format)
	}
}

const journalUsage = `usage: seqbus journal <subcommand> DIR [flags]

Reads a node's journal directory (its --dir) without changing anything.

  dump DIR      one JSON object per record (seq, epoch, session, client order
                id, the decoded command); --from, --to, --format text|json
  verify DIR    checks CRCs, seq continuity, epoch monotonicity, the snapshot
                chain and the tail; exit 0, or 1 with the first problem and
                its file and offset
  describe DIR  segments, ranges, snapshots, sizes, the durable mark

--set corrupt-<time> reads a journal a node set aside as corrupt.
`

// parseWithDir parses flags given before or after the one DIR argument.
func parseWithDir(fs *flag.FlagSet, args []string) (string, error) {
	if err := parseQuiet(fs, args); err != nil {
		return "", err
	}
	if fs.NArg() == 0 {
		return "", usagef("want the journal directory (a node's --dir)")
	}
	dir := fs.Arg(0)
	if err := parseQuiet(fs, fs.Args()[1:]); err != nil {
		return "", err
	}
	if fs.NArg() > 0 {
		return "", usagef("unexpected argument %q", fs.Arg(0))
	}
	return dir, nil
}
