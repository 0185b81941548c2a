//go:build !linux && !unix

package bus

// msgTrunc is 0 where recvmsg reports truncation as an error instead.
const msgTrunc = 0
