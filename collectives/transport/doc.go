// Package transport is the data plane of choreo's collectives: it moves
// tagged byte messages between the ranks of a group.
//
// A Transport is one rank's endpoint. Messages are matched by (source,
// destination, Tag): collectives on a group are told apart by the group id
// and the sequence number their call order gives them, the steps of one
// collective by Tag.Step. The interface assumes nothing about where the
// ranks live: NewLocal connects ranks of one process through a hub (a
// rendezvous that copies each byte once, straight from the sender's slice
// into the receiver's); between processes the message layer (package msg)
// implements the same contract over a link per peer, carried by shared
// memory (package shm) or TCP (package tcp). transporttest.Run is the
// conformance suite every implementation passes.
//
// Transports whose ranks share one address space may also implement
// PeerAccess, which lets an algorithm read its peers' buffers in place.
//
// A group that goes on with other members (a new epoch, under a new group
// id) leaves its old id behind: a Retirer's Retire(group) fails that
// group's calls with ErrStale and drops or refuses its messages, so that
// a late message of the old epoch is never received in the new one. Every
// transport here is a Retirer (Traced keeps it). A rank that its peers
// dropped for its silence, a process stopped past the peer timeout, is
// told so by the message layer and fails every later call with
// ErrEvicted, instead of writing into a group that went on without it.
package transport
