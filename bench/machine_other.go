//go:build !linux

package bench

import "os"

func platformMachine(m *MachineInfo) {
	m.Hostname, _ = os.Hostname()
}
