//go:build !linux

package cluster

import (
	"errors"
	"os/exec"
)

// DieWithParent needs Linux; elsewhere it does nothing.
func DieWithParent(*exec.Cmd) {}

// startPinned starts cmd; pinning needs Linux.
func startPinned(cmd *exec.Cmd, cpus []int) error {
	if len(cpus) > 0 {
		return errors.New("--cpus: pinning needs Linux")
	}
	return cmd.Start()
}
