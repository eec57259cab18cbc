// Package choreotest is choreo's actor-level test kit, for choreo's own
// actors and for users' actors that drive its streams.
//
// A Recorder wraps a real gpu.Device (the embedded sim, sim-staged, cuda)
// and records every batch each of its queues receives while passing it on,
// so everything still runs. A Probe is an actor on a runtime's ActorSystem
// that records the messages it receives, read back with bounded Next and
// Expect. A Watch observes ranks' GPU streams, comm streams and collective
// traces and returns each rank's Plan: the GPU-side steps ("copy-d2h+update",
// "wait", "copy-h2d"), the comm tasks and the fence steps, compared with
// Diff so a failure shows want against got per rank.
//
// The kit keeps no global state: several runtimes and recorders may live in
// one test process. Test files that use it must be external test packages
// (package x_test): choreotest imports streams, fence and collectives.
package choreotest
