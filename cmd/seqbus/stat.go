package main

import (
	"flag"
	"os"
	"time"

	"github.com/seqbus/seqbus/internal/statview"
)

// runStat prints a node's status (DIR/status.json, rewritten by the node
// every 100 ms), refreshed in place on a terminal, or once; with several
// directories, side by side (like AeronStat).
func runStat(args []string) error {
	fs := flag.NewFlagSet("stat", flag.ContinueOnError)
	dir := fs.String("dir", "", "the node's --dir (or a status.json path); or give directories as arguments")
	asJSON := fs.Bool("json", false, "print the status as JSON once and exit")
	once := fs.Bool("once", false, "print once and exit")
	interval := fs.Duration("interval", time.Second, "refresh interval")
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
	if *dir != "" {
		dirs = append([]string{*dir}, dirs...)
	}
	if len(dirs) == 0 {
		return usagef("--dir (or one or more directories) is required")
	}
	if *asJSON && len(dirs) > 1 {
		return usagef("--json reads one directory")
	}
	if err := checkPositive("interval", *interval); err != nil {
		return err
	}
	if *asJSON {
		return statview.CopyJSON(os.Stdout, dirs[0])
	}
	return statview.Watch(os.Stdout, dirs, *once, isTerminal(os.Stdout), *interval)
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
