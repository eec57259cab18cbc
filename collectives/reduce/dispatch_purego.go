//go:build !amd64 || purego

package reduce

// float32Into is the kernel behind Float32Into: pure Go on this build.
func float32Into(op Op, dst, src []float32) { intoGo(op, dst, src) }

// float64Into is the kernel behind Float64Into: pure Go on this build.
func float64Into(op Op, dst, src []float64) { intoGo(op, dst, src) }

// kernelName names the float kernels in use, for tests and benchmarks.
func kernelName() string { return "go" }
