package transport

import "context"

// Transport is one rank's endpoint of a group of Size ranks, numbered
// 0..Size-1.
//
// Contract (every implementation; transporttest.Run checks it):
//   - Messages from one source to one destination with equal Tags are
//     received in the order they were sent; messages with different Tags
//     are independent (a Recv never waits behind a message of another Tag).
//   - Send may block until the matching Recv is posted (rendezvous) or may
//     buffer; callers run the two sides of an exchange concurrently and never
//     rely on either behaviour. Send returns once data may be reused.
//   - Recv fills exactly len(into) bytes. A message of another size fails the
//     Recv with ErrSizeMismatch (the message is consumed); its Send returns
//     nil or ErrSizeMismatch, depending on whether the transport can know.
//   - Once Send or Recv has returned, with any result, the transport no
//     longer touches its buffer (callers recycle buffers).
//   - Zero-length messages are allowed.
//   - Every call returns when its context is done: with an error wrapping
//     ErrTimeout and context.DeadlineExceeded, or wrapping context.Canceled.
//   - dst or src out of range, or equal to Rank, fails with ErrBadPeer.
//   - Abort(tag, cause) fails every pending and every future Send and Recv
//     (and Expose/Sync for PeerAccess) whose Tag has the same Group and Seq,
//     on every rank, within bounded time, with an *AbortError (matching
//     ErrAborted) naming the origin rank and the cause. The first Abort of a
//     (Group, Seq) wins; later ones are ignored. A transport remembers at
//     least the last 4096 aborted collectives.
//   - Close fails this rank's pending and future calls with ErrClosed, and
//     the peers' pending and future calls that involve this rank with
//     ErrPeerLost within bounded time (a transport may still deliver a
//     message that arrived whole before the loss). Close is idempotent.
//   - All methods are safe for concurrent use; a Transport starts no
//     goroutine that outlives Close.
type Transport interface {
	Rank() int
	Size() int
	Send(ctx context.Context, dst int, tag Tag, data []byte) error
	Recv(ctx context.Context, src int, tag Tag, into []byte) error
	Abort(tag Tag, cause error)
	Close() error
}

// TrySender is implemented by transports that can send a message at once
// when it need not wait for its Recv (the TCP and shm transports' eager
// messages): TrySend either sends (done, with Send's result) or sends
// nothing (false, nil), and the caller then Sends it.
type TrySender interface {
	TrySend(ctx context.Context, dst int, tag Tag, data []byte) (done bool, err error)
}

// PeerAccess is implemented by transports whose ranks share one address
// space. It lets an algorithm read its peers' buffers in place, so that no
// byte is copied twice.
//
// Expose publishes this rank's bufs under tag and returns once every rank of
// the group has exposed under the same tag (it is a barrier), or fails like
// a Send would (ctx, Abort of (Group, Seq), Close). Every rank must call
// Expose for a tag, once.
type PeerAccess interface {
	Expose(ctx context.Context, tag Tag, bufs ...[]byte) (Window, error)
}

// Window is one rank's view of the buffers every rank exposed under a tag.
//
// A rank's buffers may be read by its peers from Expose's return until the
// last Sync the rank makes returns nil; so an algorithm ends with a Sync
// before the caller may reuse its buffers, and between two Syncs a rank only
// reads peers' buffers (or writes regions no peer reads in that phase).
// Peers' buffers must be treated as read-only unless the algorithm's phases
// say otherwise.
//
// Any failure (a rank's Sync hitting its deadline, Abort, Close) fails the
// whole window on every rank: pending and future Syncs return the error.
// Leave must be called once by every rank that got a Window (defer it); after
// a failure it waits, for a bounded time, until no rank is still between
// Syncs, so that this rank's buffers are no longer read when it returns.
type Window interface {
	// Buffers returns the buffers rank exposed, in Expose's order.
	Buffers(rank int) [][]byte
	// Sync is a barrier of all ranks of the window.
	Sync(ctx context.Context) error
	Leave()
}
