//go:build !linux

package bus

import "time"

// ReceiveStamp reports false off Linux: the kernel's receive time is read
// with SIOCGSTAMPNS there only.
func (u *UDP) ReceiveStamp() (time.Time, bool) { return time.Time{}, false }
