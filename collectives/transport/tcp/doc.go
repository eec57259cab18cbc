// Package tcp is choreo's data plane between processes and machines: the
// links of the message layer (collectives/transport/msg) over
// authenticated, framed TCP connections, one mesh per group. Connect
// returns a Transport, a msg.Endpoint over a link to every other rank;
// ConnectLinks returns the links to some ranks (Config.Peers), for an
// Endpoint whose other links are another transport's (shared memory
// inside a host, say). The message layer does the matching, rendezvous,
// aborts and liveness; this package carries the frames.
//
// # Building the mesh
//
// Every rank knows every rank's "host:port" (Config.Addrs). A rank listens
// on its own (Listen, or Connect does it) and joins package mesh's
// authenticated full mesh (label "tcp"): it dials ConnsPerPeer connections
// to each higher peer and accepts as many from each lower one; each pair
// is connected once and each connection carries both directions. In the
// handshake each rank announces its limits (big endian: MaxFrame u32,
// MaxBuffered u32), which its peers check and honour. Connections that
// fail the handshake (a stranger, a wrong secret, a rank of another
// group, garbage, a silent client) are closed, counted in Stats.Refused
// and passed to Config.OnRefused, as package mesh says. Connect returns
// when all are up and closes the listener: later connections are refused
// by the kernel. The package logs nothing.
//
// # Frames
//
// A 48-byte header, big endian: type u8, flags u8, reserved u16 (0),
// payload length u32, group u64, seq u64, step u32, origin u32, id u64,
// size u64; then the payload. Types:
//
//	EAGER   tag; payload = a whole message (at most EagerMax)
//	RTS     tag, id, size: a message waits for its Recv
//	CTS     id, flags (go, size mismatch, or done): the answer to an RTS
//	CHUNK   id, size = offset; payload = the next MaxFrame bytes or fewer
//	RETRACT id, flags (ack: answer done): the sender gave the message up
//	CREDIT  size: window bytes handed back
//	ABORT   group, seq, origin, id = unix nanos, size = transport.CauseCode;
//	        payload = the cause's text
//	PING    nothing
//
// A declared length over the receiver's MaxFrame, an unknown type, a
// window overrun or any other breach drops the peer (its operations fail
// with ErrPeerLost); nothing is allocated from a declared length before
// it is checked.
//
// # Flow control
//
// A message travels eagerly while the receiver's window (MaxBuffered per
// peer, each message counting msg.Overhead bytes more, announced in the
// handshake) has room, and is handed back by CREDIT frames as Recvs
// consume it; otherwise it waits for the Recv (RTS/CTS) and then goes, in
// CHUNK frames, straight from the sender's slice into the receiver's
// buffer. So a receiver's memory is
// bounded whatever it posts, a reader never waits for a Recv, and
// messages of one tag stay in order on the one connection their tag
// maps to, while other tags never wait behind them. Eager bytes that no
// Recv waits for yet are taken off the socket by the next reader there
// (see Goroutines).
//
// A Send writes its own frames (a message of several frames yields the
// connection between them) and returns when its context ends, even in
// the middle of a frame: the frame's rest is then finished from a copy,
// so the stream stays whole.
//
// # Failure
//
// Idle connections are pinged every HeartbeatInterval; a peer silent for
// PeerTimeout (on any of its connections), or whose connection closes, or
// that breaks the protocol, is lost: its pending and later operations
// fail with transport.ErrPeerLost. Abort sends ABORT on every connection
// to every peer; a peer rebuilds the cause with transport.RemoteCause, so
// errors.Is still finds sentinels such as ErrShapeMismatch.
//
// # Goroutines
//
// One reader at a time reads a connection. An operation that waits (a
// Recv for its message, a Send for its CTS) reads the connection its tag
// travels on itself, on its own goroutine, when no reader runs there (the
// link's Wait): the frame needs no hand-off from a reader goroutine (a
// wake-up less per message, much of a small message's latency). Where the
// host has a CPU per local rank it first polls the socket with reads that
// do not wait, for an adaptive budget (see poll.go), so that a message
// that comes meanwhile wakes no one. Otherwise a reader goroutine reads
// while something waits on it (operations in Wait, matched messages
// still streaming in) and ends between frames once nothing does; so ABORT
// frames go on every connection. Between operations the heartbeat reads
// each connection briefly (pings, aborts, a peer's end) and writes pings.
// Control frames are written by a goroutine that ends when its queue is
// empty. The Endpoint's Close waits for all of them.
package tcp
