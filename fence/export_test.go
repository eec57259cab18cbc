package fence

import "github.com/choreo-gpu/choreo/gpu"

// Words exposes a fence's words to the external tests, which check
// the stop value, that each word only grows, and when words are reused.
func Words(f *Fence) (gpuWord, cpuWord gpu.FenceWord) { return f.st.words.gpu, f.st.words.cpu }
