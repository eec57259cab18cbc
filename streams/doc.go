// Package streams holds choreo's two kinds of stream (R12):
//
//   - GPU: one in-order queue on one device. The actor is the backend's
//     queue (its FIFO and worker own the order); the GPU handle is a thin
//     sender that numbers each Enqueue and submits it straight to the
//     queue, and reports each command's completion (or error) through its
//     callback and through Events that arrays and fences wait on.
//   - Comm: the communication stream, a protoactor actor that runs CPU
//     tasks one at a time, in the order they were submitted. A task that
//     fails or panics becomes an error passed to its done callback (R14);
//     the stream goes on.
//
// They live on an actors.Runtime (which closes them); the runtime's default
// comm stream is streams.DefaultComm(rt). The package imports actors, gpu
// and internal/spin.
//
// Goroutine hand-offs on a 2-rank all-reduce of a ready input on a
// host-visible device, from the call to the caller's Wait returning (each
// is a park and a wake-up where no processor is spare to spin):
//
//  1. caller -> rank's comm stream goroutine (the task is posted)
//  2. the first rank's task -> the last one's (the transport's rendezvous)
//  3. comm task's fence update -> the queue's worker (its GPU-side wait passes)
//  4. queue worker -> caller (the output's Event completes)
//
// The GPU side's wait reaches the queue's worker on a path of its own
// (caller -> worker), not on the critical path. Before the GPU stream
// became a thin sender it took two: caller -> the stream actor's
// dispatcher -> the worker.
package streams
