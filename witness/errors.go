package witness

import "errors"

// Sentinel errors. Match them with errors.Is; most are returned wrapped,
// with detail.
var (
	// ErrCorruptState is returned by New when the persisted epoch file
	// exists but is not a valid state record (wrong size, magic, version
	// or checksum, or an in-sync set that breaks its invariants), and by
	// NewCore for a loaded state the arbiter refuses. The witness refuses
	// to start rather than guess an epoch: a guess too low would hand an
	// epoch out twice, which no fence can detect. An operator must inspect
	// the file.
	ErrCorruptState = errors.New("witness: corrupt state file")

	// ErrPersist is returned (wrapped) by the epoch store when writing the
	// state file fails at any step (create, write, fsync, rename, directory
	// fsync). The server then withholds the grant.
	ErrPersist = errors.New("witness: cannot persist epoch")

	// ErrConfig is returned by New for a missing connection or state
	// directory. An invalid arbiter configuration is reported with
	// arbiter.ErrInvalidConfig instead.
	ErrConfig = errors.New("witness: invalid configuration")

	// ErrStarted is returned by Start when the server was already started
	// or has been closed.
	ErrStarted = errors.New("witness: server already started or closed")

	// ErrDuration is returned by the wire/core duration conversions for a
	// value the other side cannot represent: a negative int64 going to the
	// wire, or a wire uint64 above math.MaxInt64 where it must be exact.
	ErrDuration = errors.New("witness: duration out of range")

	// ErrRequest is returned by AppendRequest for a request no keeper
	// produces: NodeNone as the sender or an unknown kind.
	ErrRequest = errors.New("witness: invalid request")

	// ErrReply is returned by DecodeReply and ParseReply for a frame that
	// is not a usable reply: not LEASE_GRANT/DENY/INFO, or a grant with
	// epoch 0 or a duration of 0 or above math.MaxInt64.
	ErrReply = errors.New("witness: invalid reply")
)
