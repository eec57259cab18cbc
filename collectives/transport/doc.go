// Package transport is the data plane of choreo's collectives: it moves
// tagged byte messages between the ranks of a group.
//
// A Transport is one rank's endpoint. Messages are matched by (source,
// destination, Tag); collectives on a group are told apart by the group id
// and the sequence number their call order gives them (DESIGN R18), and the
// steps of one collective by Tag.Step. The interface assumes nothing about
// where the ranks live: NewLocal connects ranks of one process through a Hub
// (a rendezvous that copies each byte once, straight from the sender's slice
// into the receiver's), and a network transport (framed TCP connections per
// peer pair) implements the same contract. transporttest.Run is the
// conformance suite every implementation passes.
//
// Transports whose ranks share one address space may also implement
// PeerAccess, which lets an algorithm read its peers' buffers in place.
package transport
