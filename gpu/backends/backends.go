// Package backends registers every backend choreo has, so that
// gpu.Open("auto") picks the best one the machine can run: CUDA on a
// machine with an NVIDIA driver, Metal on a Mac, the embedded sim
// everywhere. Import it for its side effect, as database/sql drivers are:
//
//	import _ "github.com/choreo-gpu/choreo/gpu/backends"
//
// A program that wants fewer imports names the backends it wants instead
// (gpu/sim, gpu/cuda, gpu/metal).
package backends

import (
	_ "github.com/choreo-gpu/choreo/gpu/cuda"  // "cuda" (Linux; elsewhere it reports unavailable)
	_ "github.com/choreo-gpu/choreo/gpu/metal" // "metal" (darwin; elsewhere it reports unavailable)
	_ "github.com/choreo-gpu/choreo/gpu/sim"   // "sim" and "sim-staged", the embedded default
)
