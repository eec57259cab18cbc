package msg

import (
	"context"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// Overhead is what each eager message costs in a receiver's window beyond
// its bytes: a sender spends len(data)+Overhead of the peer's window, a
// receiver holds at most its MaxBuffered of such bytes per peer.
const Overhead = 64

// Answer is a receiver's reply to an announced (rendezvous) message.
type Answer uint8

const (
	// Go: the Recv is posted and its buffer fits; send the chunks.
	Go Answer = iota
	// SizeMismatch: the Recv's buffer has another size; the message is
	// consumed and its Send fails with transport.ErrSizeMismatch.
	SizeMismatch
	// Done: the receiver read the message itself by address (a link's
	// single copy); the Send returns nil.
	Done
)

// Limits are a link's sizes toward its peer, fixed once the link is up:
// the largest message sent eagerly (0: none), the largest chunk of a
// rendezvous message, and the rendezvous sends in flight toward the peer
// (a sender waits for a turn; a receiver drops a peer that announces four
// times more).
type Limits struct {
	EagerMax, Chunk, MaxRTS int
}

// Link carries the frames of one pair of ranks, in both directions: what
// a transport package provides per peer (a TCP connection or several, a
// shared-memory ring, a test pipe). The Endpoint does the rest.
//
// Out. Eager, Announce and Chunk run on the operation's goroutine and may
// block until ctx ends; a frame that started out is finished by the link,
// so frames always arrive whole (sent reports whether it started).
// Messages of one tag arrive in the order their frames were sent, a Chunk
// after its Announce. The control calls (Answer, Retract, Consumed,
// Abort, Ping) never block: they queue.
//
// In. A link hands its peer's frames to the Peer given at Start, from one
// reader at a time per lane: a reader goroutine, or the goroutine of an
// operation in Wait. Once its peer is gone (its end, a broken protocol)
// it calls Peer.Lose or Peer.Protocol, once, and calls the Peer no more.
//
// Lanes. A link may carry its peer's traffic on several lanes (tcp's
// connections): LaneOf(tag) names the lane tag's messages travel on, and
// an announce's Answer goes back on the lane it came on. A link with one
// lane returns 0.
type Link interface {
	// Start hands the link its Peer and lets it begin reading; it comes
	// once, before any other call but Limits.
	Start(p *Peer)
	Limits() Limits
	LaneOf(tag transport.Tag) int

	// Eager sends data whole when it fits EagerMax and the peer's window
	// (spending len(data)+Overhead of it): done, with the write's error.
	// Else it sends nothing (false, nil); with wait false also where the
	// link would wait for room (ring space).
	Eager(ctx context.Context, tag transport.Tag, data []byte, wait bool) (done bool, err error)
	// Announce tells the peer that message id of len(data) bytes waits
	// for its Recv. A link may offer data for the peer's SingleCopy read
	// (offered): the Endpoint then keeps data untouched until the peer's
	// Answer, also after a Retract with ack.
	Announce(ctx context.Context, tag transport.Tag, id uint64, data []byte) (sent, offered bool, err error)
	// Chunk sends the bytes of message id from offset off, after its
	// Answer said Go.
	Chunk(ctx context.Context, tag transport.Tag, id uint64, off int, part []byte) (sent bool, err error)

	Answer(lane int, id uint64, a Answer)
	// Retract withdraws message id; with ack the peer answers Done once
	// nothing of it is read any more.
	Retract(tag transport.Tag, id uint64, ack bool)
	// Consumed hands n bytes of this rank's window back to the peer.
	Consumed(n int64)
	// Abort tells the peer, on every lane, that collective (a.Group,
	// a.Seq) was aborted at Unix nanoseconds at.
	Abort(a *transport.AbortError, at int64)
	Ping()

	// Hold says an operation waits for a frame on lane (a Send for its
	// Answer, a Recv whose message streams in): a reader must run there
	// until the matching Release (delivered: the frame came).
	Hold(lane int)
	Release(lane int, delivered bool)
	// Wait returns once ready() holds, ctx ends or the link is down,
	// reading lane itself meanwhile where no reader runs. Wake ends every
	// Wait of lane early and stops its readers that copy into an
	// operation's buffer, so that they look at their state again.
	Wait(ctx context.Context, lane int, ready func() bool)
	Wake(lane int)
	// Tick is the Endpoint's heartbeat: the link looks after itself (an
	// idle link's reading, its pings) and reports when it last heard its
	// peer (Unix nanoseconds).
	Tick() (heard int64)
	// Close closes the link: its readers stop; the peer sees it end.
	Close()
}

// SingleCopy is implemented by links whose receiver can read an announced
// message straight from the sender's memory (process_vm_readv between
// processes of one host; RDMA reads later). ReadAt copies len(dst) bytes
// from offset off of message id, announced with addr, into dst.
type SingleCopy interface {
	ReadAt(dst []byte, addr uint64, off int) error
}
