// Package tcp is choreo's data plane between processes and machines: the
// links of the message layer (collectives/transport/msg) over
// authenticated, framed TCP connections, registered as the carrier "tcp".
// A group's Join uses it through that registration; Listen and
// Listener.ConnectLinks give a rank's links to its peers (Config.Peers)
// directly, for a msg.Endpoint whose other links may be another
// carrier's. The message layer does the matching, rendezvous, aborts and
// liveness; this package carries the frames and logs nothing.
//
// Every rank knows every rank's "host:port" (Config.Addrs) and joins
// package mesh's authenticated full mesh (label "tcp"): it dials
// ConnsPerPeer connections to each higher peer and accepts as many from
// each lower one; each carries both directions, and each rank announces
// its MaxFrame and MaxBuffered in the handshake.
//
// Frames are a 48-byte header and a payload (see frame). A tag's
// messages keep to one connection, in order, while other tags never wait
// behind them. A declared length over the receiver's MaxFrame, an unknown
// type, a window overrun or any other breach drops the peer; nothing is
// allocated from a declared length before it is checked. A Send writes
// its own frames and returns when its context ends, even mid-frame: the
// frame's rest is then finished from a copy, so the stream stays whole.
// An operation that waits reads the connection its tag travels on itself
// when no reader runs there (polling first, see poll.go); otherwise a
// reader goroutine reads while something waits on it (see conn).
package tcp
