// Package cluster makes groups whose ranks live in separate processes, on
// one host or several: Join, from a JoinConfig that FromEnv reads from the
// variables a launcher set (choreorun's, torchrun's, Open MPI's, Slurm's).
//
//	rt, err := actors.NewRuntime()
//	g, err := cluster.Join(ctx, rt, cluster.FromEnv()) // this process's rank
//	y, err := g.AllReduce(s, x, collectives.Sum)       // a collectives.Group as any other
//
// Join starts the runtime's control plane (actors/remoting: protoactor
// remoting over gRPC), meets the other ranks at a rendezvous, links the
// data plane to every peer (each pair by the best carrier both have:
// shared memory inside a host, TCP across hosts; JoinConfig.Transport),
// and makes the group with collectives.NewJoined. Only programs that
// import this package link gRPC and the carriers.
//
// The ranks of a group meet at a rendezvous over remoting, learn each
// other's addresses, and watch each other for the rest of the group's
// life. Each rank's runtime runs one Node, an actor reachable on its
// remote under the well-known name Name. Rank 0's Node hosts the
// rendezvous: the other ranks say Hello (their rank, world size, run,
// control and data addresses) until it answers with a Roster, sent once
// every rank is there (and, before that, with the ranks seen so far, so
// that a rank that gives up can name the missing ones). The Roster
// carries the group id that every rank's data plane and Group use.
//
// The rendezvous fails fast where waiting cannot help: a rank whose dial
// to rank 0 fails to authenticate (the secrets differ) fails within
// helloEvery with ErrAuth; on rank 0, a rank whose control connection ends before the roster is complete is dropped
// (its process died), and a new process may take its rank; a rank that
// rank 0 answered fails with ErrPeerLost when rank 0's connection ends,
// or with rank 0's own reason (ErrTimeout when its deadline passed) when
// rank 0 gives up. Each Hello carries the data plane the rank asks for,
// and the Roster every rank's.
//
// From the roster on every Node follows every peer. A peer's control
// connection ending or its watch ending is a sign, not proof (a loaded
// host drops a live peer's watch or connect at times): the peer's address
// is dialled, and the peer is lost when the dial is refused (its process
// is gone), when it said it leaves, or when such signs go on for the peer
// timeout while its address still accepts. When a peer is lost, rank 0 also
// tells the others (wire.Lost), so that a rank not yet connected to the
// lost one learns it as soon as rank 0 does. Watch reports each loss once,
// those seen before it too, so that the data plane fails what waits on
// the peer at once instead of after its own silence timeout.
//
// A group Join made grows back (collectives.Group.Grow) with processes
// that take the ranks it lost: such a process calls Join with the lost
// rank's configuration, and rank 0, finding the rank held already, keeps
// its hello as one waiting to rejoin (answering with the ranks there, as
// during the rendezvous). The members' Grow sends rank 0 a GrowAsk (the
// group's epoch, the ask's number, its members and the address of a data
// plane prepared for the grown group); once every member asked, rank 0
// decides for them all: when a process waits for every rank they lack, it
// answers them (GrowAnswer) and the waiting processes with the roster of
// the whole world at the next epoch, a fresh group id and every rank's new
// data address; otherwise with none, and the group stays as it is. The
// Nodes then watch the grown roster, forgetting what they knew of the
// processes it replaced, so that a late sign of a lost process never
// counts against the one that took its rank.
//
// Each Node's actor is supervised: a panic while it handles a message
// restarts it with its state (the roster, the peers watched, lost and
// suspected, Watch's callback), which lives in the Node, and it watches
// its peers again, so that a restart neither loses a peer nor misses a
// loss. Past five restarts within ten seconds the Node fails instead
// (Node.Err): every peer not lost yet is reported lost with an error that
// names the panic and wraps ErrPeerLost and ErrEvicted (the rank is out of
// its group), and the peers are told that this rank leaves.
//
// Messages are the protobuf types of package wire; none is on a
// collective's hot path (collectives carry their own aborts on the data
// plane). Layering: cluster imports collectives, actors/remoting, wire and
// the carriers (collectives/transport/tcp, collectives/transport/shm);
// nothing below it imports cluster.
package cluster
