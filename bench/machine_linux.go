//go:build linux

package bench

import (
	"bufio"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// cpuinfoLinesMax bounds the /proc/cpuinfo lines read looking for the
// model; it is on the first CPU's block, within ~10 lines.
const cpuinfoLinesMax = 1000

func platformMachine(m *MachineInfo) {
	m.Hostname, _ = os.Hostname()
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Sysname[:]) + " " + unix.ByteSliceToString(u.Release[:])
		m.KernelVersion = unix.ByteSliceToString(u.Version[:])
	}
	m.CPUModel = cpuModel("/proc/cpuinfo")
}

// cpuModel returns the first "model name" (x86) or "Model"/"Hardware"
// (arm) value in a cpuinfo file, or "".
func cpuModel(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 0; n < cpuinfoLinesMax && sc.Scan(); n++ {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(key) {
		case "model name", "Model", "Hardware":
			return strings.TrimSpace(value)
		}
	}
	return ""
}
