// Package layers holds the module's intended import graph and the test
// that keeps the code to it. Imports point one way, base first; a package
// may import only packages of a lower layer:
//
//	0  internal/errs, internal/spin, internal/pool, gpu/half   leaves
//	0  internal/gate                            handshake slots a flood of strangers cannot hold
//	0  internal/awake                           a heartbeat that does not blame its peers for its own stalls
//	0  internal/localrank                       the local rank from the launchers' variables
//	0  wire                                     the control plane's protobuf messages
//	0  trace                                    per-rank timelines in the Chrome trace format
//	0  metrics                                  OpenTelemetry instruments and the Prometheus endpoint
//	1  gpu                                      the device interfaces, the command set
//	1  launch                                   starts a program's ranks and watches them (cmd/choreorun, demo launch)
//	2  metalshader                              Metal kernel sources
//	2  gpu/cuda/nccl                            NCCL through purego (the CUDA backend's collective engine)
//	3  gpu/sim, gpu/cuda, gpu/metal, gpu/gputest, internal/darwincheck
//	4  actors, gpu/backends                     the base: ActorSystem, zap, services, signals; every backend
//	5  streams, actors/remoting                 GPU and comm stream actors; the control plane's remoting (gRPC)
//	6  fence                                    the fence manager (a runtime service) and Fence
//	7  array                                    arrays on streams
//	8  collectives/reduce, collectives/transport
//	9  collectives/transport/msg                the message layer over per-peer links; carriers register here
//	9  collectives/transport/mesh               one authenticated full mesh of connections
//	10 collectives/algo, collectives/transport/transporttest
//	10 collectives/transport/tcp                links over TCP (any two hosts)
//	10 collectives/transport/shm                links through shared memory (ranks of one host)
//	11 collectives                              Group, the ops as choreographies
//	12 choreotest, collectives/cluster          the actor-level test kit; Join: groups across processes (rendezvous, data plane, peer watch)
//	13 internal/testenv                         the tests' set-up (on the kit)
//	13 bench/internal/rig                       what the benchmark harnesses share: rank processes, tables
//	14 cmd/..., bench/..., test                 programs, benchmarks, the integration tests
//
// Services a runtime needs per system (the fence manager, the default comm
// stream) attach to actors.Runtime through actors.Service, so the base
// imports none of them. The test fails when an import points sideways or
// up, and when a package is not placed in a layer. Only actors/remoting and
// what imports it (collectives/cluster) reach gRPC; the test fails when an
// in-process package does.
package layers
