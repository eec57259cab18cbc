// Package actors is choreo's base layer: the Runtime, one per node, with
// its protoactor ActorSystem (protoactor's slog bridged into zap),
// supervision defaults, signal handling, and the services attached to it.
// It imports nothing of choreo (see internal/layers for the whole graph):
// the layers above attach their per-runtime services here with Service
// (the fence manager: fence.For; the default comm stream:
// streams.DefaultComm), and their streams with Adopt.
//
// Remoting (WithRemote, StartRemote; one remoting runtime per process) is
// the control plane between runtimes: protoactor over gRPC, on connections
// that each start with a mutual challenge-response on the group's secret
// (fresh nonces both ways, completed before HTTP/2 starts, so a stranger
// costs a fixed small buffer for at most 2 s and reaches nothing) and then
// carry AES-256-GCM records with per-connection keys, heartbeats, and a
// silence bound (RemoteConfig.PeerTimeout). A peer's messages may speak
// only for the address its handshake proved: its senders, its Terminated
// and Watch messages; other actor system messages and PoisonPill from a
// peer are refused. A dial refused for the secret fails with ErrAuth
// (Remote.AuthFailures).
//
// Close is orderly and bounded: every Releaser service lets its GPU waits
// pass first (no GPU wait is left hanging), then the adopted streams close
// newest first, then the services.
//
//	rt, err := actors.NewRuntime(actors.WithLogger(log), actors.WithSignalHandler())
//	defer rt.Close()
package actors
