//go:build !linux

package bus

import "net/netip"

func probeOpen(netip.AddrPort) (int, error)           { return -1, ErrProbeUnsupported }
func probeSend(int, []byte) (refused bool, err error) { return false, ErrProbeUnsupported }
func probeCheck(int) (refused, other bool)            { return false, false }
func probeClose(int)                                  {}
