// Package shm is choreo's data plane between processes of one host: the
// links of the message layer (collectives/transport/msg) over shared
// memory, registered as the carrier "shm" and preferred there, beside
// tcp's links to ranks on other hosts. ConnectLinks returns a rank's
// links to its peers.
//
// Each pair of ranks shares one region: an anonymous memory file (memfd)
// that the lower rank creates, seals against resizing and hands to the
// higher one over the pair's unix socket, once each side has proved the
// group's secret (package mesh's handshake; see handshake.go). Nothing is
// ever named under /dev/shm: the kernel frees a region with its last
// mapping, so a closed group, a dead rank and a crashed run leave nothing
// behind, and the rendezvous sockets have abstract names that vanish
// with their process.
//
// A region holds two lanes, one per direction, each a ring of fixed-size
// slots and a small ring of control entries (see region.go). A region
// costs about 2 x Slots x SlotSize bytes (32 MiB with the defaults,
// touched as the ring turns), and a rank of n maps n-1 of them. Small
// messages go eagerly in one slot while the receiver's window has room;
// larger ones are announced, wait for the receiver's Recv (a
// clear-to-send in the control ring), and are copied from the sender's
// slice into slots and from the slots straight into the receiver's
// buffer, or read once from the sender's memory where that is allowed
// and pays (see cma.go).
//
// A call that waits for its peer first polls the incoming lane itself
// (see poll.go). Otherwise a link's pump goroutine, running only while
// calls wait and briefly at each heartbeat, consumes the lane and reads
// the pair's socket, woken by a doorbell on the socket when it sleeps
// (see pump.go). The socket also carries what must not wait for ring
// space (aborts with their cause codes, retractions, room for a blocked
// sender, pings; see frame.go) and tells liveness: a peer's process that
// ends closes its end at once, and the link, after handing over what the
// peer had published, reports the peer lost.
package shm
