//go:build !amd64 || purego

package reduce

// float32Into is the kernel behind Float32Into: pure Go on this build.
func float32Into(op Op, dst, src []float32) { intoGo(op, dst, src) }

// float64Into is the kernel behind Float64Into: pure Go on this build.
func float64Into(op Op, dst, src []float64) { intoGo(op, dst, src) }

// float32To sets dst = a op b: pure Go on this build.
func float32To(op Op, dst, a, b []float32) { toGo(op, dst, a, b) }

// float64To sets dst = a op b: pure Go on this build.
func float64To(op Op, dst, a, b []float64) { toGo(op, dst, a, b) }

// kernelName names the float kernels in use, for tests and benchmarks.
func kernelName() string { return "go" }
