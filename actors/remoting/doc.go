// Package remoting is the control plane between choreo runtimes in
// separate processes: protoactor's remoting over gRPC, attached to an
// actors.Runtime as one of its services (Start, Of) and closed with it,
// after the runtime's other services. Only programs whose ranks live in
// separate processes need it (collectives/cluster starts it for Join);
// in-process groups do not, and a program that does not import it links
// no gRPC.
//
// Every connection starts with a mutual challenge-response on the group's
// secret (fresh nonces both ways, completed before HTTP/2 starts, so a
// stranger costs a fixed small buffer for at most 2 s and reaches
// nothing) and then carries AES-256-GCM records with per-connection keys,
// heartbeats, and a silence bound (Config.PeerTimeout). A peer's messages
// may speak only for the address its handshake proved: its senders, its
// Terminated and Watch messages; other actor system messages and
// PoisonPill from a peer are refused. A dial refused for the secret fails
// with ErrAuth (Remote.AuthFailures).
//
// One remoting runtime per process (see Remote).
//
//	rt, err := actors.NewRuntime(actors.WithLogger(log))
//	if err != nil { ... }
//	defer rt.Close()
//	rem, err := remoting.Start(rt, remoting.Config{Addr: "10.0.0.5:7000", Secret: secret})
//	if err != nil { ... }
//	pid := actor.NewPID(peerAddr, "name") // reach a peer's actor
package remoting
