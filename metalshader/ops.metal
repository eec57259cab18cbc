// ops.metal: choreo's element-wise op kernels (fill, arange, copy, add,
// scale) for every dtype Metal can store.
//
// Binding layout, shared with fence.metal and the Go side (metalshader.Bind*):
//   buffer(0) dst          buffer(1) src / a        buffer(2) b
//   buffer(3) Params       buffer(4) the batch's status word
// One thread per element; a thread with i >= p.n does nothing, and so does
// every thread once the batch's status word is nonzero (an earlier command
// of the batch failed or the queue is closing).
//
// Values:
// - fill and copy move raw element bits, so they serve every dtype,
//   float64 included (p.a holds the fill value's bits, made on the CPU).
// - float32, float16 and bfloat16 compute in float32 and round once to
//   the element type (round to nearest even). bfloat16 is stored as its
//   16 bits (ushort) and converted by hand, so no MSL 3.1 bfloat is needed.
//   Float Params (start, step, factor) are float32 bits in the low 32 bits.
// - Integer dtypes compute on the unsigned type of the same width: two's
//   complement add and multiply wrap identically for signed and unsigned,
//   and the 64-bit Params (start, step, factor) are used modulo 2^64.
// - Metal has no 64-bit float type: float64 arange/add/scale are not here
//   (the backend runs them on the CPU, on the shared memory).

#include <metal_stdlib>
using namespace metal;

struct Params {
  ulong a;
  ulong b;
  uint n;
  uint pad;
};

// Float element kinds: storage type plus load/store through float32.
struct f32_kind {
  typedef float storage;
  static float load(float v) { return v; }
  static float store(float f) { return f; }
};

struct f16_kind {
  typedef half storage;
  static float load(half v) { return float(v); }
  static half store(float f) { return half(f); }
};

struct bf16_kind {
  typedef ushort storage;
  static float load(ushort v) { return as_type<float>(uint(v) << 16); }
  static ushort store(float f) {
    uint u = as_type<uint>(f);
    if (isnan(f)) {
      return ushort((u >> 16) | 0x40u); // stay a quiet NaN
    }
    u += 0x7FFFu + ((u >> 16) & 1u); // round to nearest even
    return ushort(u >> 16);
  }
};

inline float param_float(ulong bits) { return as_type<float>(uint(bits)); }

#define CHOREO_FILL(NAME, U)                                                 \
  [[kernel]] void fill_##NAME(                                               \
      device U* dst [[buffer(0)]], constant Params& p [[buffer(3)]],         \
      device const uint* status [[buffer(4)]],                               \
      uint i [[thread_position_in_grid]]) {                                  \
    if (i >= p.n || status[0] != 0u) {                                       \
      return;                                                                \
    }                                                                        \
    dst[i] = U(p.a);                                                         \
  }

// copy: dst[p.b + i] = src[p.a + i]; offsets and count in elements.
#define CHOREO_COPY(NAME, U)                                                 \
  [[kernel]] void copy_##NAME(                                               \
      device U* dst [[buffer(0)]], device const U* src [[buffer(1)]],        \
      constant Params& p [[buffer(3)]],                                      \
      device const uint* status [[buffer(4)]],                               \
      uint i [[thread_position_in_grid]]) {                                  \
    if (i >= p.n || status[0] != 0u) {                                       \
      return;                                                                \
    }                                                                        \
    dst[p.b + i] = src[p.a + i];                                             \
  }

#define CHOREO_FLOAT_OPS(NAME, K)                                            \
  [[kernel]] void arange_##NAME(                                             \
      device K::storage* dst [[buffer(0)]], constant Params& p [[buffer(3)]], \
      device const uint* status [[buffer(4)]],                               \
      uint i [[thread_position_in_grid]]) {                                  \
    if (i >= p.n || status[0] != 0u) {                                       \
      return;                                                                \
    }                                                                        \
    dst[i] = K::store(fma(float(i), param_float(p.b), param_float(p.a)));    \
  }                                                                          \
  [[kernel]] void add_##NAME(                                                \
      device K::storage* dst [[buffer(0)]],                                  \
      device const K::storage* a [[buffer(1)]],                              \
      device const K::storage* b [[buffer(2)]],                              \
      constant Params& p [[buffer(3)]],                                      \
      device const uint* status [[buffer(4)]],                               \
      uint i [[thread_position_in_grid]]) {                                  \
    if (i >= p.n || status[0] != 0u) {                                       \
      return;                                                                \
    }                                                                        \
    dst[i] = K::store(K::load(a[i]) + K::load(b[i]));                        \
  }                                                                          \
  [[kernel]] void scale_##NAME(                                              \
      device K::storage* dst [[buffer(0)]],                                  \
      device const K::storage* src [[buffer(1)]],                            \
      constant Params& p [[buffer(3)]],                                      \
      device const uint* status [[buffer(4)]],                               \
      uint i [[thread_position_in_grid]]) {                                  \
    if (i >= p.n || status[0] != 0u) {                                       \
      return;                                                                \
    }                                                                        \
    dst[i] = K::store(K::load(src[i]) * param_float(p.a));                   \
  }

#define CHOREO_INT_OPS(NAME, U)                                              \
  [[kernel]] void arange_##NAME(                                             \
      device U* dst [[buffer(0)]], constant Params& p [[buffer(3)]],         \
      device const uint* status [[buffer(4)]],                               \
      uint i [[thread_position_in_grid]]) {                                  \
    if (i >= p.n || status[0] != 0u) {                                       \
      return;                                                                \
    }                                                                        \
    dst[i] = U(p.a + ulong(i) * p.b);                                        \
  }                                                                          \
  [[kernel]] void add_##NAME(                                                \
      device U* dst [[buffer(0)]], device const U* a [[buffer(1)]],          \
      device const U* b [[buffer(2)]], constant Params& p [[buffer(3)]],     \
      device const uint* status [[buffer(4)]],                               \
      uint i [[thread_position_in_grid]]) {                                  \
    if (i >= p.n || status[0] != 0u) {                                       \
      return;                                                                \
    }                                                                        \
    dst[i] = U(ulong(a[i]) + ulong(b[i]));                                   \
  }                                                                          \
  [[kernel]] void scale_##NAME(                                              \
      device U* dst [[buffer(0)]], device const U* src [[buffer(1)]],        \
      constant Params& p [[buffer(3)]],                                      \
      device const uint* status [[buffer(4)]],                               \
      uint i [[thread_position_in_grid]]) {                                  \
    if (i >= p.n || status[0] != 0u) {                                       \
      return;                                                                \
    }                                                                        \
    dst[i] = U(ulong(src[i]) * p.a);                                         \
  }

// stream_order does nothing. The backend dispatches it (one thread) after
// an MTLSharedEvent wait so that the next command buffer on the queue,
// which binds the same hazard-tracked status buffer, cannot start before
// the wait has passed.
[[kernel]] void stream_order(device const uint* status [[buffer(4)]]) {}

CHOREO_FILL(float32, uint)
CHOREO_FILL(float64, ulong)
CHOREO_FILL(float16, ushort)
CHOREO_FILL(bfloat16, ushort)
CHOREO_FILL(int8, uchar)
CHOREO_FILL(int16, ushort)
CHOREO_FILL(int32, uint)
CHOREO_FILL(int64, ulong)
CHOREO_FILL(uint8, uchar)

CHOREO_COPY(float32, uint)
CHOREO_COPY(float64, ulong)
CHOREO_COPY(float16, ushort)
CHOREO_COPY(bfloat16, ushort)
CHOREO_COPY(int8, uchar)
CHOREO_COPY(int16, ushort)
CHOREO_COPY(int32, uint)
CHOREO_COPY(int64, ulong)
CHOREO_COPY(uint8, uchar)

CHOREO_FLOAT_OPS(float32, f32_kind)
CHOREO_FLOAT_OPS(float16, f16_kind)
CHOREO_FLOAT_OPS(bfloat16, bf16_kind)

CHOREO_INT_OPS(int8, uchar)
CHOREO_INT_OPS(int16, ushort)
CHOREO_INT_OPS(int32, uint)
CHOREO_INT_OPS(int64, ulong)
CHOREO_INT_OPS(uint8, uchar)
