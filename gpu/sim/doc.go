// Package sim is choreo's embedded software GPU: a gpu backend that runs
// every queue on its own goroutine over ordinary Go memory. It needs no
// hardware, registers itself as "sim" with the lowest priority, so
// gpu.Open("auto") falls back to it, and it is what CI runs.
//
// Model:
//   - A Device is self-contained: every Open (or New) returns a fresh device
//     that shares nothing with the others, so several runtimes may live in
//     one process.
//   - Buffers of both kinds are Go memory that the CPU and the "GPU" share;
//     Bytes returns the slice for DeviceMem and HostMem alike
//     (Properties.HostVisibleDeviceMem is true). Buffers are 64-byte aligned,
//     so kernels reinterpret them as []float64, []int64 and so on.
//   - A Queue runs submitted batches strictly in submission order, and the
//     commands of a batch in slice order, one goroutine at a time: mostly
//     its own worker goroutine, but ready work runs where it is. A Submit
//     that finds the queue idle runs a batch of fence waits and writes and
//     small copies (at most 64 KiB) itself, leaving its done to the
//     worker; a batch that reaches a WaitValue whose word is not there yet
//     is suspended on the word without holding any goroutine, and the
//     write that satisfies it resumes it: on the writer's goroutine, done
//     included, where the write is a StoreInline and what is left of the
//     batch is that small, else on the worker. Submit never blocks for
//     long: the FIFO is unbounded. A failing command stops its unit (the
//     whole batch unless SubmitUnits split it); done gets its error,
//     wrapped as "sim: <op>: command <i>: ...", or a *gpu.BatchError of
//     the failed units.
//   - Done callbacks are called in submission order, on the queue's worker
//     or on a StoreInline's goroutine: they must not block for long, nor
//     Close their own queue or device (Close waits for the worker, so it
//     would stall until its deadline plus the drain bound). A done that
//     panics is recovered silently.
//   - Buffers and words stay allocated until Free or Device.Close, as on a
//     real GPU. The device enforces its memory size (gpu.ErrOutOfMemory),
//     which by default is what this machine can give the process (see
//     HostMemoryBytes), so an allocation too large for the host fails with
//     that error before any Go memory is taken, instead of killing the
//     process.
//   - A FenceWord is an atomic uint32 with a wake-up: every write (Store,
//     StoreInline, WriteValue, Reset, Free) wakes the CPU waiters on that
//     word and resumes the queues suspended on it. CPU waiters spin
//     briefly before they park, which keeps a CPU->GPU->CPU fence round
//     trip in the microseconds. StoreInline (the fence package's CPU-side
//     update) is Store that runs what it unblocks on the caller's
//     goroutine, as above: its caller must hold no lock that a done
//     callback takes.
//
// Kernel arithmetic rules (every backend must follow the same ones; the
// conformance suite gpu/gputest checks them):
//   - float32 and float64 compute in their own precision; Arange computes
//     Start + i*Step in float64 and rounds once to the element type.
//   - float16 and bfloat16 compute in float32 (Arange in float64) and round
//     once to 16 bits, to nearest even.
//   - Integer types wrap around in two's complement.
//   - Fill and Arange on an integer type with integer Scalars are exact
//     (int64 arithmetic, then wrapped to the element width). If any Scalar
//     is a float, the value (Start + i*Step for Arange) is computed in
//     float64 and converted by truncation toward zero, saturating at the
//     int64 limits (NaN gives 0), then wrapped to the element width.
//   - Scale on an integer type with an integer factor multiplies exactly
//     (wrapping); with a float factor it computes float64(x)*f and converts
//     it as above (truncation toward zero, saturation, wrap).
//   - Scalars given to a float type are converted with Scalar.Float64.
package sim
