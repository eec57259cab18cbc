package cuda

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/gpu"
)

// TestTimeCommands: a 64 MiB device copy timed on the GPU's clock takes
// a plausible time (more than the copy engine's peak allows to be zero,
// less than a second), a copy twice as large takes longer than the one,
// and bad arguments are refused.
func TestTimeCommands(t *testing.T) {
	d := openDev(t, Options{})
	const n = 64 << 20
	var bufs [2]gpu.Buffer
	for i := range bufs {
		b, err := d.Alloc(2*n, gpu.DeviceMem)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Free()
		bufs[i] = b
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	one, err := d.TimeCommands(ctx, []gpu.Command{gpu.Copy{Dst: bufs[0], Src: bufs[1], Bytes: n}}, 5)
	if err != nil {
		t.Fatal(err)
	}
	two, err := d.TimeCommands(ctx, []gpu.Command{gpu.Copy{Dst: bufs[0], Src: bufs[1], Bytes: 2 * n}}, 5)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("64 MiB copy %v (%.0f GB/s read+written), 128 MiB %v", one, 2*n/one.Seconds()/1e9, two)
	if one <= 0 || one > time.Second || two <= one {
		t.Fatalf("64 MiB copy %v, 128 MiB %v: not plausible", one, two)
	}
	if _, err := d.TimeCommands(ctx, nil, 1); !errors.Is(err, gpu.ErrBadArgument) {
		t.Fatalf("no commands: %v, want ErrBadArgument", err)
	}
}
