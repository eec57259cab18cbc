// Package test holds choreo's integration tests: real clusters of demo
// processes on loopback (`demo node check ...`, started by `demo launch`
// or by the tests themselves acting as the launcher), checked from the
// outside:
//   - every op correct on the check matrix, on 2 and 4 processes, over TCP
//     and shared memory: the exchange ops (all-to-all even and uneven with
//     zero counts, gather, scatter, reduce to a root, a batched ring) too;
//   - a rank killed with SIGKILL in the middle of a 64 MiB all-reduce
//     leaves every survivor with ErrPeerLost, promptly, exiting by itself
//     with no fence left live;
//   - mismatched shapes across processes (an all-reduce, an all-to-all's
//     counts) fail on every rank with ErrShapeMismatch;
//   - strangers on the control plane (garbage bytes, a wrong secret, a
//     recorded control connection replayed, a rank of another run) are
//     refused while a cluster runs, and its collectives go on unaffected;
//   - failures at start fail fast and named: a wrong secret (authentication
//     failed), ranks asking for different transports (ErrMismatch naming
//     each), a rank restarted in the rendezvous (accepted), a rank lost
//     between the roster and the data plane (ErrPeerLost naming it);
//   - a rank paused 3 s (SIGSTOP, then SIGCONT) resumes in its group; one
//     paused 20 s with a 10 s peer timeout is lost on every other rank
//     within 11 s (with CHOREO_TEST_FULL=1);
//   - the README's program under choreorun: 4 ranks, two launchers as two
//     nodes, two hosts over an ssh stand-in, many ranks without a bind
//     error; from torchrun's, Open MPI's and Slurm's variables; a rank
//     failing at start ends the launch in one line of at most 200
//     characters; Ctrl-C leaves no rank;
//   - two hosts of two ranks each (CHOREO_HOST_ID): the matrix over shared
//     memory inside each host and TCP between them, a rank killed on one
//     host and one paused on the other;
//   - an elastic soak (`choreorun --elastic -n 4` of `demo node run
//     --elastic`, over TCP and shared memory) whose rank 2 is SIGKILLed:
//     the survivors shrink to epoch 1 of ranks 0, 1 and 3, every check
//     passes and the launch exits 0; with CHOREO_TEST_FULL=1, a rank paused
//     past the peer timeout is evicted, says so and exits 4 while the
//     others go on;
//   - the same soak under `choreorun --elastic --max-restarts 1`: the
//     launcher starts rank 2 again, the group grows back to 4 ranks at
//     epoch 2 and the restarted rank takes up the soak at the others'
//     step; its twins, a loss not restarted (the survivors ask to grow
//     and never do) and a soak without loss (no ask).
//
// The frame and handshake decoders of the data plane are fuzzed in
// collectives/transport/tcp (FuzzFrame, FuzzHandshake, FuzzInbound), run
// for a bounded time by .ci/run.
//
// The tests build the demo once (with the race detector when the tests
// run with it) and need nothing else; CHOREO_TEST_DEMO names a demo built
// elsewhere instead (for the tests that need only the demo, on a machine
// without Go). With CHOREO_BACKEND=cuda, TestMatrixOnGPU runs the matrix
// on 2 processes sharing the GPU, host-staged and on the device path.
package test
