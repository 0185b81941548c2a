package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"

	"github.com/seqbus/seqbus/auth"
)

func runKeygen(args []string) error {
	fs := flag.NewFlagSet("keygen", flag.ContinueOnError)
	out := fs.String("out", "seqbus.key", "write the new master key here (mode 0600; an existing file is never overwritten)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := checkRequired("out", *out); err != nil {
		return err
	}
	if _, err := auth.Keygen(*out); errors.Is(err, os.ErrExist) {
		// Replacing a cluster's key would lock every node out of every
		// other at the next restart: never overwrite, say so plainly.
		return fmt.Errorf("will not overwrite %s: the file exists (remove it first to replace the key)", *out)
	} else if err != nil {
		return err
	}
	fmt.Printf("wrote %s (mode 0600). Copy it to every node, the witness and the clients; --key %s turns authentication on.\n", *out, *out)
	return nil
}

// loadKey reads a master key file, or returns nil for an empty path.
func loadKey(path string) (*auth.MasterKey, error) {
	if path == "" {
		return nil, nil
	}
	k, err := auth.LoadKeyFile(path)
	if err != nil {
		return nil, usageError{Err: fmt.Errorf("--key: %w", err)}
	}
	return &k, nil
}

// parseIDs parses "1,2,3" into node ids ("": none).
func parseIDs(s string) ([]uint32, error) {
	if s == "" {
		return nil, nil
	}
	ints, err := parseInts(s)
	if err != nil {
		return nil, err
	}
	out := make([]uint32, 0, len(ints))
	for _, v := range ints {
		if v <= 0 || v > 1<<32-1 {
			return nil, fmt.Errorf("bad node id %d", v)
		}
		if slices.Contains(out, uint32(v)) {
			return nil, fmt.Errorf("node id %d given twice", v) // a typo for another node's id
		}
		out = append(out, uint32(v))
	}
	return out, nil
}
