//go:build !linux

package bench

import "os"

func platformMachine(m *MachineInfo) {
	m.Hostname, _ = os.Hostname()
}

// LoadAverage is unknown here (-1).
func LoadAverage() float64 { return -1 }

// CPUTimes is /proc/stat's aggregate line; unavailable here.
type CPUTimes struct {
	Total, Steal uint64
	OK           bool
}

// ReadCPUTimes returns nothing off Linux.
func ReadCPUTimes() CPUTimes { return CPUTimes{} }
