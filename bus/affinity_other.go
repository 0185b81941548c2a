//go:build !linux

package bus

import "runtime"

func pinCPU(int) error { return ErrUnsupported }

func osYield() { runtime.Gosched() }
