// Package msg is the message layer of choreo's data planes: one rank's
// Endpoint (a transport.Transport) over one Link per peer.
//
// A transport package provides only how its bytes travel, as a Link per
// pair of ranks; msg does everything else, once: matching per peer and
// tag, eager sending within the receiver's window, the rendezvous of large
// messages, single-copy reads where a link offers them, aborts, the
// liveness of peers (a heartbeat and one peer timeout), Close and
// LosePeer.
//
// Use: build one Link per peer (nil at the own rank) and call New with
// the rank's Config; Link and Peer state the contract between the two. A
// transport package registers its kind of link as a Carrier (Register,
// from its init); a group's Join links each pair of ranks by Pick and
// gives each carrier's Connect a Setup.
//
// Protocol. A message of at most the link's EagerMax bytes goes at once
// when the receiver's window (its MaxBuffered per peer, each message
// costing Overhead bytes more) has room; the receiver hands the window
// back as Recvs take the messages. A larger one is announced; the
// receiver answers Go once its Recv is posted (SizeMismatch for another
// size), and the sender sends it in chunks straight from its buffer, or
// the receiver reads it from the sender's memory and answers Done. A
// sender that gives up after the announce retracts the message.
//
// Liveness and eviction. The heartbeat pings idle links and checks when
// each peer was last heard; a peer silent for PeerTimeout is lost (for
// StartTimeout, when longer, until it is first heard: a peer that is still
// connecting to its other peers has not started its Endpoint). The
// interval before a heartbeat that comes late (this process itself was
// stalled, and may not have read what its peers sent) counts nothing: a
// peer is judged on time this process was awake to hear it. Before it loses a silent peer the
// Endpoint sends it an eviction notice, best effort (an abort of a
// reserved collective with the cause code transport.CauseEvicted, which
// every link carries as it carries aborts), and closes the link a
// heartbeat later so that the notice may leave first. A rank that gets
// such a notice, typically one that was stopped and resumed, is evicted:
// every peer is lost, and every pending and later call on its Endpoint
// fails with an error wrapping transport.ErrEvicted (and
// transport.ErrPeerLost), so that it never writes into a group that went
// on without it. A link that ends, LosePeer, a protocol error and Close
// send no notice.
//
// Retired groups. Retire refuses a group's messages for good
// (transport.Retirer): this rank's calls of the group fail with
// transport.ErrStale, what arrived of it is dropped (an eager message's
// window bytes go back to its sender), later eager messages are dropped
// as they arrive, and an announce of the group is answered with an abort
// of its collective whose cause wraps transport.ErrStale, so that its
// sender fails at once instead of waiting for a Recv that never comes.
package msg
