package nccl

// ForceByValue makes InitRank take ncclCommInitRank (the id passed by
// value) even where ncclCommInitRankScalable exists: for the GPU tests,
// which live in package nccl_test because they drive the CUDA backend,
// which imports this package.
func ForceByValue(o *options) { o.forceByValue = true }
