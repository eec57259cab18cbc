// Package array is choreo's n-dimensional array: a shape, a dtype, a buffer
// on a device, a readiness Event on the GPU stream that produces it, and a
// sticky error. Ops (Full, Arange, FromSlice, Add, Scale, Copy) are encoded
// on a GPU stream and return at once; Wait and ToSlice block, bounded by a
// context, and return the producer's error if it failed: wrong data
// is never returned silently.
package array
