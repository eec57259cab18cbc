// Package cluster is a rank's control plane across processes: the ranks
// of a group meet at a rendezvous over protoactor remoting, learn each
// other's addresses, and watch each other for the rest of the group's life.
//
// Each rank's runtime runs one Node, an actor reachable on its remote
// under the well-known name Name. Rank 0's Node hosts the rendezvous: the
// other ranks say Hello (their rank, world size, run, control and data
// addresses) until it answers with a Roster, sent once every rank is there
// (and, before that, with the ranks seen so far, so that a rank that gives
// up can name the missing ones). The Roster carries the group id that
// every rank's data plane and Group use.
//
// After the rendezvous every Node watches every peer's Node: when a peer's
// endpoint terminates (its process died, its network went away) the
// watcher learns it from protoactor's remote watch and reports the peer
// lost, so that the data plane fails what waits on it at once instead of
// after its heartbeat timeout.
//
// Messages are the protobuf types of package wire; none is on a
// collective's hot path (collectives carry their own aborts on the data
// plane). Layering: cluster imports actors and wire, and nothing of
// collectives; collectives.Join composes it with the TCP data plane.
package cluster
