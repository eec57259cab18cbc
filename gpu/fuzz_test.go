package gpu_test

// Fuzz targets for what the device layer takes from its callers without
// trusting them: commands (ValidateBatch and each command's Validate),
// batch units (ValidateUnits), dtype names (ParseDType) and scalars.
// Run one with, e.g.:
//
//	go test -run='^$' -fuzz='^FuzzValidateBatch$' -fuzztime=30s ./gpu

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/choreo-gpu/choreo/gpu"
)

// fakeBuffer claims any length without holding memory, so validation can
// be fuzzed with buffers of up to math.MaxInt bytes.
type fakeBuffer struct{ n int }

func (b *fakeBuffer) Len() int          { return b.n }
func (b *fakeBuffer) Kind() gpu.MemKind { return gpu.HostMem }
func (b *fakeBuffer) Bytes() []byte     { return nil }
func (b *fakeBuffer) Free() error       { return nil }
func (b *fakeBuffer) String() string    { return fmt.Sprintf("buf(%d)", b.n) }

// fakeWord is a fence word that is never waited on.
type fakeWord struct{}

func (w *fakeWord) Load() uint32                                        { return 0 }
func (w *fakeWord) Store(uint32)                                        {}
func (w *fakeWord) Reset()                                              {}
func (w *fakeWord) Free()                                               {}
func (w *fakeWord) Wait(context.Context, uint32, <-chan struct{}) error { return nil }

// fuzzReader hands out values from fuzz bytes; once they run out, zeros.
type fuzzReader struct{ b []byte }

func (r *fuzzReader) byte() byte {
	if len(r.b) == 0 {
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

// int gives mostly small values (so that valid commands are common), and
// sometimes extremes or arbitrary 64-bit values.
func (r *fuzzReader) int() int {
	switch k := r.byte(); {
	case k < 200:
		return int(k) - 8
	case k < 210:
		return []int{math.MaxInt, math.MinInt, math.MaxInt - 1, math.MaxInt / 2, math.MaxInt/2 + 1,
			math.MaxInt / 8, math.MaxInt/8 + 1, 1 << 62, 1 << 32, -1 << 32}[k-200]
	default:
		var b [8]byte
		for i := range b {
			b[i] = r.byte()
		}
		return int(binary.LittleEndian.Uint64(b[:]))
	}
}

func bigMul(a, b int) *big.Int { return new(big.Int).Mul(big.NewInt(int64(a)), big.NewInt(int64(b))) }
func bigAdd(a, b int) *big.Int { return new(big.Int).Add(big.NewInt(int64(a)), big.NewInt(int64(b))) }
func bigLE(a *big.Int, b int) bool {
	return a.Cmp(big.NewInt(int64(b))) <= 0
}

// elemsFit: n elements of dt fit in buf (the model of the element checks,
// in exact arithmetic).
func elemsFit(buf gpu.Buffer, dt gpu.DType, n int) bool {
	return buf != nil && dt.Valid() && n >= 0 && bigLE(bigMul(n, dt.Size()), buf.Len())
}

// decodeCommand builds one command from r, with buffers from bufs (index
// len(bufs) is nil). ok is the model's verdict: whether the command is
// valid.
func decodeCommand(r *fuzzReader, bufs []gpu.Buffer) (c gpu.Command, ok bool) {
	pick := func() gpu.Buffer {
		i := int(r.byte()) % (len(bufs) + 1)
		if i == len(bufs) {
			return nil
		}
		return bufs[i]
	}
	dt := gpu.DType(r.byte() % 12) // 0 and 10, 11 are invalid
	if r.byte() == 255 {
		dt = gpu.DType(200)
	}
	switch r.byte() % 8 {
	case 0:
		f := gpu.Fill{Dst: pick(), DType: dt, N: r.int(), Value: gpu.Float(1)}
		return f, elemsFit(f.Dst, f.DType, f.N)
	case 1:
		a := gpu.Arange{Dst: pick(), DType: dt, N: r.int(), Start: gpu.Int(1), Step: gpu.Int(2)}
		return a, elemsFit(a.Dst, a.DType, a.N)
	case 2:
		cp := gpu.Copy{Dst: pick(), Src: pick(), DstOff: r.int(), SrcOff: r.int(), Bytes: r.int()}
		ok := cp.Dst != nil && cp.Src != nil && cp.Bytes >= 0 && cp.DstOff >= 0 && cp.SrcOff >= 0 &&
			bigLE(bigAdd(cp.SrcOff, cp.Bytes), cp.Src.Len()) && bigLE(bigAdd(cp.DstOff, cp.Bytes), cp.Dst.Len())
		if ok && cp.Src == cp.Dst && cp.SrcOff != cp.DstOff && cp.Bytes > 0 &&
			cp.SrcOff < cp.DstOff+cp.Bytes && cp.DstOff < cp.SrcOff+cp.Bytes { // no overflow: both fit in the buffer
			ok = false // overlapping ranges of one buffer
		}
		return cp, ok
	case 3:
		a := gpu.Add{Dst: pick(), A: pick(), B: pick(), DType: dt, N: r.int()}
		return a, elemsFit(a.Dst, dt, a.N) && elemsFit(a.A, dt, a.N) && elemsFit(a.B, dt, a.N)
	case 4:
		s := gpu.Scale{Dst: pick(), Src: pick(), DType: dt, N: r.int(), Factor: gpu.Float(0.5)}
		return s, elemsFit(s.Dst, dt, s.N) && elemsFit(s.Src, dt, s.N)
	case 5:
		if r.byte()%2 == 0 {
			return gpu.WaitValue{Value: uint32(r.int())}, false
		}
		return gpu.WaitValue{Word: &fakeWord{}, Value: uint32(r.int())}, true
	case 6:
		if r.byte()%2 == 0 {
			return gpu.WriteValue{Value: uint32(r.int())}, false
		}
		return gpu.WriteValue{Word: &fakeWord{}, Value: uint32(r.int())}, true
	}
	return nil, false
}

// FuzzValidateBatch: every command's Validate agrees with a model in exact
// arithmetic (so no sum or product overflows into acceptance), rejects
// with ErrBadArgument, never panics; ValidateBatch rejects exactly the
// batches with a bad command and names the first.
func FuzzValidateBatch(f *testing.F) {
	f.Add([]byte{}, int64(16), int64(8))
	f.Add([]byte{0, 0, 3, 0, 0, 4}, int64(16), int64(16))                                 // fill float32 x4
	f.Add([]byte{0, 0, 3, 0, 0, 201}, int64(16), int64(16))                               // fill, N = MinInt
	f.Add([]byte{0, 2, 2, 0, 0, 202, 9, 1}, int64(math.MaxInt), int64(16))                // copy, SrcOff = MaxInt-1
	f.Add([]byte{0, 2, 0, 0, 0, 9, 202, 9}, int64(math.MaxInt), int64(math.MaxInt))       // copy, Bytes near MaxInt
	f.Add([]byte{0, 8, 3, 0, 1, 2, 205}, int64(math.MaxInt), int64(math.MaxInt))          // add int64, N = MaxInt/8+1
	f.Add([]byte{0, 0, 4, 0, 0, 200}, int64(math.MaxInt), int64(math.MaxInt))             // scale, N = MaxInt
	f.Add([]byte{0, 1, 2, 0, 0, 12, 16, 12}, int64(64), int64(64))                        // overlapping copy in one buffer
	f.Add([]byte{0, 10, 0, 0, 0, 4, 0, 0, 7, 5, 1, 0, 6, 0, 9}, int64(64), int64(64))     // invalid dtype, nil command, nil word
	f.Add([]byte{255, 255, 0, 0, 0, 4, 0, 3, 3, 0, 1, 2, 9}, int64(-5), int64(1<<62))     // dtype 200
	f.Add([]byte{0, 3, 3, 2, 2, 2, 210, 0, 0, 0, 0, 0, 0, 0, 64}, int64(1<<62), int64(1)) // arbitrary 64-bit N
	f.Fuzz(func(t *testing.T, prog []byte, len0, len1 int64) {
		bufs := []gpu.Buffer{&fakeBuffer{int(max(len0, 0))}, &fakeBuffer{int(max(len1, 0))}, &fakeBuffer{64}}
		r := &fuzzReader{b: prog}
		var batch []gpu.Command
		firstBad := -1
		for i := 0; len(r.b) > 0 && i < 32; i++ {
			c, ok := decodeCommand(r, bufs)
			batch = append(batch, c)
			if c == nil {
				if firstBad < 0 {
					firstBad = i
				}
				continue
			}
			_ = c.String() // any field values print
			err := c.Validate()
			if ok != (err == nil) {
				t.Fatalf("%#v: Validate = %v, want valid = %v", c, err, ok)
			}
			if err != nil && !errors.Is(err, gpu.ErrBadArgument) {
				t.Fatalf("%#v: Validate = %v, not wrapping ErrBadArgument", c, err)
			}
			if !ok && firstBad < 0 {
				firstBad = i
			}
		}
		err := gpu.ValidateBatch(batch)
		if (err == nil) != (firstBad < 0) {
			t.Fatalf("ValidateBatch = %v, first bad command %d", err, firstBad)
		}
		if err != nil {
			if !errors.Is(err, gpu.ErrBadArgument) {
				t.Fatalf("ValidateBatch = %v, not wrapping ErrBadArgument", err)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("command %d", firstBad)) {
				t.Fatalf("ValidateBatch = %q, does not name command %d", err, firstBad)
			}
		}
	})
}

// FuzzValidateUnits: ends are accepted exactly when they cut a batch of n
// commands into non-empty, consecutive units that cover it.
func FuzzValidateUnits(f *testing.F) {
	f.Add(4, []byte{})
	f.Add(4, []byte{9, 12})            // [0,1) [1,4)
	f.Add(4, []byte{12})               // [0,4)
	f.Add(4, []byte{9, 9, 12})         // empty unit
	f.Add(4, []byte{10, 9, 12})        // out of order
	f.Add(4, []byte{9, 11})            // does not cover
	f.Add(4, []byte{9, 13})            // past the end
	f.Add(0, []byte{8})                // an empty unit in an empty batch
	f.Add(0, []byte{})                 // empty batch, one unit
	f.Add(-1, []byte{})                // a negative length with no units
	f.Add(-1, []byte{7})               // a negative end
	f.Add(math.MaxInt, []byte{200})    // MaxInt
	f.Add(math.MaxInt, []byte{201})    // MinInt
	f.Add(3, []byte{9, 201, 11})       // MinInt in the middle
	f.Add(math.MaxInt, []byte{9, 200}) // two units up to MaxInt
	f.Fuzz(func(t *testing.T, n int, raw []byte) {
		r := &fuzzReader{b: raw}
		var ends []int
		for len(r.b) > 0 && len(ends) < 64 {
			ends = append(ends, r.int())
		}
		err := gpu.ValidateUnits(n, ends)
		// The model: units [0, e0), [e0, e1), ... each non-empty, the last
		// ending at n.
		ok := true
		if len(ends) > 0 {
			lo := 0
			for _, e := range ends {
				if e <= lo || e > n { // empty, backwards, or past the batch
					ok = false
					break
				}
				lo = e
			}
			ok = ok && lo == n
		}
		if ok != (err == nil) {
			t.Fatalf("ValidateUnits(%d, %v) = %v, want valid = %v", n, ends, err, ok)
		}
		if err != nil && !errors.Is(err, gpu.ErrBadArgument) {
			t.Fatalf("ValidateUnits(%d, %v) = %v, not wrapping ErrBadArgument", n, ends, err)
		}
		// UnitErr reads any unit of any error without panicking.
		be := &gpu.BatchError{Units: []gpu.UnitError{{Unit: 1, Command: 2, Err: gpu.ErrClosed}}}
		for u := range min(len(ends), 4) {
			if got := gpu.UnitErr(be, u); (u == 1) != (got != nil) {
				t.Fatalf("UnitErr(%v, %d) = %v", be, u, got)
			}
		}
	})
}

// FuzzParseDType: a name either parses to a valid dtype whose own name
// parses back to it, or fails with ErrBadArgument and Invalid; any DType
// value prints.
func FuzzParseDType(f *testing.F) {
	for _, d := range gpu.DTypes {
		f.Add(d.String(), uint8(d))
	}
	for _, s := range []string{"", "invalid", " F32 ", "bf16", "half", "FP64", "float", "int", "uint16", "dtype(0)", "float32\x00"} {
		f.Add(s, uint8(0))
	}
	f.Add("x", uint8(200))
	f.Fuzz(func(t *testing.T, name string, raw uint8) {
		d, err := gpu.ParseDType(name)
		if err != nil {
			if !errors.Is(err, gpu.ErrBadArgument) || d != gpu.Invalid {
				t.Fatalf("ParseDType(%q) = %v, %v: want Invalid and ErrBadArgument", name, d, err)
			}
		} else {
			if !d.Valid() || d.Size() == 0 {
				t.Fatalf("ParseDType(%q) = %v, not a valid dtype", name, d)
			}
			if back, err := gpu.ParseDType(d.String()); err != nil || back != d {
				t.Fatalf("ParseDType(%q) = %v, whose name %q parses to %v, %v", name, d, d.String(), back, err)
			}
		}
		x := gpu.DType(raw)
		s := x.String()
		if x.Valid() != (x.Size() > 0) {
			t.Fatalf("%s: Valid %v, Size %d", s, x.Valid(), x.Size())
		}
		if back, err := gpu.ParseDType(s); x.Valid() && (err != nil || back != x) {
			t.Fatalf("%s does not parse back: %v %v", s, back, err)
		} else if !x.Valid() && err == nil {
			t.Fatalf("the name %q of invalid dtype %d parses to %v", s, raw, back)
		}
	})
}

// FuzzScalar: the one float-to-integer rule (TruncSat) against exact
// arithmetic, and Bits keeping to the element's width for every dtype.
func FuzzScalar(f *testing.F) {
	for _, v := range []float64{0, -0.5, 1.5, -1.5, 0x1p63, -0x1p63, 0x1p63 - 1024, math.Inf(1), math.Inf(-1), math.NaN(), math.MaxFloat64, 5e-324} {
		f.Add(v, int64(0), false, uint8(gpu.Int32))
	}
	f.Add(0.0, int64(math.MinInt64), true, uint8(gpu.Int8))
	f.Add(0.0, int64(-1), true, uint8(200))
	f.Fuzz(func(t *testing.T, v float64, i int64, isInt bool, dt uint8) {
		got := gpu.TruncSat(v)
		var want int64
		switch {
		case math.IsNaN(v):
			want = 0
		default:
			bf, _ := new(big.Float).SetFloat64(math.Trunc(v)).Int(nil) // exact (Inf: see below)
			switch {
			case math.IsInf(v, 1) || bf != nil && bf.Cmp(big.NewInt(math.MaxInt64)) > 0:
				want = math.MaxInt64
			case math.IsInf(v, -1) || bf != nil && bf.Cmp(big.NewInt(math.MinInt64)) < 0:
				want = math.MinInt64
			default:
				want = bf.Int64()
			}
		}
		if got != want {
			t.Fatalf("TruncSat(%v) = %d, want %d", v, got, want)
		}
		s := gpu.Scalar{F: v, I: i, IsInt: isInt}
		if isInt && s.Int64() != i || !isInt && s.Int64() != got {
			t.Fatalf("%+v: Int64 = %d", s, s.Int64())
		}
		d := gpu.DType(dt)
		bits := s.Bits(d) // no panic for any dtype
		if d.Valid() && d.Size() < 8 && bits>>(8*d.Size()) != 0 {
			t.Fatalf("%+v.Bits(%s) = %#x, wider than the element", s, d, bits)
		}
		if d.Valid() && !d.IsFloat() && int64(bits) != d.Wrap(s.Int64())&int64(1<<(8*d.Size())-1) && d.Size() < 8 {
			t.Fatalf("%+v.Bits(%s) = %#x, want the wrapped integer %#x", s, d, bits, d.Wrap(s.Int64()))
		}
		_ = s.String()
	})
}
