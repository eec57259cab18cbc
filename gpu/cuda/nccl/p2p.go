package nccl

// Point-to-point calls. Send and Recv enqueue on stream like the
// collectives (see collectives.go for the rules on buffers and
// arguments). Each blocks the GPU until its peer's matching call runs, so
// a rank that both sends and receives (a ring step, a send to itself) must
// make the pair inside one group (GroupStart/GroupEnd or Group); the peer
// must use the same count and type.

// Send sends count elements of send to rank peer (ncclSend); peer may be
// this rank.
func (c *Comm) Send(send uintptr, count int, dt DataType, peer int, stream uintptr) error {
	const name = "send"
	if err := c.usable(name); err != nil {
		return err
	}
	if err := firstErr(checkCount(name, count, dt, 1), c.checkRank(name, "peer", peer),
		checkPtr(name, "send", send, count)); err != nil {
		return err
	}
	return c.call(name, "ncclSend", func(h uintptr) result {
		return c.lib.ncclSend(send, uintptr(count), dt, int32(peer), h, stream)
	})
}

// Recv receives count elements from rank peer into recv (ncclRecv); peer
// may be this rank.
func (c *Comm) Recv(recv uintptr, count int, dt DataType, peer int, stream uintptr) error {
	const name = "recv"
	if err := c.usable(name); err != nil {
		return err
	}
	if err := firstErr(checkCount(name, count, dt, 1), c.checkRank(name, "peer", peer),
		checkPtr(name, "recv", recv, count)); err != nil {
		return err
	}
	return c.call(name, "ncclRecv", func(h uintptr) result {
		return c.lib.ncclRecv(recv, uintptr(count), dt, int32(peer), h, stream)
	})
}
