// Package actors is choreo's base layer: the Runtime, one per node, with
// its protoactor ActorSystem (protoactor's slog bridged into zap),
// supervision defaults, signal handling, and the services attached to it.
// It imports nothing of choreo (see internal/layers for the whole graph):
// the layers above attach their per-runtime services here with Service
// (the fence manager: fence.For; the default comm stream:
// streams.DefaultComm), and their streams with Adopt.
//
// Remoting, the control plane between runtimes of separate processes,
// lives in package actors/remoting, which attaches to a runtime as one of
// its services; a program whose ranks all live in one process never
// imports it (nor gRPC).
//
// Close is orderly and bounded: every Releaser service lets its GPU waits
// pass first (no GPU wait is left hanging), then the adopted streams close
// newest first, then the services (remoting last).
//
//	rt, err := actors.NewRuntime(actors.WithLogger(log), actors.WithSignalHandler())
//	defer rt.Close()
package actors
