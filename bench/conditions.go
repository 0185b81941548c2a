package bench

// StealPercent is the CPU time stolen by the hypervisor between two
// readings, as a percentage of all CPU time (-1 when either is missing or
// no time passed).
func StealPercent(before, after CPUTimes) float64 {
	if !before.OK || !after.OK || after.Total <= before.Total || after.Steal < before.Steal {
		return -1
	}
	return 100 * float64(after.Steal-before.Steal) / float64(after.Total-before.Total)
}
