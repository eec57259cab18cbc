// Package shm is choreo's data plane between processes of one host: a
// transport.Transport whose ranks exchange messages through shared memory
// (DESIGN section 3), beside tcp's for ranks on other hosts.
//
// Each pair of ranks shares one region: an anonymous memory file (memfd)
// that the lower rank creates, seals against resizing and hands to the
// higher one over the pair's unix socket, once each side has proved the
// group's secret (HMAC, as tcp's handshake). Nothing is ever named under
// /dev/shm: the kernel frees a region with its last mapping, so a closed
// group, a dead rank and a crashed run leave nothing behind, and the
// rendezvous sockets have abstract names that vanish with their process.
//
// A region holds two lanes, one per direction. A lane is a ring of
// fixed-size slots (head and tail counters, each written by one side) and
// a small ring of control entries. Small messages go eagerly in one slot
// while the receiver's window has room; larger ones are announced (RTS),
// wait for the receiver's Recv (a clear-to-send in the control ring), and
// are copied from the sender's slice into slots and from the slots
// straight into the receiver's buffer. Messages of Config.CMAMin bytes or
// more are copied once instead, where the host lets a rank read its
// peer's memory (probed at Connect): the RTS carries the sender's
// address, the receiver reads the bytes straight from the sender's slice
// into its buffer (process_vm_readv) and answers when done, and the Send
// returns then (see cma.go). Messages are matched by Tag, in order per
// tag; different tags never wait for each other.
//
// A call that waits for its peer (a Recv, a rendezvous Send's
// clear-to-send) first polls the incoming lane itself, consuming what
// arrives on its own goroutine, for an adaptive budget where the host has
// a CPU per rank (see poll.go); while it polls, the lane's polling word
// tells the sender to ring no doorbell. A rank's pump goroutine for a peer
// (running only while calls are in flight, and briefly at each heartbeat)
// consumes the incoming lane otherwise and reads the pair's socket. It
// sets its lane's sleep word and blocks on the socket; a sender that sees
// the word (and no poller) rings a doorbell there; a parked call also
// looks at the lane on a timer. The socket also carries what must not wait for ring
// space (aborts with their cause codes, retractions, room for a blocked
// sender, pings) and tells liveness: a peer's process that ends closes its
// end at once, and survivors fail its operations with
// transport.ErrPeerLost after delivering what it had published; a silent
// peer is lost after PeerTimeout.
package shm
