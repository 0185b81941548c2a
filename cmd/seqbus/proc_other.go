//go:build !linux

package main

import (
	"errors"
	"os/exec"
)

func setChildAttrs(*exec.Cmd) {}

// startPinned starts cmd; pinning needs Linux.
func startPinned(cmd *exec.Cmd, cpus []int) error {
	if len(cpus) > 0 {
		return errors.New("--cpus: pinning needs Linux")
	}
	return cmd.Start()
}
