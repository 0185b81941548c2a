package auth

import "errors"

// Sentinel errors. Match them with errors.Is. The hot-path methods (Verify,
// Sign, Accept) return them bare, never wrapped: wrapping allocates, and a
// flood of forged frames must not turn into a flood of garbage.
var (
	// ErrBadMAC is returned by Verify when the tag does not match the
	// message under the selected key, or has the wrong length. The frame is
	// forged, corrupted past its CRC, or signed under another key: drop it
	// and count it.
	ErrBadMAC = errors.New("auth: bad MAC")

	// ErrUnknownKey is returned when no key for the requested epoch is in a
	// Keyring (never installed, evicted at the bound, or retired), or when
	// an epoch is refused for installation because it is older than every
	// epoch a full ring holds. Frames under such epochs cannot be verified
	// and must be dropped.
	ErrUnknownKey = errors.New("auth: no key for this epoch")

	// ErrReplay is returned by EpochFilter.Accept for a counter already
	// accepted, one too far behind the window, one of an epoch older than
	// the filter's, or one at or over the limit.
	ErrReplay = errors.New("auth: replayed or stale counter")

	// ErrKeyFile is returned (wrapped, with the path or the detail) when a
	// master key file cannot be created, read or parsed. Errors matching
	// ErrKeyPermissions match ErrKeyFile too.
	ErrKeyFile = errors.New("auth: bad key file")

	// ErrKeyPermissions is returned (wrapped, with the path and the mode)
	// by LoadKeyFile for a key file that group or others may access (mode &
	// 0o077 != 0) or that is not a regular file. A leaked master key lets
	// anyone on the LAN forge every frame of every epoch, so the file is
	// refused rather than used with a warning.
	ErrKeyPermissions = errors.New("auth: key file permissions too open or not a regular file")
)
