package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

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
