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

// Limits are a link's sizes toward its peer, fixed once the link is up.
type Limits struct {
	// EagerMax is the largest message sent eagerly (before its Recv is
	// posted) when the peer's window has room; 0 sends nothing eagerly.
	EagerMax int
	// Chunk is the largest payload of one chunk of a rendezvous message.
	Chunk int
	// MaxRTS bounds the rendezvous sends in flight toward the peer (a
	// sender waits for a turn; a receiver drops a peer that announces four
	// times more).
	MaxRTS int
}

// Link carries the frames of one pair of ranks, in both directions, for
// the Endpoint. It is what a transport package provides, per peer: how the
// bytes travel (a TCP connection or several, a shared-memory ring, a test
// pipe). The Endpoint does everything else: matching, the rendezvous,
// aborts, liveness, the Transport contract.
//
// Out. Eager, Announce and Chunk are called from the operation's goroutine
// and may block (for the write, for ring space) until ctx ends; a frame
// that started out when ctx ends is finished by the link, so frames always
// arrive whole, and sent reports whether it started. Messages of one tag
// arrive in the order their frames were sent; a Chunk of message id comes
// after its Announce. The control calls (Answer, Retract, Consumed,
// Abort, Ping) never block: they queue.
//
// Window. A link keeps the eager window toward its peer: Eager spends
// len(data)+Overhead of the peer's window and declines (done false,
// nothing sent) when it has no room; the peer's Endpoint hands bytes back
// with Consumed as Recvs take them.
//
// In. A link reads its peer's frames and calls its Peer (given at Start)
// for each, from one reader at a time per lane (see Peer). Who reads is
// the link's business: a reader goroutine, or the goroutine of an
// operation that waits (Wait). Once its peer is gone (its end, a silence
// of the peer timeout the Endpoint judges, a broken protocol) it calls
// Peer.Lose or Peer.Protocol, once, and stops calling the Peer.
//
// Lanes. A link may carry its peer's traffic on several lanes (tcp's
// connections): LaneOf(tag) names the lane tag's messages travel on, and
// an inbound announce names the lane it came on, which its Answer takes.
// A link with one lane returns 0.
type Link interface {
	// Start hands the link the Peer its inbound frames go to and lets it
	// begin reading. It is called once, before any other method but
	// Limits.
	Start(p *Peer)
	// Limits are the link's sizes.
	Limits() Limits
	// LaneOf is the lane tag's messages travel on.
	LaneOf(tag transport.Tag) int

	// Eager sends data whole under tag when it fits EagerMax and the
	// peer's window (done true, with the write's error), else sends
	// nothing (done false, nil). With wait false it also declines rather
	// than wait for room in the link (ring space).
	Eager(ctx context.Context, tag transport.Tag, data []byte, wait bool) (done bool, err error)
	// Announce tells the peer that message id of len(data) bytes waits
	// for its Recv (an RTS). A link may offer data for a single-copy read
	// (the far side's SingleCopy) by saying where it is (offered): the
	// Endpoint then keeps data untouched until the peer's Answer, also
	// after a Retract with ack.
	Announce(ctx context.Context, tag transport.Tag, id uint64, data []byte) (sent, offered bool, err error)
	// Chunk sends part, the bytes of message id from offset off, after
	// its Answer said Go.
	Chunk(ctx context.Context, tag transport.Tag, id uint64, off int, part []byte) (sent bool, err error)

	// Answer replies to the announce of message id that came on lane.
	Answer(lane int, id uint64, a Answer)
	// Retract withdraws message id, announced on tag's lane; with ack the
	// peer answers Done once nothing of it is read any more.
	Retract(tag transport.Tag, id uint64, ack bool)
	// Consumed hands n bytes of this rank's window back to the peer.
	Consumed(n int64)
	// Abort tells the peer that collective (a.Group, a.Seq) is aborted,
	// with the Unix nanoseconds at which it was, on every lane.
	Abort(a *transport.AbortError, at int64)
	// Ping tells the peer this rank lives, when nothing else went out for
	// a while.
	Ping()

	// Hold says that an operation waits for a frame on lane (a Send for
	// its Answer, a Recv whose message still streams in): a reader must
	// run there until Release. Hold and Release pair up.
	Hold(lane int)
	// Release ends a Hold. delivered reports whether the frame came.
	Release(lane int, delivered bool)
	// Wait returns once ready() holds, ctx ends or the link is down,
	// reading lane itself meanwhile where it may (no hand-off from a
	// reader goroutine to the caller), else waiting for the reader.
	// Wake ends every Wait of the lane early (ready may have turned).
	Wait(ctx context.Context, lane int, ready func() bool)
	// Wake stops the readers of lane that copy into an operation's buffer
	// or wait in Wait, so they look at their state again.
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
