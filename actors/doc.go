// Package actors holds choreo's Runtime: the protoactor ActorSystem with
// its log bridged into zap, the fence actor (fence.Manager) and the default
// communication stream, both started with it, and an orderly, bounded
// Close: release every live fence (so no GPU wait is left hanging), close
// streams in reverse order of creation, stop the fence actor.
//
//	rt, err := actors.NewRuntime(actors.WithLogger(log), actors.WithSignalHandler())
//	defer rt.Close()
package actors
