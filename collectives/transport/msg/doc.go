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
package msg
