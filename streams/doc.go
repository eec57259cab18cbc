// Package streams holds choreo's two kinds of stream, each an actor that
// runs its commands in the order they were given:
//
//   - GPU: one in-order queue on one device. The actor is the backend's
//     queue (its FIFO and worker own the order); the GPU handle is a thin
//     sender that numbers each Enqueue and hands it straight to the queue
//     (posted where the queue is a gpu.Poster, as CUDA's is: the queue's
//     own goroutine makes the driver calls, never the caller), and
//     reports each command's completion (or error) through its callback
//     and through Events that arrays and fences wait on.
//   - Comm: the communication stream, a protoactor actor that runs CPU
//     tasks one at a time, in the order they were submitted. A task that
//     fails or panics becomes an error passed to its done callback;
//     the stream goes on.
//
// They live on an actors.Runtime (which closes them); the runtime's default
// comm stream is streams.DefaultComm(rt). The package imports actors, gpu
// and internal/spin.
//
// Goroutine hand-offs on a 2-rank all-reduce of a ready input, from the
// call to the caller's Wait returning (each is a park and a wake-up where
// no processor is spare to spin); collectives' trace counts them per call
// ("hand-offs"):
//
//  1. caller -> rank's comm stream goroutine (the task is posted)
//  2. comm stream goroutine -> caller (the output's Event completes)
//
// Between them the ranks' tasks meet in the transport (the collective
// itself, not this rank's work changing hands). On the sim, the GPU-side
// wait costs no hand-off of its own: Enqueue, finding the queue idle,
// suspends the wait on its fence word at once, and the comm task's fence
// update (a StoreInline) runs the rest of that batch and its completion on
// the comm stream's goroutine, which so completes the output's Event
// itself. Under CUDA the GPU sees the store itself, and the queue's
// poller, which sees the GPU's completion mark, completes the Event: one
// hand-off more.
//
// The GPU side reaches the queue on a path of its own, not on the critical
// path: per rank one Enqueue for the input side (the fence update, after
// the staging copy where there is one) and one for the output side (the
// fence wait, then the copy back where there is one), each a hand-off caller -> the queue's worker (under CUDA its
// issuer, which polls briefly for the next batch before it parks). The
// caller only appends and wakes: the driver calls (about 12 us a batch on
// an H200) run on each rank's issuer, in parallel, while the caller goes
// on to the next rank's call.
package streams
