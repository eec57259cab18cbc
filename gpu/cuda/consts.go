package cuda

// Priority is the backend's rank for gpu.Open("auto"): above sim (0).
const Priority = 100

// WriteEnv names the environment variable that picks the WriteValue
// implementation for devices opened through the registry: "memop"
// (cuStreamWriteValue32, the default) or "kernel" (the monotonic-store
// kernel).
const WriteEnv = "CHOREO_CUDA_WRITE"
