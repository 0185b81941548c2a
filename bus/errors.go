package bus

import "errors"

var (
	// ErrClosed is returned by Receive and Send after Close, and by a Loop
	// whose connection was closed under it.
	ErrClosed = errors.New("bus: connection closed")

	// ErrNoInterface is returned when a multicast endpoint names an
	// interface that does not exist or is down. The bus never falls back to
	// the default route.
	ErrNoInterface = errors.New("bus: multicast interface missing or down")

	// ErrConfig is returned (wrapped, with the detail) for an invalid
	// configuration: a non-multicast group, a zero port, a TTL over 255, an
	// address family the socket cannot reach.
	ErrConfig = errors.New("bus: invalid configuration")

	// ErrUnsupported is returned (or recorded in a Report) when the platform
	// lacks an ability: CPU pinning or busy polling off Linux.
	ErrUnsupported = errors.New("bus: not supported on this platform")

	// errNoProgress is returned when sendmmsg repeatedly reports success
	// while sending nothing; Send gives up rather than loop for ever.
	errNoProgress = errors.New("bus: sendmmsg made no progress")
)
