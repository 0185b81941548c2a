//go:build !linux && unix

package bus

import "syscall"

// msgTrunc is the recvmsg flag for a datagram cut short.
const msgTrunc = syscall.MSG_TRUNC
