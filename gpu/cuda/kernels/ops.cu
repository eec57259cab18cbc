// choreo's CUDA kernels: fill, arange, add and scale for every dtype of
// gpu.DTypes, and the monotonic fence-word store. Compiled to PTX by
// gen.sh (nvcc -ptx -arch=compute_90), embedded into the Go package and
// loaded with cuModuleLoadData; every kernel is extern "C" so that
// cuModuleGetFunction finds it by the plain name choreo_<op>_<dtype>.
//
// Arithmetic follows the rules every backend shares (see gpu/sim's
// package doc):
//   - float32/float64 compute in their own precision; float16/bfloat16
//     compute in float32 and round once to 16 bits, to nearest even.
//   - Arange computes start + i*step in float64 and rounds once to the
//     element type (16-bit types too: double -> float with round-to-odd,
//     then float -> 16 bits to nearest even, which is one correct rounding).
//   - Integers wrap (two's complement). With integer scalars, fill/arange/
//     scale are exact int64 arithmetic, wrapped; with a float scalar the
//     value is computed in float64, truncated toward zero, saturated at the
//     int64 limits (NaN -> 0), then wrapped.
//   - No contraction: every add and multiply is an explicit _rn intrinsic,
//     so no fused multiply-add changes a rounding.
// Fill gets the element's bit pattern from the host (exact there), so it
// is only a typed store.

#define GRID_LOOP(i, n)                                                     \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;    \
         i < (n); i += (long long)blockDim.x * gridDim.x)

// ---- 16-bit float conversions (bit exact, no headers needed) -----------

__device__ __forceinline__ float h2f(unsigned short h) {
    unsigned int sign = ((unsigned int)h & 0x8000u) << 16;
    unsigned int exp = ((unsigned int)h >> 10) & 0x1fu;
    unsigned int man = (unsigned int)h & 0x3ffu;
    if (exp == 0) {
        if (man == 0) return __uint_as_float(sign);
        float f = __fmul_rn((float)man, 5.9604644775390625e-8f);  // man * 2^-24, exact
        return sign ? -f : f;
    }
    if (exp == 31) return __uint_as_float(sign | 0x7f800000u | (man << 13));
    return __uint_as_float(sign | ((exp + 112u) << 23) | (man << 13));
}

__device__ __forceinline__ unsigned short f2h(float f) {
    unsigned int x = __float_as_uint(f);
    unsigned int sign = (x >> 16) & 0x8000u;
    unsigned int ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (unsigned short)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));  // NaN stays NaN
    if (ax >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);  // >= 65520 rounds to infinity
    if (ax < 0x38800000u) {  // below 2^-14: a subnormal half (or zero)
        float m = __fmul_rn(__uint_as_float(ax), 16777216.0f);  // in units of 2^-24, exact
        return (unsigned short)(sign | __float2uint_rn(m));  // 1024 becomes the smallest normal
    }
    unsigned int h = (((ax >> 23) - 112u) << 10) | ((ax >> 13) & 0x3ffu);
    unsigned int rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;  // a carry moves into the exponent
    return (unsigned short)(sign | h);
}

__device__ __forceinline__ float bf2f(unsigned short b) {
    return __uint_as_float(((unsigned int)b) << 16);
}

__device__ __forceinline__ unsigned short f2bf(float f) {
    unsigned int b = __float_as_uint(f);
    if ((b & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((b >> 16) | 0x40u);  // quiet NaN
    b += 0x7fffu + ((b >> 16) & 1u);
    return (unsigned short)(b >> 16);
}

// d2f_odd rounds a double to float with round-to-odd, so that a second
// rounding to 16 bits gives the correctly rounded result of the double.
__device__ __forceinline__ float d2f_odd(double d) {
    float f = __double2float_rz(d);
    if (d == d && (double)f != d) f = __uint_as_float(__float_as_uint(f) | 1u);
    return f;
}

__device__ __forceinline__ long long trunc_sat(double v) {
    if (v != v) return 0;
    if (v >= 9223372036854775807.0) return 0x7fffffffffffffffLL;
    if (v <= -9223372036854775808.0) return (long long)(-0x7fffffffffffffffLL - 1);
    return (long long)v;  // truncation toward zero
}

// ---- per-dtype arithmetic ---------------------------------------------

struct F32 {
    typedef float T;
    static __device__ __forceinline__ T add(T a, T b) { return __fadd_rn(a, b); }
    static __device__ __forceinline__ T mul(T x, double f) { return __fmul_rn(x, __double2float_rn(f)); }
    static __device__ __forceinline__ T fromD(double d) { return __double2float_rn(d); }
};

struct F64 {
    typedef double T;
    static __device__ __forceinline__ T add(T a, T b) { return __dadd_rn(a, b); }
    static __device__ __forceinline__ T mul(T x, double f) { return __dmul_rn(x, f); }
    static __device__ __forceinline__ T fromD(double d) { return d; }
};

struct F16 {
    typedef unsigned short T;
    static __device__ __forceinline__ T add(T a, T b) { return f2h(__fadd_rn(h2f(a), h2f(b))); }
    static __device__ __forceinline__ T mul(T x, double f) { return f2h(__fmul_rn(h2f(x), __double2float_rn(f))); }
    static __device__ __forceinline__ T fromD(double d) { return f2h(d2f_odd(d)); }
};

struct BF16 {
    typedef unsigned short T;
    static __device__ __forceinline__ T add(T a, T b) { return f2bf(__fadd_rn(bf2f(a), bf2f(b))); }
    static __device__ __forceinline__ T mul(T x, double f) { return f2bf(__fmul_rn(bf2f(x), __double2float_rn(f))); }
    static __device__ __forceinline__ T fromD(double d) { return f2bf(d2f_odd(d)); }
};

typedef unsigned long long u64;

template <typename T>
__device__ __forceinline__ void fill_k(T* dst, long long n, u64 bits) {
    T v = *reinterpret_cast<const T*>(&bits);  // little-endian: the low bytes
    GRID_LOOP(i, n) dst[i] = v;
}

template <typename T>
__device__ __forceinline__ void arange_int_k(T* dst, long long n, double fstart, double fstep,
                                             long long istart, long long istep, int useint) {
    GRID_LOOP(i, n) {
        if (useint)
            dst[i] = (T)((u64)istart + (u64)i * (u64)istep);
        else
            dst[i] = (T)(u64)trunc_sat(__dadd_rn(fstart, __dmul_rn((double)i, fstep)));
    }
}

template <typename T>
__device__ __forceinline__ void add_int_k(T* dst, const T* a, const T* b, long long n) {
    GRID_LOOP(i, n) dst[i] = (T)((u64)(long long)a[i] + (u64)(long long)b[i]);
}

template <typename T>
__device__ __forceinline__ void scale_int_k(T* dst, const T* src, long long n, double ff,
                                            long long fi, int useint) {
    GRID_LOOP(i, n) {
        if (useint)
            dst[i] = (T)((u64)(long long)src[i] * (u64)fi);
        else
            dst[i] = (T)(u64)trunc_sat(__dmul_rn((double)src[i], ff));
    }
}

#define FLOAT_KERNELS(sfx, TR)                                                                 \
    extern "C" __global__ void choreo_fill_##sfx(TR::T* dst, long long n, u64 bits) {          \
        fill_k<TR::T>(dst, n, bits);                                                           \
    }                                                                                          \
    extern "C" __global__ void choreo_arange_##sfx(TR::T* dst, long long n, double fstart,     \
                                                   double fstep, long long istart,             \
                                                   long long istep, int useint) {              \
        GRID_LOOP(i, n) dst[i] = TR::fromD(__dadd_rn(fstart, __dmul_rn((double)i, fstep)));    \
    }                                                                                          \
    extern "C" __global__ void choreo_add_##sfx(TR::T* dst, const TR::T* a, const TR::T* b,    \
                                                long long n) {                                 \
        GRID_LOOP(i, n) dst[i] = TR::add(a[i], b[i]);                                          \
    }                                                                                          \
    extern "C" __global__ void choreo_scale_##sfx(TR::T* dst, const TR::T* src, long long n,   \
                                                  double ff, long long fi, int useint) {       \
        GRID_LOOP(i, n) dst[i] = TR::mul(src[i], ff);                                          \
    }

#define INT_KERNELS(sfx, T)                                                                    \
    extern "C" __global__ void choreo_fill_##sfx(T* dst, long long n, u64 bits) {              \
        fill_k<T>(dst, n, bits);                                                               \
    }                                                                                          \
    extern "C" __global__ void choreo_arange_##sfx(T* dst, long long n, double fstart,         \
                                                   double fstep, long long istart,             \
                                                   long long istep, int useint) {              \
        arange_int_k<T>(dst, n, fstart, fstep, istart, istep, useint);                         \
    }                                                                                          \
    extern "C" __global__ void choreo_add_##sfx(T* dst, const T* a, const T* b, long long n) { \
        add_int_k<T>(dst, a, b, n);                                                            \
    }                                                                                          \
    extern "C" __global__ void choreo_scale_##sfx(T* dst, const T* src, long long n,           \
                                                  double ff, long long fi, int useint) {       \
        scale_int_k<T>(dst, src, n, ff, fi, useint);                                           \
    }

FLOAT_KERNELS(f32, F32)
FLOAT_KERNELS(f64, F64)
FLOAT_KERNELS(f16, F16)
FLOAT_KERNELS(bf16, BF16)
INT_KERNELS(i8, signed char)
INT_KERNELS(i16, short)
INT_KERNELS(i32, int)
INT_KERNELS(i64, long long)
INT_KERNELS(u8, unsigned char)

// choreo_store_max_u32 is WriteValue's monotonic variant, launched with one
// thread after the work it must follow on the same stream: the stream has
// completed that work before the kernel starts; the system-scope fences
// (membar.sys) order the store after it and publish the store to the CPU
// promptly. It reads, compares and stores (no atomic: GPU atomics on host
// memory are not atomic with respect to the CPU on a PCIe host, and each
// word has one writer per direction).
extern "C" __global__ void choreo_store_max_u32(unsigned int* word, unsigned int v) {
    volatile unsigned int* w = word;
    __threadfence_system();
    if (v > *w) *w = v;
    __threadfence_system();
}

// ---- peer reduce (the device-resident collectives) ----------------------
//
// choreo_peer_<op>_<dtype> is gpu.PeerReduce. tab is the table in device
// memory, copied there from its pinned host copy by the stream just before
// the kernel (so it holds what the CPU wrote before it released the
// stream's fence wait): tab[0] is the armed flag, then (pointer, bytes) per
// entry from tab[2]. flag is the host copy's error word (device-mapped):
// an entry too short for its range sets it, and nothing is written. Every
// thread reduces its elements over the sources in entry order into an
// accumulator (float32 for 16-bit floats, rounded once) and stores it in
// every destination; a destination that is also a source is read before
// it is written, element by element.

struct OpSum {
    static __device__ __forceinline__ float f(float a, float b) { return __fadd_rn(a, b); }
    static __device__ __forceinline__ double d(double a, double b) { return __dadd_rn(a, b); }
    template <typename T> static __device__ __forceinline__ T i(T a, T b) { return (T)((u64)(long long)a + (u64)(long long)b); }
};
struct OpProd {
    static __device__ __forceinline__ float f(float a, float b) { return __fmul_rn(a, b); }
    static __device__ __forceinline__ double d(double a, double b) { return __dmul_rn(a, b); }
    template <typename T> static __device__ __forceinline__ T i(T a, T b) { return (T)((u64)(long long)a * (u64)(long long)b); }
};
struct OpMin {
    static __device__ __forceinline__ float f(float a, float b) { return (a != a || b != b) ? __int_as_float(0x7fc00000) : fminf(a, b); }
    static __device__ __forceinline__ double d(double a, double b) { return (a != a || b != b) ? __longlong_as_double(0x7ff8000000000000LL) : fmin(a, b); }
    template <typename T> static __device__ __forceinline__ T i(T a, T b) { return a < b ? a : b; }
};
struct OpMax {
    static __device__ __forceinline__ float f(float a, float b) { return (a != a || b != b) ? __int_as_float(0x7fc00000) : fmaxf(a, b); }
    static __device__ __forceinline__ double d(double a, double b) { return (a != a || b != b) ? __longlong_as_double(0x7ff8000000000000LL) : fmax(a, b); }
    template <typename T> static __device__ __forceinline__ T i(T a, T b) { return a > b ? a : b; }
};

// Element access per dtype: load to the accumulator type, reduce, store.
struct PF32 { typedef float T; typedef float A;
    static __device__ __forceinline__ A ld(T v) { return v; }
    static __device__ __forceinline__ T st(A v) { return v; }
    template <class O> static __device__ __forceinline__ A op(A a, A b) { return O::f(a, b); } };
struct PF64 { typedef double T; typedef double A;
    static __device__ __forceinline__ A ld(T v) { return v; }
    static __device__ __forceinline__ T st(A v) { return v; }
    template <class O> static __device__ __forceinline__ A op(A a, A b) { return O::d(a, b); } };
struct PF16 { typedef unsigned short T; typedef float A;
    static __device__ __forceinline__ A ld(T v) { return h2f(v); }
    static __device__ __forceinline__ T st(A v) { return f2h(v); }
    template <class O> static __device__ __forceinline__ A op(A a, A b) { return O::f(a, b); } };
struct PBF16 { typedef unsigned short T; typedef float A;
    static __device__ __forceinline__ A ld(T v) { return bf2f(v); }
    static __device__ __forceinline__ T st(A v) { return f2bf(v); }
    template <class O> static __device__ __forceinline__ A op(A a, A b) { return O::f(a, b); } };
template <typename I> struct PInt { typedef I T; typedef I A;
    static __device__ __forceinline__ A ld(T v) { return v; }
    static __device__ __forceinline__ T st(A v) { return v; }
    template <class O> static __device__ __forceinline__ A op(A a, A b) { return O::template i<I>(a, b); } };

#define PEER_MAX 64  // entries a kernel reads (srcs + dsts); more: several commands

// peer_range reduces the elements [lo, hi) one per thread and step.
template <class P, class O>
__device__ __forceinline__ void peer_range(const u64* tab, int srcLo, int srcHi, int dstLo, int dstHi,
                                           long long srcOff, long long dstOff, long long lo, long long hi) {
    typedef typename P::T T;
    for (long long i = lo + (long long)blockIdx.x * blockDim.x + threadIdx.x; i < hi;
         i += (long long)blockDim.x * gridDim.x) {
        typename P::A acc = P::ld(((const T*)tab[2 + 2 * srcLo])[srcOff + i]);
        for (int e = srcLo + 1; e < srcHi; e++)
            acc = P::template op<O>(acc, P::ld(((const T*)tab[2 + 2 * e])[srcOff + i]));
        T v = P::st(acc);
        for (int e = dstLo; e < dstHi; e++) ((T*)tab[2 + 2 * e])[dstOff + i] = v;
    }
}

// peer_vec reduces nv 16-byte vectors (srcOff and dstOff make every entry
// 16-byte aligned): one 16-byte load per source and one store per
// destination, each element reduced in the accumulator type as in
// peer_range, so the result is bit for bit the same.
template <class P, class O>
__device__ __forceinline__ void peer_vec(const u64* tab, int srcLo, int srcHi, int dstLo, int dstHi,
                                         long long srcOff, long long dstOff, long long nv) {
    typedef typename P::T T;
    typedef typename P::A A;
    const int W = 16 / sizeof(T);
    union V { uint4 u; T e[16 / sizeof(T)]; };
    GRID_LOOP(i, nv) {
        V v;
        v.u = ((const uint4*)((const T*)tab[2 + 2 * srcLo] + srcOff))[i];
        A acc[16 / sizeof(T)];
#pragma unroll
        for (int k = 0; k < W; k++) acc[k] = P::ld(v.e[k]);
#pragma unroll 4
        for (int e = srcLo + 1; e < srcHi; e++) {
            V w;
            w.u = ((const uint4*)((const T*)tab[2 + 2 * e] + srcOff))[i];
#pragma unroll
            for (int k = 0; k < W; k++) acc[k] = P::template op<O>(acc[k], P::ld(w.e[k]));
        }
#pragma unroll
        for (int k = 0; k < W; k++) v.e[k] = P::st(acc[k]);
        for (int e = dstLo; e < dstHi; e++) ((uint4*)((T*)tab[2 + 2 * e] + dstOff))[i] = v.u;
    }
}

// peer_k checks the table, then reduces with 16-byte vectors where the
// entries allow it (every entry 16-byte aligned and the source and
// destination offsets alike modulo 16 bytes): a scalar head up to the
// first aligned element, the vectors, a scalar tail. Otherwise every
// element is reduced alone.
template <class P, class O>
__device__ __forceinline__ void peer_k(const u64* tab, u64* flag, int srcLo, int srcHi, int dstLo,
                                       int dstHi, long long srcOff, long long dstOff, long long n) {
    if (tab[0] == 0) return;  // not armed: the collective failed before its peers were known
    typedef typename P::T T;
    const long long es = (long long)sizeof(T);
    for (int e = srcLo; e < srcHi; e++)
        if ((unsigned long long)((srcOff + n) * es) > tab[3 + 2 * e]) { if (threadIdx.x == 0) *(volatile u64*)flag = 1; return; }
    for (int e = dstLo; e < dstHi; e++)
        if ((unsigned long long)((dstOff + n) * es) > tab[3 + 2 * e]) { if (threadIdx.x == 0) *(volatile u64*)flag = 1; return; }
    const long long hs = (srcOff * es) & 15, hd = (dstOff * es) & 15;
    bool vec = hs == hd && n * es >= 64;
    for (int e = srcLo; vec && e < srcHi; e++) vec = (tab[2 + 2 * e] & 15) == 0;
    for (int e = dstLo; vec && e < dstHi; e++) vec = (tab[2 + 2 * e] & 15) == 0;
    if (!vec) {
        peer_range<P, O>(tab, srcLo, srcHi, dstLo, dstHi, srcOff, dstOff, 0, n);
        return;
    }
    const long long head = ((16 - hs) & 15) / es;  // es divides 16 and hs
    const long long nv = (n - head) / (16 / es);
    const long long tail = head + nv * (16 / es);
    peer_range<P, O>(tab, srcLo, srcHi, dstLo, dstHi, srcOff, dstOff, 0, head);
    peer_vec<P, O>(tab, srcLo, srcHi, dstLo, dstHi, srcOff + head, dstOff + head, nv);
    peer_range<P, O>(tab, srcLo, srcHi, dstLo, dstHi, srcOff, dstOff, tail, n);
}

#define PEER_KERNEL(opname, O, sfx, P)                                                          \
    extern "C" __global__ void choreo_peer_##opname##_##sfx(const u64* tab, u64* flag, int sl, \
                                                            int sh, int dl, int dh,            \
                                                            long long so, long long dof,       \
                                                            long long n) {                     \
        peer_k<P, O>(tab, flag, sl, sh, dl, dh, so, dof, n);                                   \
    }
#define PEER_KERNELS(opname, O)             \
    PEER_KERNEL(opname, O, f32, PF32)       \
    PEER_KERNEL(opname, O, f64, PF64)       \
    PEER_KERNEL(opname, O, f16, PF16)       \
    PEER_KERNEL(opname, O, bf16, PBF16)     \
    PEER_KERNEL(opname, O, i8, PInt<signed char>) \
    PEER_KERNEL(opname, O, i16, PInt<short>) \
    PEER_KERNEL(opname, O, i32, PInt<int>)  \
    PEER_KERNEL(opname, O, i64, PInt<long long>) \
    PEER_KERNEL(opname, O, u8, PInt<unsigned char>)

PEER_KERNELS(sum, OpSum)
PEER_KERNELS(prod, OpProd)
PEER_KERNELS(min, OpMin)
PEER_KERNELS(max, OpMax)
