// Package collectives runs collective operations as choreographies between
// a rank's GPU stream, its communication stream and one fence:
//
//	groups, err := collectives.Local(rt, 4)          // 4 in-process ranks
//	y, err := groups[r].AllReduce(s, x, collectives.Sum)
//	vals, err := array.ToSlice[float32](ctx, y)      // the data, or the collective's error
//
// A group whose ranks live in separate processes (one rank each, on one
// host or several) is made by package collectives/cluster's Join, which
// brings the control plane (gRPC) and the data plane's carriers; this
// package imports neither, so an in-process program links none of them.
//
// Every op returns at once with its output array. On the GPU stream it puts
// [update_gpu(input) if the input has a producer event] and wait_gpu(output);
// on the rank's own communication stream it queues a task that runs
// [wait() if flagged] -> the collective (collectives/algo over a
// collectives/transport) -> update(). The flag is decided once, at launch,
// and drives both sides. A failure anywhere releases the fence by failure,
// so the output carries the error (never wrong data) and the GPU stream
// goes on.
//
// Blocking, and where errors appear, op by op:
//   - AllReduce, AllGather, ReduceScatter, Broadcast, AllToAll, AllToAllV,
//     Gather, Scatter, Reduce and Recv return at once with their output
//     and never wait for a peer. An error at the call means nothing was
//     started on this rank (a nil or ill-shaped input, a closed group,
//     ErrTooLarge, ErrWouldDeadlock; the peers' matching calls fail too);
//     every other failure (a peer's mismatch, a timeout, a lost peer)
//     comes on the output: its Wait, ToSlice or any array computed from
//     it, and on Group.Wait.
//   - Send returns at once; having no output, its failures come on
//     Group.Wait.
//   - Barrier and Split block until every rank has called them (Barrier
//     bounded by ctx and the group's timeout, Split by the group's
//     timeout) and return their errors at the call.
//   - Group.Wait blocks until this rank's started collectives have
//     finished (bounded by ctx) and returns their failures since the last
//     Wait.
//
// A lost peer fails the group's collectives with ErrPeerLost (and, once a
// survivor has shrunk, the others' with ErrStale); the survivors go on by
// calling Group.Shrink, which agrees with the other
// survivors on who is left and returns a group of them at the next epoch
// (Epoch, Members); the old group's calls then fail with ErrStale or
// ErrClosed, and a rank the survivors left out gets ErrEvicted.
//
// Collectives on a group are matched across ranks by call order: each call
// takes the group's next sequence number, and the algorithms check that
// every rank called the same op with the same shape; a mismatch fails every
// rank with a clear error, within the deadline. Ranks of one process
// (Local) also compare their calls when they make them: a call whose input
// is not ready yet (staged device memory, an input still being computed,
// the device path) fails as soon as every rank has called it and they
// disagree, not once its input is ready behind a busy GPU stream. Send and
// Recv are matched per pair of ranks, in call order.
//
// Where things are: ops.go (the public ops, each a plan), ops_exchange.go
// (all-to-all, gather, scatter, reduce), batch.go (point-to-point ops
// started together), choreography.go (launch: sequence numbers, checks, the
// order of the steps), call.go (a call's resources: output, staging,
// fences), earlymatch.go (the early match of in-process ranks' calls),
// gpuside.go (the GPU stream's commands), commtask.go (the comm
// stream's task), datapath.go (the data paths and what auto chooses),
// devicecall.go, devicep2p.go, deviceshare.go, devicemeet.go and
// deviceipc.go (the device-resident data path: kernels that read the
// peers' device buffers, which ranks learn in a window in process or over
// messages and CUDA IPC across processes), engine.go (the engine path: a
// vendor library such as NCCL moves the bytes), ledger.go (refusing GPU
// stream orders that would deadlock), split.go (Split and subgroups),
// shrink.go (Shrink: the survivors' group at the next epoch), survivors.go
// (how the survivors agree on who is left), hosts.go (WithHosts: the
// ranks' hosts, for the algorithms in levels), join.go (NewJoined: the
// group cluster.Join makes over its data plane), staging.go (pinned
// staging buffers), report.go (the failure report). The package imports
// the layers below it: actors, streams, fence, array, collectives/algo and
// collectives/transport (see internal/layers).
package collectives
