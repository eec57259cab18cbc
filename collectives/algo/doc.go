// Package algo holds choreo's collective algorithms on host memory: they run
// on CPU-visible byte slices over a transport.Transport, from a rank's
// communication-stream task.
//
// Every collective starts with a match (match.go): the ranks compare their
// descriptors (kind, dtype, count, op, root, algorithm, chunking), so a rank
// that called something else at the same Seq makes every rank fail with
// ErrMismatch (ErrShapeMismatch for count/dtype), within the deadline,
// and nothing hangs. Over PeerAccess transports the match is the Expose barrier
// that also publishes the buffers; over message transports it is a
// dissemination of (min, max) descriptor over ceil(log2 n) rounds.
//
// Algorithms:
//   - ring (ring.go): bandwidth-optimal reduce-scatter + all-gather, both
//     ring directions (each block is split in two halves, one per
//     direction), chunked and pipelined (a receiver, a reducer and a sender
//     per direction; several chunks in flight).
//   - recursive doubling (doubling.go): latency-optimal all-reduce for small
//     payloads; non-power-of-two sizes fold the extra ranks in first.
//   - direct (direct.go): for PeerAccess transports; each rank reduces its
//     block straight from all ranks' inputs in one pass (a cache-sized
//     chunk at a time) and writes it into every rank's output; no byte is
//     copied twice. Small payloads: every rank reduces the whole vector.
//   - binomial tree (tree.go): broadcast over messages, chunked.
//   - hierarchical (hier.go, hier_*.go): two levels over the group's
//     Topology (collectives.WithHosts), inside each host and across hosts:
//     all-reduce (reduce-scatter inside, all-reduce of each slice across,
//     all-gather inside, large vectors pipelined in parts, two parts at a
//     time across hosts), all-gather, reduce-scatter and broadcast. Auto
//     takes it on message transports where the topology spans hosts with
//     as many ranks on every host, and several on some: for all-reduce
//     above DefaultHierBytes, for all-gather and reduce-scatter (whose
//     levels are not pipelined) above DefaultHierGatherBytes, or above
//     Options.HierBytes where it is set; never for broadcast (ranks of a
//     host numbered together already make the flat tree cross to each
//     host about once); WithAlgorithm(Hierarchical) forces it.
//
// float16 and bfloat16 reductions round once per element: the direct
// algorithm reduces all inputs at once (reduce.Many), and the message
// algorithms run on a float32 widening of the input and round at the end
// (wide.go), at twice the bytes on the wire.
//
// A rank whose collective fails (its error, its deadline) aborts the
// collective on the transport, so that the other ranks fail at once with
// transport.ErrAborted naming it, instead of waiting for their deadline.
package algo
