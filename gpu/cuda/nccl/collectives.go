package nccl

import "math"

// The collectives. Each enqueues the operation on stream (a cudaStream_t;
// 0 is the legacy default stream) and returns; the buffers are device
// addresses that must stay valid until the stream has run the operation.
// Counts are elements of dt. Every rank of the communicator must make the
// same collectives in the same order with matching counts, types, ops and
// roots. Arguments are checked first (errors wrap ErrInvalidArgument): a
// negative count, a count whose bytes overflow, an invalid type or op, a
// root out of range, or a null buffer that the call would use.

// usable reports a nil or zero communicator.
func (c *Comm) usable(op string) error {
	if c == nil || c.lib == nil || c.ended == nil {
		return badArgf(op, "nil or uninitialized communicator (make one with InitRank)")
	}
	return nil
}

// checkCount checks count elements of dt, times factor (the ranks whose
// blocks one buffer holds), for a representable byte size.
func checkCount(op string, count int, dt DataType, factor int) error {
	if !dt.Valid() {
		return badArgf(op, "invalid data type %v", dt)
	}
	if count < 0 {
		return badArgf(op, "negative count %d", count)
	}
	if count > math.MaxInt/dt.Size()/max(factor, 1) {
		return badArgf(op, "count %d of %v times %d overflows", count, dt, factor)
	}
	return nil
}

// checkRedOp checks a reduction.
func checkRedOp(op string, r RedOp) error {
	if !r.Valid() {
		return badArgf(op, "invalid reduction %v", r)
	}
	return nil
}

// checkRank checks a root or peer.
func (c *Comm) checkRank(op, what string, r int) error {
	if r < 0 || r >= c.nranks {
		return badArgf(op, "%s %d out of range [0, %d)", what, r, c.nranks)
	}
	return nil
}

// checkPtr reports a null buffer that a call of count > 0 elements uses.
func checkPtr(op, name string, p uintptr, count int) error {
	if count > 0 && p == 0 {
		return badArgf(op, "null %s buffer for %d elements", name, count)
	}
	return nil
}

// firstErr returns the first non-nil error.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// AllReduce reduces count elements of send across all ranks with op and
// leaves the result in recv on every rank (ncclAllReduce). send == recv
// works in place.
func (c *Comm) AllReduce(send, recv uintptr, count int, dt DataType, op RedOp, stream uintptr) error {
	const name = "allreduce"
	if err := firstErr(c.usable(name), checkCount(name, count, dt, 1), checkRedOp(name, op),
		checkPtr(name, "send", send, count), checkPtr(name, "recv", recv, count)); err != nil {
		return err
	}
	return c.call(name, "ncclAllReduce", func(h uintptr) result {
		return c.lib.ncclAllReduce(send, recv, uintptr(count), dt, op, h, stream)
	})
}

// AllGather gathers sendCount elements from every rank into recv, which
// holds Count()*sendCount elements, rank i's at offset i*sendCount
// (ncclAllGather). send == recv + Rank()*sendCount*size works in place.
func (c *Comm) AllGather(send, recv uintptr, sendCount int, dt DataType, stream uintptr) error {
	const name = "allgather"
	if err := c.usable(name); err != nil {
		return err
	}
	if err := firstErr(checkCount(name, sendCount, dt, c.nranks),
		checkPtr(name, "send", send, sendCount), checkPtr(name, "recv", recv, sendCount)); err != nil {
		return err
	}
	return c.call(name, "ncclAllGather", func(h uintptr) result {
		return c.lib.ncclAllGather(send, recv, uintptr(sendCount), dt, h, stream)
	})
}

// ReduceScatter reduces send, Count()*recvCount elements, across all ranks
// with op and leaves block i (recvCount elements at offset i*recvCount) of
// the result in recv on rank i (ncclReduceScatter). recv == send +
// Rank()*recvCount*size works in place.
func (c *Comm) ReduceScatter(send, recv uintptr, recvCount int, dt DataType, op RedOp, stream uintptr) error {
	const name = "reducescatter"
	if err := c.usable(name); err != nil {
		return err
	}
	if err := firstErr(checkCount(name, recvCount, dt, c.nranks), checkRedOp(name, op),
		checkPtr(name, "send", send, recvCount), checkPtr(name, "recv", recv, recvCount)); err != nil {
		return err
	}
	return c.call(name, "ncclReduceScatter", func(h uintptr) result {
		return c.lib.ncclReduceScatter(send, recv, uintptr(recvCount), dt, op, h, stream)
	})
}

// Broadcast copies count elements of root's send into recv on every rank
// (ncclBroadcast). send is read on root only (it may be 0 elsewhere);
// send == recv works in place.
func (c *Comm) Broadcast(send, recv uintptr, count int, dt DataType, root int, stream uintptr) error {
	const name = "broadcast"
	if err := c.usable(name); err != nil {
		return err
	}
	sendCount := 0
	if root == c.rank {
		sendCount = count
	}
	if err := firstErr(checkCount(name, count, dt, 1), c.checkRank(name, "root", root),
		checkPtr(name, "send", send, sendCount), checkPtr(name, "recv", recv, count)); err != nil {
		return err
	}
	return c.call(name, "ncclBroadcast", func(h uintptr) result {
		return c.lib.ncclBroadcast(send, recv, uintptr(count), dt, int32(root), h, stream)
	})
}

// Reduce reduces count elements of send across all ranks with op into
// root's recv (ncclReduce). recv is written on root only (it may be 0
// elsewhere); send == recv works in place.
func (c *Comm) Reduce(send, recv uintptr, count int, dt DataType, op RedOp, root int, stream uintptr) error {
	const name = "reduce"
	if err := c.usable(name); err != nil {
		return err
	}
	recvCount := 0
	if root == c.rank {
		recvCount = count
	}
	if err := firstErr(checkCount(name, count, dt, 1), checkRedOp(name, op), c.checkRank(name, "root", root),
		checkPtr(name, "send", send, count), checkPtr(name, "recv", recv, recvCount)); err != nil {
		return err
	}
	return c.call(name, "ncclReduce", func(h uintptr) result {
		return c.lib.ncclReduce(send, recv, uintptr(count), dt, op, int32(root), h, stream)
	})
}
