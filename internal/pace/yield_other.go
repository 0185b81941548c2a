//go:build !linux

package pace

import "runtime"

func schedYield() { runtime.Gosched() }
