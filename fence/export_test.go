package fence

import "github.com/choreo-gpu/choreo/gpu"

// Words exposes a fence's words to the external tests (R5, R6, R9).
func Words(f *Fence) (gpuWord, cpuWord gpu.FenceWord) { return f.st.words.gpu, f.st.words.cpu }
