package main

import (
	"os/exec"
	"syscall"
)

// setChildAttrs makes a child die with the demo (Pdeathsig), so Ctrl-C or
// a crash of the demo never leaves a node running.
func setChildAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
