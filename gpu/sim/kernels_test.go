package sim_test

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/choreo-gpu/choreo/gpu"
)

// TestFloatToIntSaturates: float -> integer conversion truncates toward
// zero and saturates at the int64 limits before wrapping; NaN gives 0.
func TestFloatToIntSaturates(t *testing.T) {
	dev := newDev(t)
	q := must[gpu.Queue](t)(dev.NewQueue())
	buf := must[gpu.Buffer](t)(dev.Alloc(8, gpu.DeviceMem))
	cases := []struct {
		dt   gpu.DType
		v    gpu.Scalar
		want int64
	}{
		{gpu.Int64, gpu.Float(1e30), math.MaxInt64},
		{gpu.Int64, gpu.Float(-1e30), math.MinInt64},
		{gpu.Int64, gpu.Float(math.NaN()), 0},
		{gpu.Int64, gpu.Float(math.Inf(1)), math.MaxInt64},
		{gpu.Int32, gpu.Float(1e30), -1},  // int32(MaxInt64)
		{gpu.Int8, gpu.Float(-1e30), 0},   // int8(MinInt64)
		{gpu.Int16, gpu.Float(-2.9), -2},  // toward zero
		{gpu.Uint8, gpu.Float(-1.5), 255}, // -1 wrapped
		{gpu.Int64, gpu.Int(math.MinInt64), math.MinInt64},
	}
	for _, c := range cases {
		done := make(chan error, 1)
		if err := q.Submit([]gpu.Command{gpu.Fill{Dst: buf, DType: gpu.Int64, N: 1, Value: gpu.Int(0)},
			gpu.Fill{Dst: buf, DType: c.dt, N: 1, Value: c.v}}, func(err error) { done <- err }); err != nil {
			t.Fatal(err)
		}
		if err := waitDone(t, done); err != nil {
			t.Fatal(err)
		}
		b := buf.Bytes()
		var got int64
		switch c.dt {
		case gpu.Int8:
			got = int64(int8(b[0]))
		case gpu.Uint8:
			got = int64(b[0])
		case gpu.Int16:
			got = int64(int16(binary.LittleEndian.Uint16(b)))
		case gpu.Int32:
			got = int64(int32(binary.LittleEndian.Uint32(b)))
		case gpu.Int64:
			got = int64(binary.LittleEndian.Uint64(b))
		}
		if got != c.want {
			t.Errorf("fill %v with %v: got %d, want %d", c.dt, c.v, got, c.want)
		}
	}
}
