package standby

import "errors"

// Sentinel errors. They are returned unwrapped, so a plain == works, but
// errors.Is is the recommended test.
var (
	// ErrNeedSnapshot is returned by OnMessage when a message is too far
	// ahead of Applied to fit the bounded buffer (which, because the buffer
	// holds exactly the MaxPending sequence numbers after Applied+1, is the
	// same as the buffer being full). The call changes nothing: the caller
	// should request a snapshot, install it, call ResetTo, and keep feeding
	// messages meanwhile (those that fit are still buffered).
	ErrNeedSnapshot = errors.New("standby: message beyond the receive window, snapshot needed")

	// ErrMessageTooLarge is returned by OnMessage when a payload is longer
	// than Config.MaxMessageBytes. The call changes nothing. The check comes
	// first, for every message (even an in-order one that would not need a
	// copy), so that the limit is a property of the stream and not of the
	// arrival order; a primary that sequences such a message has a
	// configuration that does not match this standby, and the runtime should
	// treat this as fatal for the stream or fall back to a snapshot.
	ErrMessageTooLarge = errors.New("standby: message larger than MaxMessageBytes")

	// ErrInvalidConfig is returned (wrapped, with detail) by New when a
	// Config field is out of its documented range.
	ErrInvalidConfig = errors.New("standby: invalid config")
)
