package main

import (
	"errors"
	"flag"
	"io"

	"github.com/seqbus/seqbus/internal/flagcheck"
)

// parseFlags parses args with an added --config flag. A config file holds
// the same settings as the flags, one per line, as `name = value` (the
// flag's name without dashes; `#` starts a comment; a flag that repeats,
// like peer, may appear on several lines). Flags given on the command line
// win over the file, so one file can serve a whole cluster and each box
// overrides its own --id.
func parseFlags(fs *flag.FlagSet, args []string) error {
	path := fs.String("config", "", "read settings from `FILE`: one name = value per line, command-line flags win")
	if err := parseQuiet(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q (flags start with --)", fs.Arg(0))
	}
	if *path == "" {
		return nil
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return asUsage(flagcheck.ApplyFile(fs, *path, set))
}

// parseQuiet parses args without the flag package's own printing: a bad
// flag is one line (a usageError: main prints it and exits 2), --help
// prints the usage to stderr.
func parseQuiet(fs *flag.FlagSet, args []string) error {
	out := fs.Output()
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.SetOutput(out)
	if errors.Is(err, flag.ErrHelp) {
		fs.Usage()
		return err
	}
	if err != nil {
		return usagef("%v (see seqbus %s --help)", err, fs.Name())
	}
	return nil
}

// errHelp is returned after --help printed the usage: not a failure.
var errHelp = flag.ErrHelp

func isHelp(err error) bool { return errors.Is(err, errHelp) }
