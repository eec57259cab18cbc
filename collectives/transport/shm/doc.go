// Package shm is choreo's data plane between processes of one host: the
// links of the message layer (collectives/transport/msg) over shared
// memory, registered as the carrier "shm" and preferred there. A group's
// Join uses it through that registration; ConnectLinks returns a rank's
// links to its peers directly.
//
// Each pair of ranks shares one region: an anonymous memory file (memfd)
// that the lower rank creates, seals against resizing and hands to the
// higher one over the pair's unix socket, once each side has proved the
// group's secret (see handshake.go). Nothing is named under /dev/shm and
// the sockets' names are abstract, so a crashed run leaves nothing behind.
//
// A region holds two lanes, one per direction, each a ring of slots and a
// ring of control entries (see region.go); it costs about 2 x Slots x
// SlotSize bytes (32 MiB with the defaults for up to 8 ranks; less in
// larger groups, see defaultGeometry), committed when it is made, and a
// rank of n maps n-1 of them. Small messages go eagerly in one slot; larger ones wait for their
// Recv and go through the slots, or are read once from the sender's
// memory where that is allowed and pays (see cma.go). A waiting call
// polls the incoming lane itself (poll.go); otherwise a pump goroutine
// reads it (pump.go). The socket carries what must not wait for ring
// space (see frame.go) and tells liveness: a peer's process that ends
// closes its end at once.
package shm
