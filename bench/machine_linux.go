//go:build linux

package bench

import (
	"bufio"
	"os"
	"strconv"
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

// LoadAverage is /proc/loadavg's 1-minute load average (-1 where
// unreadable).
func LoadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}

// CPUTimes is the aggregate "cpu" line of /proc/stat, in clock ticks.
type CPUTimes struct {
	Total, Steal uint64
	OK           bool
}

// ReadCPUTimes reads /proc/stat's first line.
func ReadCPUTimes() CPUTimes {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return CPUTimes{}
	}
	return parseCPUTimes(string(b))
}

// parseCPUTimes parses "cpu  user nice system idle iowait irq softirq
// steal guest guest_nice": total is the sum of the first eight (guest
// time is already in user), steal the eighth.
func parseCPUTimes(stat string) CPUTimes {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return CPUTimes{}
	}
	var t CPUTimes
	for i := 1; i <= 8; i++ {
		v, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			return CPUTimes{}
		}
		t.Total += v
		if i == 8 {
			t.Steal = v
		}
	}
	t.OK = true
	return t
}
