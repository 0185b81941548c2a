package engine

// index maps non-zero uint64 keys to int32 values: an open-addressing hash
// table with linear probing and backward-shift deletion (no tombstones), so
// its memory is fixed at construction and no operation allocates. Its size
// is the next power of two at or above twice the bound on live keys, so a
// probe always finds an empty slot. Iteration order is never used, so it
// cannot leak into outputs or hashes.
type index struct {
	keys  []uint64 // 0 marks an empty slot
	vals  []int32
	mask  uint64
	shift uint
	live  int
	limit int
}

func newIndex(limit int) index {
	size, bits := 2, uint(1)
	for size < 2*limit {
		size <<= 1
		bits++
	}
	return index{
		keys:  make([]uint64, size),
		vals:  make([]int32, size),
		mask:  uint64(size - 1),
		shift: 64 - bits,
		limit: limit,
	}
}

// home is the key's preferred slot (Fibonacci hashing: sequential ids, the
// common case for order ids, spread evenly).
func (x *index) home(k uint64) uint64 {
	return (k * 0x9e3779b97f4a7c15) >> x.shift
}

func (x *index) get(k uint64) (int32, bool) {
	if k == 0 {
		return -1, false // 0 marks empty slots; it is never a key
	}
	for i := x.home(k); ; i = (i + 1) & x.mask {
		switch x.keys[i] {
		case k:
			return x.vals[i], true
		case 0:
			return -1, false
		}
	}
}

// put inserts a key that is not present. Exceeding the limit or inserting
// key 0 is a bug in the engine.
func (x *index) put(k uint64, v int32) {
	if k == 0 || x.live >= x.limit {
		panic("engine: index: put of key 0 or beyond limit")
	}
	i := x.home(k)
	for x.keys[i] != 0 {
		if x.keys[i] == k {
			panic("engine: index: duplicate key")
		}
		i = (i + 1) & x.mask
	}
	x.keys[i], x.vals[i] = k, v
	x.live++
}

// del removes k if present.
func (x *index) del(k uint64) {
	i := x.home(k)
	for x.keys[i] != k {
		if x.keys[i] == 0 {
			return
		}
		i = (i + 1) & x.mask
	}
	// Shift back every following entry of the probe run that may live at i.
	for j := (i + 1) & x.mask; x.keys[j] != 0; j = (j + 1) & x.mask {
		h := x.home(x.keys[j])
		// The entry at j may move to i unless its home lies cyclically in (i, j].
		if (j-h)&x.mask >= (j-i)&x.mask {
			x.keys[i], x.vals[i] = x.keys[j], x.vals[j]
			i = j
		}
	}
	x.keys[i], x.vals[i] = 0, 0
	x.live--
}
