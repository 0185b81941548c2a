//go:build !unix

package stagetrace

// processCPUNs is not measured where getrusage is missing: the window's
// CPU reads 0.
func processCPUNs() uint64 { return 0 }
