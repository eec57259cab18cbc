// Package streams holds the two kinds of stream actor of choreo (R12):
//
//   - GPU: one actor per {device, queue}. It turns the commands it is sent
//     into batches for the device queue, in message order, and reports each
//     command's completion (or error) through its callback and through
//     Events that arrays and fences wait on.
//   - Comm: the communication stream, a CPU actor that runs tasks one at a
//     time, in the order they were submitted. A task that fails or panics
//     becomes an error passed to its done callback (R14); the stream goes on.
//
// Both are protoactor actors supervised by a strategy that turns a panic
// into an error on the message being processed and resumes the actor.
// They live on an actors.Runtime (which closes them); the runtime's
// default comm stream is streams.DefaultComm(rt). The package imports
// actors, gpu and internal/spin.
package streams
