package client

// The epoch fence. A primary stops releasing before its lease ends and
// checks the lease once more right before its OUTPUT frames leave, but no
// sender can check past its own send: a process stopped between that
// check and the sendmmsg (SIGSTOP, a descheduled VM) sends under an epoch
// that has since been replaced, and a datagram can sit in a queue past
// the end of the lease it was sent under. The client refuses such frames
// itself, as a standby refuses a stale epoch: it keeps the highest epoch
// it has seen (its fence) and delivers nothing of an older one. What it
// refuses reaches it again from the new primary, which holds every
// output the old one released (the gate released nothing a standby did
// not have): a gap asks for a replay, a command in flight is resent and
// answered from the dedup table, and the replay that follows every
// switch of primary asks for the rest.

// Fence reports whether a frame of epoch may be delivered: false, and
// counted (Stats.StaleEpoch), when the fence has passed it. raise says
// that the frame comes from a node the client knows (by its address, or
// it carried a good MAC): only such a frame moves the fence up, so one
// datagram from elsewhere with a made-up epoch cannot make the client
// refuse its primary's.
func (c *Core) Fence(epoch uint64, raise bool) bool {
	if epoch < c.fence {
		c.stats.StaleEpoch++
		return false
	}
	if raise {
		c.fence = epoch
	}
	return true
}

// LearnEpoch raises the fence to an epoch the arbiter says is held: the
// arbiter granted it only after the lease of every older epoch ended, so
// nothing of an older one may be delivered from now on.
func (c *Core) LearnEpoch(epoch uint64) { c.fence = max(c.fence, epoch) }

// FenceEpoch is the fence: the highest epoch seen from a known node or
// learnt from the arbiter (0: none yet).
func (c *Core) FenceEpoch() uint64 { return c.fence }
