// Package msg is the message layer of choreo's data planes: one rank's
// Endpoint (a transport.Transport) over one Link per peer.
//
// A transport package provides only how its bytes travel, as a Link per
// pair of ranks (a TCP connection or several, a shared-memory ring, an
// in-memory pipe in tests); msg does everything else, once: the matching
// of Recvs to arrivals per peer and tag, eager sending within the
// receiver's window, the rendezvous of large messages (announce, answer,
// chunks, retraction, size mismatch), single-copy reads where a link
// offers them (SingleCopy), aborts of collectives, the liveness of peers
// (a heartbeat and one peer timeout), Close, LosePeer and Stats.
//
// Use: build one Link per peer (links[rank] == nil at the own rank) and
// call New with the rank's Config; see Link and Peer for the contract
// between the two sides. A carrier's configuration embeds Setup, what
// every carrier is told of the group, and checks it with Setup.Normalize.
//
// Carriers. A transport package registers its kind of link as a Carrier
// (Register, from its init). A group that cluster.Join forms links
// each pair of ranks by Pick: the carrier both ranks asked for, else the
// most preferred that both have and that reaches from one to the other
// (shared memory inside a host, TCP across), and runs one Endpoint over
// the links of every carrier.
//
// Protocol. A message of at most the link's EagerMax bytes goes at once
// when the receiver's window (its MaxBuffered per peer, each message
// costing Overhead bytes more) has room; the receiver hands the window
// back as Recvs take the messages. A larger message, or one that does not
// fit, is announced; the receiver answers Go once its Recv is posted (or
// SizeMismatch when the Recv's buffer has another size), and the sender
// then sends it in chunks straight from its buffer. A sender that gives up
// (its context, an abort) after the announce retracts the message. A link
// that can read the sender's memory reads an offered message itself on
// the Recv's goroutine and answers Done. In the steady state a Recv and an
// eager message allocate nothing in msg (see pool.go).
package msg
