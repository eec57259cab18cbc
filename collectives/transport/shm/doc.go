// Package shm is choreo's data plane between processes of one host: a
// msg.Link per pair of ranks over shared memory, under
// the message layer of package msg (matching, eager and rendezvous
// sending, aborts, liveness), beside tcp's links for ranks on other
// hosts. Connect links this rank to every other one and returns a
// Transport: a msg.Endpoint over those links.
//
// Each pair of ranks shares one region: an anonymous memory file (memfd)
// that the lower rank creates, seals against resizing and hands to the
// higher one over the pair's unix socket, once each side has proved the
// group's secret (package mesh's handshake). Nothing is ever named under
// /dev/shm: the kernel frees a region with its last mapping, so a closed
// group, a dead rank and a crashed run leave nothing behind, and the
// rendezvous sockets have abstract names that vanish with their process.
//
// A region holds two lanes, one per direction. A lane is a ring of
// fixed-size slots (head and tail counters, each written by one side) and
// a small ring of control entries. A region costs about 2 x Slots x
// SlotSize bytes (32 MiB with the defaults, 16 slots of 1 MiB, touched as
// the ring turns), and a rank of n maps n-1 of them; the variables
// CHOREO_SHM_SLOT_SIZE (bytes, with an optional K or M) and
// CHOREO_SHM_SLOTS override Config's geometry, so that runs can compare
// rings without a rebuild. Small messages go eagerly in one slot while the
// receiver's window has room; larger ones are announced (RTS), wait for
// the receiver's Recv (a clear-to-send in the control ring), and are
// copied from the sender's slice into slots and from the slots straight
// into the receiver's buffer. Messages of Config.CMAMin bytes or more are
// copied once instead, where the host lets a rank read its peer's memory
// (probed at Connect): the RTS carries the sender's address, the receiver
// reads the bytes straight from the sender's slice into its buffer
// (process_vm_readv) and answers when done, and the Send returns then (see
// cma.go). By default a rank reads so only where that pays (cmaPays).
// Measured on a 2-core VM (2026-12-03; process_vm_readv of 4 KiB pages
// there moves about 4 GB/s, memcpy 16-19 GB/s), one way between two
// processes (BenchmarkSingleCopy, single copy forced against the slots; 2
// runs): 1 MiB 5.4-7.6 GB/s against 14.8-19.2, 16 MiB 3.4-4.9 against
// 5.3-8.9, 64 MiB 3.3-4.3 against 4.9-9.0; all-reduce of 64 MiB over
// bench/peers (busbw over Open MPI's vader, which reads by
// process_vm_readv too; medians of 3 rounds, 4 runs each): 2 ranks
// 1.17-1.38x read by address against 1.45-1.59x through the slots, 4 ranks
// 1.26-1.38x against 1.05-1.25x, with slots of 256 KiB. With slots of 1
// MiB (the default since; a ring chunk of 1 MiB in one slot and fewer
// hand-offs) the slots won at four ranks too (medians of 4-6 rounds, 4
// sessions: 1.21-1.50x against 1.18-1.29x; 16 MiB 0.85-1.12x against
// 0.69-0.94x), and two ranks gained (64 MiB 1.50-1.75x against 1.19-1.52x,
// 16 MiB 0.97-1.13x against 0.75-1.07x, in 4 of 5 sessions; 4 KiB and 64
// KiB unchanged). So there every rank keeps to the slots. Messages are
// matched by Tag, in order per tag; different tags never wait for each
// other.
//
// A call that waits for its peer (a Recv, a rendezvous Send's answer)
// first polls the incoming lane itself, consuming what arrives on its own
// goroutine, for an adaptive budget where the host has a CPU per rank (see
// poll.go); while it polls, the lane's polling word tells the sender to
// ring no doorbell. A link's pump goroutine (running only while calls
// wait, and briefly at each heartbeat) consumes the incoming lane
// otherwise and reads the pair's socket. It sets its lane's sleep word and
// blocks on the socket; a sender that sees the word (and no poller) rings
// a doorbell there; a parked call also looks at the lane on a timer. While
// the message layer holds a message offered by address, an idle link's
// pump stays, reading only the socket, so that a sender's withdrawal of
// the offer is answered at once. The
// socket also carries what must not wait for ring space (aborts with their
// cause codes, retractions, room for a blocked sender, pings) and tells
// liveness: a peer's process that ends closes its end at once, and the
// link, after handing over what the peer had published, reports the peer
// lost; the message layer judges a silent one. A retraction that
// overtakes its announce on the way (the socket against the ring) drops
// the announce still in the ring, so the message layer sees an announce
// and its retraction in order.
package shm
