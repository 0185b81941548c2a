package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
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
	return asUsage(applyConfigFile(fs, *path, set))
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

// applyConfigFile sets every flag named in the file that is not in skip.
func applyConfigFile(fs *flag.FlagSet, path string, skip map[string]bool) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = strings.TrimSpace(text[:i])
		}
		if text == "" {
			continue
		}
		name, value, ok := strings.Cut(text, "=")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok || name == "" {
			return fmt.Errorf("%s:%d: want `name = value`, got %q", path, line, text)
		}
		name = strings.TrimLeft(name, "-")
		if name == "config" {
			return fmt.Errorf("%s:%d: a config file cannot include another", path, line)
		}
		if fs.Lookup(name) == nil {
			return fmt.Errorf("%s:%d: unknown setting %q for `seqbus %s` (see --help)", path, line, name, fs.Name())
		}
		if skip[name] {
			continue
		}
		if err := fs.Set(name, strings.Trim(value, `"`)); err != nil {
			return fmt.Errorf("%s:%d: %s: %w", path, line, name, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("--config %s: %w", path, err)
	}
	return nil
}

// errHelp is returned after --help printed the usage: not a failure.
var errHelp = flag.ErrHelp

func isHelp(err error) bool { return errors.Is(err, errHelp) }
