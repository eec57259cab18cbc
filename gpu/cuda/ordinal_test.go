package cuda

import (
	"errors"
	"strings"
	"testing"

	"github.com/choreo-gpu/choreo/gpu"
)

// gpus is a device count of n; asked tells whether it was called.
func gpus(n int, asked *bool) func() (int, error) {
	return func() (int, error) {
		*asked = true
		return n, nil
	}
}

func env(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func TestChooseOrdinal(t *testing.T) {
	for _, c := range []struct {
		name  string
		env   map[string]string
		count int
		want  int
		asks  bool // the count is needed
	}{
		{"nothing set", nil, 4, 0, false},
		{"one GPU, local rank 3", map[string]string{"CHOREO_LOCAL_RANK": "3"}, 1, 0, true},
		{"four GPUs, local rank 5", map[string]string{"CHOREO_LOCAL_RANK": "5"}, 4, 1, true},
		{"four GPUs, local rank 2", map[string]string{"CHOREO_LOCAL_RANK": "2"}, 4, 2, true},
		{"torchrun", map[string]string{"LOCAL_RANK": "3"}, 2, 1, true},
		{"Open MPI", map[string]string{"OMPI_COMM_WORLD_LOCAL_RANK": "7"}, 8, 7, true},
		{"MPICH", map[string]string{"MPI_LOCALRANKID": "9"}, 8, 1, true},
		{"srun", map[string]string{"SLURM_LOCALID": "1"}, 1, 0, true},
		{"malformed local rank skipped", map[string]string{"CHOREO_LOCAL_RANK": "x", "LOCAL_RANK": "3"}, 2, 1, true},
		{"only malformed local ranks", map[string]string{"CHOREO_LOCAL_RANK": "-1"}, 2, 0, false},
		{"no GPU seen", map[string]string{"CHOREO_LOCAL_RANK": "3"}, 0, 0, true},
		{"device overrides the local rank", map[string]string{DeviceEnv: "2", "CHOREO_LOCAL_RANK": "1"}, 4, 2, true},
		{"device 0", map[string]string{DeviceEnv: " 0 ", "LOCAL_RANK": "3"}, 4, 0, true},
		{"device, no GPU seen: left to New", map[string]string{DeviceEnv: "1"}, 0, 1, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var asked bool
			got, err := chooseOrdinal(env(c.env), gpus(c.count, &asked))
			if err != nil || got != c.want {
				t.Errorf("chooseOrdinal = %d, %v; want %d", got, err, c.want)
			}
			if asked != c.asks {
				t.Errorf("count asked: %v, want %v", asked, c.asks)
			}
		})
	}
}

func TestChooseOrdinalRefusesABadDevice(t *testing.T) {
	for _, c := range []struct {
		value string
		count int
		says  string
	}{
		{"one", 4, `CHOREO_CUDA_DEVICE="one": want a GPU ordinal, an integer >= 0`},
		{"-1", 4, `CHOREO_CUDA_DEVICE="-1": want a GPU ordinal, an integer >= 0`},
		{"1.0", 4, `want a GPU ordinal`},
		{"4", 4, "CHOREO_CUDA_DEVICE=4: the driver sees 4 GPU(s), ordinals 0 to 3"},
		{"1", 1, "CHOREO_CUDA_DEVICE=1: the driver sees 1 GPU(s), ordinals 0 to 0"},
	} {
		var asked bool
		_, err := chooseOrdinal(env(map[string]string{DeviceEnv: c.value, "CHOREO_LOCAL_RANK": "0"}), gpus(c.count, &asked))
		if !errors.Is(err, gpu.ErrBadArgument) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s=%q with %d GPUs: %v; want an error wrapping gpu.ErrBadArgument saying %q", DeviceEnv, c.value, c.count, err, c.says)
		}
	}
}

func TestChooseOrdinalPassesOnTheCountsError(t *testing.T) {
	fail := errors.New("no driver")
	count := func() (int, error) { return 0, fail }
	for _, kv := range []map[string]string{{DeviceEnv: "1"}, {"SLURM_LOCALID": "1"}} {
		if _, err := chooseOrdinal(env(kv), count); !errors.Is(err, fail) {
			t.Errorf("%v: %v, want the count's error", kv, err)
		}
	}
	if n, err := chooseOrdinal(env(nil), count); err != nil || n != 0 {
		t.Errorf("nothing set: %d, %v; want 0 without asking the driver", n, err)
	}
}
