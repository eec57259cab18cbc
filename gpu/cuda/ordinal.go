package cuda

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/localrank"
)

// DeviceEnv names the environment variable that picks the GPU a device
// opened through the registry uses: its ordinal among the GPUs the driver
// sees (after CUDA_VISIBLE_DEVICES), an integer >= 0. Unset, the GPU is the
// process's local rank modulo the GPUs seen (see Driver).
const DeviceEnv = "CHOREO_CUDA_DEVICE"

// chooseOrdinal is the GPU Driver.Open opens, from the variables get
// returns and the number of GPUs the driver sees, which count reports
// (called only when needed):
//   - CHOREO_CUDA_DEVICE, when set: that ordinal. A value that is not an
//     integer >= 0, or not below the count, is an error wrapping
//     gpu.ErrBadArgument;
//   - else the local rank (internal/localrank: CHOREO_LOCAL_RANK,
//     LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID,
//     SLURM_LOCALID) modulo the count, so that a host's ranks spread over
//     its GPUs and share them when there are more ranks than GPUs;
//   - else 0.
//
// With no GPU seen (a count of 0) it returns the ordinal unchecked (0 for
// a local rank), for New to report the device unavailable.
func chooseOrdinal(get func(string) string, count func() (int, error)) (int, error) {
	if s := strings.TrimSpace(get(DeviceEnv)); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("cuda: %s=%q: want a GPU ordinal, an integer >= 0: %w", DeviceEnv, get(DeviceEnv), gpu.ErrBadArgument)
		}
		c, err := count()
		if err != nil {
			return 0, err
		}
		if c > 0 && n >= c {
			return 0, fmt.Errorf("cuda: %s=%d: the driver sees %d GPU(s), ordinals 0 to %d: %w", DeviceEnv, n, c, c-1, gpu.ErrBadArgument)
		}
		return n, nil
	}
	lr, _, ok := localrank.Lookup(get)
	if !ok {
		return 0, nil
	}
	c, err := count()
	if err != nil {
		return 0, err
	}
	if c < 1 {
		return 0, nil
	}
	return lr % c, nil
}
