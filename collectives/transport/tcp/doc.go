// Package tcp is choreo's data plane between processes and machines: the
// links of the message layer (collectives/transport/msg) over
// authenticated, framed TCP connections, registered as the carrier "tcp".
// Listener.ConnectLinks returns a rank's links to its peers
// (Config.Peers), for a msg.Endpoint whose other links may be another
// carrier's (shared memory inside a host, say). The message layer does
// the matching, rendezvous, aborts and liveness; this package carries the
// frames.
//
// # Building the mesh
//
// Every rank knows every rank's "host:port" (Config.Addrs) and joins
// package mesh's authenticated full mesh (label "tcp"): it dials
// ConnsPerPeer connections to each higher peer and accepts as many from
// each lower one; each connection carries both directions. In the
// handshake each rank announces its MaxFrame and MaxBuffered, which its
// peers honour. Connections that fail the handshake are closed and passed
// to Config.OnRefused, as package mesh says. The package logs nothing.
//
// # Frames and flow control
//
// Frames are a 48-byte header and a payload (see frame for the layout
// and the types). A message travels eagerly (EAGER) while the receiver's
// window (its MaxBuffered per peer, each message counting msg.Overhead
// bytes more) has room, and CREDIT frames hand the window back as Recvs
// consume; otherwise it waits for its Recv (RTS, CTS) and then goes, in
// CHUNK frames, straight from the sender's slice into the receiver's
// buffer. So a receiver's memory is bounded whatever it posts, and a
// reader never waits for a Recv. A tag's messages keep to one connection
// (in order), while other tags never wait behind them. A declared length
// over the receiver's MaxFrame, an unknown type, a window overrun or any
// other breach drops the peer; nothing is allocated from a declared
// length before it is checked.
//
// A Send writes its own frames (a message of several frames yields the
// connection between them) and returns when its context ends, even in
// the middle of a frame: the frame's rest is then finished from a copy,
// so the stream stays whole. A peer whose connection closes is lost at
// once; ABORT frames go on every connection, with the cause's
// transport.CauseCode, so that the peer's errors.Is still finds
// sentinels such as ErrShapeMismatch.
//
// # Goroutines
//
// One reader at a time reads a connection. An operation that waits (a
// Recv for its message, a Send for its CTS) reads the connection its tag
// travels on itself when no reader runs there (the link's Wait), polling
// first where the host has a CPU per local rank (see poll.go): the frame
// needs no hand-off from a reader goroutine. Otherwise a reader goroutine
// reads while something waits on it and ends between frames once nothing
// does. Between operations the heartbeat reads each connection briefly
// and pings idle ones. Control frames are written by a goroutine that
// ends when its queue is empty. The Endpoint's Close waits for all of
// them.
package tcp
