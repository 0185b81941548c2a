package auth

// KeyringEpochs bounds how many epochs' data keys a Keyring holds: the
// current epoch and up to three before it. Right after a failover, frames
// of the previous epoch are still in flight (a standby's NAK or ACK sent
// before it saw NEW_EPOCH, a retransmit answered by the old primary before
// it stepped down), and a flapping failover can pass through more than one
// epoch in a second; four covers that with room to spare, and a linear
// search of four slots is a few nanoseconds.
//
// At the bound, installing a newer epoch evicts the lowest one held; its
// frames then fail with ErrUnknownKey. An epoch lower than every epoch a
// full ring holds is refused with ErrUnknownKey: epochs only grow, so such a
// key can only be wanted by a deposed or replayed sender.
const KeyringEpochs = 4

// Keyring holds pre-keyed MAC states for the data keys (DataKey) of one
// stream under its most recent epochs, so that signing and verifying a
// frame costs one HMAC and no key derivation (HKDF plus hmac.New is
// microseconds and allocates). The zero value is not usable; use
// NewKeyring.
//
// A Keyring is not safe for concurrent use: give the send loop and the
// receive loop one each (both derive the same keys from the same master).
type Keyring struct {
	master MasterKey
	stream uint16
	n      int
	slots  [KeyringEpochs]keyringSlot
}

type keyringSlot struct {
	epoch uint64
	mac   *MAC
}

// NewKeyring returns an empty keyring for stream's data keys. It copies
// master, so the caller may wipe its own copy.
func NewKeyring(master *MasterKey, stream uint16) *Keyring {
	return &Keyring{master: *master, stream: stream}
}

// Stream returns the stream whose keys the ring holds.
func (r *Keyring) Stream() uint16 { return r.stream }

// Len returns how many epochs' keys are held (at most KeyringEpochs).
func (r *Keyring) Len() int { return r.n }

// Has reports whether the key of epoch is held.
func (r *Keyring) Has(epoch uint64) bool { return r.find(epoch) != nil }

// Epochs appends the held epochs to dst in no particular order, for logs
// and tests.
func (r *Keyring) Epochs(dst []uint64) []uint64 {
	for _, s := range r.slots[:r.n] {
		dst = append(dst, s.epoch)
	}
	return dst
}

// Install derives and holds the key of epoch. It allocates (HKDF and
// hmac.New): call it at promotion, when a new epoch is learnt from the
// witness, or at start-up, never per frame. Installing a held epoch does
// nothing. At the bound (KeyringEpochs) it evicts the lowest epoch, or
// returns ErrUnknownKey, holding nothing new, when epoch is lower than all
// of them.
func (r *Keyring) Install(epoch uint64) error {
	if r.Has(epoch) {
		return nil
	}
	if !r.admits(epoch) {
		return ErrUnknownKey
	}
	r.insert(epoch, r.newMAC(epoch))
	return nil
}

// RetireBelow drops the keys of every epoch lower than epoch and returns
// how many it dropped. A runtime calls it once a failover has settled (for
// example when every standby acknowledges under the new epoch), so old
// frames stop verifying before the bound would evict them.
func (r *Keyring) RetireBelow(epoch uint64) int {
	kept := 0
	for _, s := range r.slots[:r.n] {
		if s.epoch >= epoch {
			r.slots[kept] = s
			kept++
		}
	}
	dropped := r.n - kept
	clear(r.slots[kept:r.n])
	r.n = kept
	return dropped
}

// Sign appends msg's tag under epoch's key to dst. It returns
// ErrUnknownKey, and dst unchanged, when epoch is not held: a primary
// installs its epoch's key when it promotes, before sending anything. It
// does not allocate when dst has TagLen bytes of spare capacity.
func (r *Keyring) Sign(dst, msg []byte, epoch uint64) ([]byte, error) {
	s := r.find(epoch)
	if s == nil {
		return dst, ErrUnknownKey
	}
	return s.mac.Sign(dst, msg), nil
}

// Verify checks tag against msg under epoch's key: nil, ErrUnknownKey when
// the epoch is not held, or ErrBadMAC. It never installs a key, so a flood
// of forged frames with made-up epochs costs a table lookup each and cannot
// evict a real key. It does not allocate.
func (r *Keyring) Verify(msg, tag []byte, epoch uint64) error {
	s := r.find(epoch)
	if s == nil {
		return ErrUnknownKey
	}
	return s.mac.Verify(msg, tag)
}

// VerifyInstall is Verify for a frame whose epoch may not be held yet (a
// standby's first frame from a new primary): when epoch is not held it
// derives the key, verifies under it, and installs it only if the tag is
// good. A forged frame therefore never changes the ring, but each call for
// an unheld epoch costs a key derivation and allocates, so the runtime
// calls it only after Verify returned ErrUnknownKey, only for an epoch above
// every epoch it accepted, and at a bounded rate (for example once per
// heartbeat interval). It returns ErrUnknownKey when a full ring would
// refuse epoch (see KeyringEpochs).
func (r *Keyring) VerifyInstall(msg, tag []byte, epoch uint64) error {
	if s := r.find(epoch); s != nil {
		return s.mac.Verify(msg, tag)
	}
	if !r.admits(epoch) {
		return ErrUnknownKey
	}
	m := r.newMAC(epoch)
	if err := m.Verify(msg, tag); err != nil {
		return err
	}
	r.insert(epoch, m)
	return nil
}

func (r *Keyring) find(epoch uint64) *keyringSlot {
	for i := range r.slots[:r.n] {
		if r.slots[i].epoch == epoch {
			return &r.slots[i]
		}
	}
	return nil
}

// admits reports whether an unheld epoch may be installed: always while
// there is room, and when full only if it is above the lowest held epoch.
func (r *Keyring) admits(epoch uint64) bool {
	return r.n < KeyringEpochs || epoch > r.slots[r.lowest()].epoch
}

// lowest returns the index of the lowest held epoch; the ring is not empty.
func (r *Keyring) lowest() int {
	low := 0
	for i := 1; i < r.n; i++ {
		if r.slots[i].epoch < r.slots[low].epoch {
			low = i
		}
	}
	return low
}

// insert holds m for epoch, evicting the lowest epoch when full. The caller
// has checked admits.
func (r *Keyring) insert(epoch uint64, m *MAC) {
	i := r.n
	if r.n == KeyringEpochs {
		i = r.lowest()
	} else {
		r.n++
	}
	r.slots[i] = keyringSlot{epoch: epoch, mac: m}
}

func (r *Keyring) newMAC(epoch uint64) *MAC {
	return NewMAC(DataKey(&r.master, r.stream, epoch))
}
