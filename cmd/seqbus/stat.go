package main

import (
	"bytes"
	"flag"
	"fmt"
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
		b, err := os.ReadFile(statview.Path(dirs[0]))
		if err != nil {
			return fmt.Errorf("read %s: %v (is the node running with this --dir?)", statview.Path(dirs[0]), err)
		}
		_, err = os.Stdout.Write(append(b, '\n'))
		return err
	}
	tty := isTerminal(os.Stdout)
	for {
		var buf bytes.Buffer
		if err := statview.Render(&buf, dirs, time.Now()); err != nil {
			return err
		}
		if !*once && tty {
			// Screen codes only for a terminal: in a pipe or a file they
			// are noise that breaks grep and diff.
			os.Stdout.WriteString("\033[H\033[2J")
		} else if !*once {
			buf.WriteString("\n")
		}
		if _, err := os.Stdout.Write(buf.Bytes()); err != nil {
			return err
		}
		if *once {
			return nil
		}
		time.Sleep(*interval)
	}
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
