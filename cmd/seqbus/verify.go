package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/internal/journalview"
	"github.com/seqbus/seqbus/internal/verdict"
)

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

// errVerifyFailed is the exit-1 verdict of seqbus verify: the history
// breaks the promise (the report says how).
var errVerifyFailed = errors.New("the history breaks the promise")

func runVerify(args []string) error {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: seqbus verify --record FILE [--record FILE ...] [--primary DIR] NODE_DIR...\n\n"+
			"Checks what clients recorded (seqbus client --record) against the nodes' journals, read-only:\n"+
			"lost, duplicates, conflicts, hash mismatches, stale. Exit 0 when all are 0 (stale outputs\nthe client's epoch fence refused are reported only), 1 otherwise,\n"+
			"2 when the input cannot be read (nothing was checked).\n\nflags:\n")
		fs.PrintDefaults()
	}
	var records listFlag
	fs.Var(&records, "record", "a client record file (repeat for several clients)")
	primary := fs.String("primary", "", "the final primary's directory (default: the node whose journal ends at the highest epoch, then seq)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	// Node directories may come before, between or after the flags.
	var dirs []string
	for rest := args; ; {
		if err := parseQuiet(fs, rest); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		dirs, rest = append(dirs, fs.Arg(0)), fs.Args()[1:]
	}
	if len(dirs) == 0 {
		fs.Usage()
		return usagef("give at least one node directory")
	}
	for _, d := range append(dirs, *primary) {
		if d == "" {
			continue
		}
		if err := journalview.RequireJournal(d); err != nil {
			return usagef("%v", err) // a mistyped path is no empty history
		}
	}
	res, err := verdict.Verify(verdict.Options{Records: records, Nodes: dirs, Primary: *primary, Engine: engine.NodeConfig()})
	if err != nil {
		// Nothing was checked: not the verdict's exit 1.
		return asUsage(err)
	}
	if *asJSON {
		b, _ := json.MarshalIndent(res, "", "  ")
		fmt.Println(string(b))
	} else {
		for _, l := range res.Lines() {
			fmt.Println(l)
		}
	}
	if !res.OK() {
		return errVerifyFailed
	}
	return nil
}
