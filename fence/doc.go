// Package fence joins a GPU stream and a communication stream: a GPU-side
// update and wait on the GPU stream meet a CPU-side wait and update in a
// task on the comm stream. One fence actor per runtime (the Manager, a
// service of the runtime: fence.For(rt)) owns every fence word and hands
// out one *Fence per choreography. It imports actors, streams and gpu.
//
//	fences, err := fence.For(rt)
//	f, err := fences.New(dev, fence.WithDeadline(time.Now().Add(time.Minute)))
//	f.UpdateGPU(s, x)   // GPU: once x is written, raise the GPU word
//	f.WaitGPU(s, out)   // GPU: hold later work until the CPU word is reached
//	go task: f.Wait(ctx); ... collective ...; f.Update(); f.Release()
//
// A fence word is an unsigned 32-bit value starting at 0; a wait for v
// passes once the word is at least v. A fence has two words, each with one
// writer: the GPU raises the GPU word (read by CPU waits) and the CPU raises
// the CPU word (read by GPU waits), so each only grows and no writer lowers
// a released fence. Each side counts its own calls (waits and updates
// alike) and uses the count as the value, so the k-th call on either side
// means the same value k. Release stores the stop value 0x7FFFFFFF into the
// CPU word at most once, so every pending and future GPU wait passes, and
// wakes every CPU wait with an error. A release by failure first marks the
// outputs the fence guards as failed, so reading them returns the error
// instead of wrong data. A word goes back to the pool only when no queued
// GPU command names it any more. No wait is unbounded: a watchdog releases
// fences whose deadline passed, and a fence handle dropped without Release
// is released by a cleanup (runtime.AddCleanup).
//
// Who owns what. A fence's state (counts, guarded outputs, the release) is
// owned by the fence itself, under its lock: whichever goroutine ends the
// choreography releases it directly, because a hop to an actor there would
// sit on every collective's critical path and buy nothing. The
// manager's actor owns the words: only it allocates, resets and frees them,
// and it runs the watchdog on ticks it schedules itself. New takes a ready
// pair from a channel the actor keeps filled, so it needs no round trip;
// released words go back on a list the actor drains on its next message.
package fence
