package gpu

// Poster is implemented by a Queue whose Submit may put a batch on the
// device on the caller's goroutine: the CUDA queue does so when it is idle,
// which is the shortest path for a caller that submits one batch and waits
// for it, but makes the caller pay the driver calls (microseconds per
// batch). PostUnits is SubmitUnits that never does: it checks the batch,
// queues it and wakes the queue's own goroutine, which issues it; the
// caller pays a lock, an append and a wake-up. Everything else is as
// SubmitUnits says (errors returned at once, done called exactly once, the
// order of submission kept across Submit, SubmitUnits and PostUnits calls).
//
// A sender that hands work on and goes on without waiting for it (a GPU
// stream) posts where the queue is a Poster; a queue that never issues on
// the caller's goroutine need not implement it.
type Poster interface {
	PostUnits(batch []Command, ends []int, done func(error)) error
}
