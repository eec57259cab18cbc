package array_test

// Fuzz targets for the shapes, dtypes and bytes arrays take from users:
// New, Full and Wrap with any shape (negative, zero, huge, products that
// overflow) and any dtype value, and Decode of any bytes. Run one with:
//
//	go test -run='^$' -fuzz='^FuzzShape$' -fuzztime=30s ./array

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"math/big"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/gpu/sim"
	"github.com/choreo-gpu/choreo/internal/testenv"
	"github.com/choreo-gpu/choreo/streams"
)

// fuzzMem is the memory of the fuzz targets' devices: every shape larger
// than this is refused, so nothing the fuzzer makes up allocates much.
const fuzzMem = 1 << 20

// fuzzStream is a stream on a small sim device (staged: device memory
// hidden from the CPU, when staged is true).
func fuzzStream(f *testing.F, staged bool) *streams.GPU {
	opts := []sim.Option{sim.WithMemoryBytes(fuzzMem)}
	if staged {
		opts = append(opts, sim.WithStagedDeviceMemory())
	}
	dev, err := sim.New(opts...)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = dev.Close() })
	rt := testenv.Runtime(f)
	return testenv.Stream(f, rt, dev)
}

// decodeShape reads up to 6 dimensions: mostly small ones (a byte each,
// -16..239), and with a marker byte extremes or any 64-bit value.
func decodeShape(raw []byte) []int {
	shape := []int{}
	for len(raw) > 0 && len(shape) < 6 {
		k := raw[0]
		raw = raw[1:]
		switch {
		case k < 250:
			shape = append(shape, int(k)-16)
		case k == 250:
			shape = append(shape, math.MaxInt)
		case k == 251:
			shape = append(shape, math.MinInt)
		case k == 252:
			shape = append(shape, 1<<62)
		case k == 253:
			shape = append(shape, 1<<31)
		case k == 254:
			shape = append(shape, math.MaxInt32*64)
		default:
			var b [8]byte
			n := copy(b[:], raw)
			raw = raw[n:]
			shape = append(shape, int(binary.LittleEndian.Uint64(b[:])))
		}
	}
	return shape
}

func totalAlloc() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

// FuzzShape: New, Full and Wrap accept exactly the valid dtypes with
// shapes of no negative dimension whose element count fits (computed
// exactly: no overflowing product slips through), refuse the rest with
// the right sentinel, never panic, and allocate nothing much for what
// they refuse.
func FuzzShape(f *testing.F) {
	enc := func(dims ...int) []byte {
		var b []byte
		for _, d := range dims {
			b = append(b, 255)
			b = binary.LittleEndian.AppendUint64(b, uint64(d))
		}
		return b
	}
	f.Add(enc(1<<62, 4), uint8(gpu.Float32), false)
	f.Add(enc(4, 1<<62), uint8(gpu.Float32), true)
	f.Add(enc(1<<62, 4, 0), uint8(gpu.Float32), false) // zero elements, however large the rest
	f.Add(enc(0, -1), uint8(gpu.Float32), false)
	f.Add(enc(-1), uint8(gpu.Int8), false)
	f.Add(enc(math.MaxInt), uint8(gpu.Uint8), false)
	f.Add(enc(math.MaxInt/8+1), uint8(gpu.Float64), false) // bytes overflow, elements do not
	f.Add(enc(1<<31, 1<<31, 4), uint8(gpu.Float32), true)
	f.Add(enc(1<<32, 1<<32), uint8(gpu.Int8), false) // the product wraps to 0
	f.Add(enc(3, 1<<63-1, 3), uint8(gpu.Int8), false)
	f.Add(enc(math.MaxInt32*64), uint8(gpu.Int8), false)
	f.Add(enc(math.MaxInt32*64+1), uint8(gpu.Int8), false)
	f.Add([]byte{18, 19, 20}, uint8(gpu.BFloat16), false) // [2 3 4]
	f.Add([]byte{}, uint8(gpu.Float64), true)             // a scalar
	f.Add([]byte{20}, uint8(0), false)                    // invalid dtypes
	f.Add([]byte{20}, uint8(200), true)
	f.Add([]byte{20}, uint8(10), false)
	f.Add([]byte{15}, uint8(200), false) // negative dim and invalid dtype
	streamsByKind := map[bool]*streams.GPU{false: fuzzStream(f, false), true: fuzzStream(f, true)}
	f.Fuzz(func(t *testing.T, raw []byte, dtRaw uint8, staged bool) {
		s := streamsByKind[staged]
		shape := decodeShape(raw)
		dt := gpu.DType(dtRaw)
		// The model, in exact arithmetic.
		negative := slices.ContainsFunc(shape, func(d int) bool { return d < 0 })
		count := big.NewInt(1)
		for _, d := range shape {
			count.Mul(count, big.NewInt(int64(d)))
		}
		var nbytes *big.Int
		if dt.Valid() {
			nbytes = new(big.Int).Mul(count, big.NewInt(int64(dt.Size())))
		}
		fits := !negative && dt.Valid() && nbytes.Cmp(big.NewInt(fuzzMem)) <= 0
		check := func(op string, a *array.Array, err error, allocated uint64) {
			t.Helper()
			switch {
			case !dt.Valid():
				if err == nil || !errors.Is(err, array.ErrDType) && !(negative && errors.Is(err, array.ErrShape)) {
					t.Fatalf("%s(%v, dtype %d) = %v, want an error wrapping ErrDType", op, shape, dtRaw, err)
				}
			case negative:
				if !errors.Is(err, array.ErrShape) {
					t.Fatalf("%s(%v, %s) = %v, want an error wrapping ErrShape", op, shape, dt, err)
				}
			case fits:
				if err != nil {
					t.Fatalf("%s(%v, %s): %v, want an array of %v elements", op, shape, dt, err, count)
				}
				if a.Size() != int(count.Int64()) || a.NBytes() != int(nbytes.Int64()) || !slices.Equal(a.Shape(), shape) || a.DType() != dt {
					t.Fatalf("%s(%v, %s) = %v: Size %d NBytes %d, want %v elements", op, shape, dt, a, a.Size(), a.NBytes(), count)
				}
			default: // too large for the array layer or for the device
				if err == nil {
					t.Fatalf("%s(%v, %s) = %v, want an error: %v elements, %v bytes on a device of %d", op, shape, dt, a, count, nbytes, fuzzMem)
				}
				if !errors.Is(err, array.ErrTooLarge) && !errors.Is(err, gpu.ErrOutOfMemory) && !errors.Is(err, array.ErrShape) {
					t.Fatalf("%s(%v, %s) = %v, want ErrTooLarge or ErrOutOfMemory", op, shape, dt, err)
				}
			}
			if err != nil && allocated > 1<<20 {
				t.Fatalf("%s(%v, %s) refused (%v) after allocating %d bytes", op, shape, dt, err, allocated)
			}
			if err == nil {
				if err := a.Free(); err != nil {
					t.Fatalf("free: %v", err)
				}
				idle(t, s) // the memory is back before the next allocation
			}
		}
		before := totalAlloc()
		a, err := array.New(s, shape, dt)
		check("New", a, err, totalAlloc()-before)

		before = totalAlloc()
		a, err = array.Full(s, shape, dt, 1)
		check("Full", a, err, totalAlloc()-before)

		// Wrap over a 64-byte buffer: it must also refuse what does not fit.
		host, err := array.New(s, []int{64}, gpu.Uint8)
		if err != nil {
			t.Fatal(err)
		}
		before = totalAlloc()
		w, err := array.Wrap(s, shape, dt, host.Memory(), streams.Event{})
		allocated := totalAlloc() - before
		switch {
		case !dt.Valid() || negative:
			check("Wrap", w, err, allocated)
		case nbytes.Cmp(big.NewInt(64)) <= 0:
			if err != nil || w.Size() != int(count.Int64()) {
				t.Fatalf("Wrap(%v, %s) over 64 bytes: %v %v", shape, dt, w, err)
			}
		default:
			if err == nil {
				t.Fatalf("Wrap(%v, %s) = %v over 64 bytes, want an error", shape, dt, w)
			}
			if allocated > 1<<20 {
				t.Fatalf("Wrap(%v, %s) refused after allocating %d bytes", shape, dt, allocated)
			}
		}
		_ = host.Free()
		idle(t, s)
	})
}

// idle waits until everything enqueued on s has completed (a Free's
// release included).
func idle(t *testing.T, s *streams.GPU) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Last().Wait(ctx); err != nil {
		t.Fatalf("stream: %v", err)
	}
}

// FuzzDecode: Decode widens any bytes of any valid dtype exactly as the
// element accessors read them, refuses short input with ErrBadArgument
// and invalid dtypes with ErrDType, and never panics.
func FuzzDecode(f *testing.F) {
	for _, d := range gpu.DTypes {
		f.Add(uint8(d), []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, uint16(2))
	}
	f.Add(uint8(gpu.Float32), []byte{0, 0, 0xc0, 0x7f}, uint16(1)) // NaN
	f.Add(uint8(gpu.Float64), []byte{1, 2, 3}, uint16(1))          // short
	f.Add(uint8(0), []byte{1, 2, 3}, uint16(1))
	f.Add(uint8(200), []byte{}, uint16(7))
	f.Add(uint8(gpu.Int8), []byte{}, uint16(0))
	f.Fuzz(func(t *testing.T, dtRaw uint8, b []byte, n uint16) {
		dt := gpu.DType(dtRaw)
		out := make([]float64, int(n)%4097)
		err := array.Decode(dt, b, out)
		switch {
		case !dt.Valid():
			if len(out) > 0 && !errors.Is(err, array.ErrDType) && !errors.Is(err, gpu.ErrBadArgument) {
				t.Fatalf("Decode(dtype %d, %d bytes, %d) = %v, want ErrDType", dtRaw, len(b), len(out), err)
			}
			if len(out) == 0 && err != nil && !errors.Is(err, array.ErrDType) {
				t.Fatalf("Decode(dtype %d, no elements) = %v", dtRaw, err)
			}
		case len(b) < len(out)*dt.Size():
			if !errors.Is(err, gpu.ErrBadArgument) {
				t.Fatalf("Decode(%s, %d bytes, %d) = %v, want ErrBadArgument", dt, len(b), len(out), err)
			}
		case err != nil:
			t.Fatalf("Decode(%s, %d bytes, %d) = %v", dt, len(b), len(out), err)
		default:
			for i, v := range out {
				var want float64
				if dt.IsFloat() {
					want = dt.Float(b, i)
				} else {
					want = float64(dt.Int(b, i))
				}
				if math.Float64bits(v) != math.Float64bits(want) && !(math.IsNaN(v) && math.IsNaN(want)) {
					t.Fatalf("Decode(%s): element %d = %v, want %v", dt, i, v, want)
				}
			}
		}
	})
}
