/* Element-wise reductions on the device, bit for bit the host's
 * (reduce/reduce_impl.h): integers wrap in their unsigned type; floats and
 * doubles round each operation on its own (no FMA contraction); half,
 * bfloat16 and fp8 widen to float through the same bit-level conversions the
 * host uses, combine, and round back (fp8 saturating, NaN kept). */
#ifndef TUTTI_DEVICE_KERNELS_REDUCE_CUH
#define TUTTI_DEVICE_KERNELS_REDUCE_CUH

#include <stdint.h>

/* What one element-wise pass computes (the host's enum tutti_red_eop). */
enum td_eop { TD_SUM, TD_PROD, TD_MAX, TD_MIN, TD_SUMSCALE, TD_SUMDIV, TD_SCALE, TD_DIV, TD_COPY };

__device__ __forceinline__ float td_u2f(uint32_t u) {
  return __uint_as_float(u);
}
__device__ __forceinline__ uint32_t td_f2u(float f) {
  return __float_as_uint(f);
}

__device__ __forceinline__ float td_decode(uint32_t em, int mbits, uint32_t bias) {
  uint32_t sub = em < (1u << mbits);
  float x = td_u2f(((em | (sub << mbits)) << (23 - mbits)) + ((127u - bias) << 23));
  return __fadd_rn(x, sub ? -td_u2f((128u - bias) << 23) : 0.0f);
}

__device__ __forceinline__ uint32_t td_encode(uint32_t a, int mbits, uint32_t min_eb) {
  uint32_t eb = a >> 23;
  eb = eb > min_eb ? eb : min_eb;
  uint32_t cb = (eb + 23u - (uint32_t)mbits) << 23;
  uint32_t t = td_f2u(__fadd_rn(td_u2f(a), td_u2f(cb))) - cb;
  return ((eb - min_eb) << mbits) + t;
}

struct td_half {
  typedef uint16_t T;
  static __device__ __forceinline__ float to_f(T h) {
    uint32_t em = h & 0x7fffu;
    uint32_t bits = td_f2u(td_decode(em, 10, 15));
    bits |= em >= 0x7c00u ? 0x7f800000u : 0u;
    bits |= em > 0x7c00u ? 0x400000u : 0u;
    return td_u2f(bits | (uint32_t)(h & 0x8000u) << 16);
  }
  static __device__ __forceinline__ T from_f(float f) {
    uint32_t u = td_f2u(f);
    uint32_t a = u & 0x7fffffffu;
    uint32_t nan = a > 0x7f800000u ? 0x7e00u | ((a >> 13) & 0x3ffu) : 0u;
    a = a < 0x47800000u ? a : 0x47800000u;
    return (T)(td_encode(a, 10, 113) | nan | ((u >> 16) & 0x8000u));
  }
};

struct td_bf16 {
  typedef uint16_t T;
  static __device__ __forceinline__ float to_f(T h) {
    return td_u2f((uint32_t)h << 16);
  }
  static __device__ __forceinline__ T from_f(float f) {
    uint32_t u = td_f2u(f);
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    r = (u & 0x7fffffffu) > 0x7f800000u ? ((u >> 16) | 0x40u) : r;
    return (T)r;
  }
};

struct td_e4m3 {
  typedef uint8_t T;
  static __device__ __forceinline__ float to_f(T v) {
    uint32_t em = v & 0x7fu;
    uint32_t bits = td_f2u(td_decode(em, 3, 7));
    bits |= (0u - ((em + 1u) >> 7)) & 0x7fc00000u;
    return td_u2f(bits | (uint32_t)(v & 0x80u) << 24);
  }
  static __device__ __forceinline__ T from_f(float f) {
    uint32_t u = td_f2u(f);
    uint32_t a = u & 0x7fffffffu;
    uint32_t nan = a > 0x7f800000u ? 0x7fu : 0u;
    a = a < 0x43e00000u ? a : 0x43e00000u;
    return (T)(td_encode(a, 3, 121) | nan | ((u >> 24) & 0x80u));
  }
};

struct td_e5m2 {
  typedef uint8_t T;
  static __device__ __forceinline__ float to_f(T v) {
    uint32_t em = v & 0x7fu;
    uint32_t bits = td_f2u(td_decode(em, 2, 15));
    bits |= em >= 0x7cu ? 0x7f800000u : 0u;
    bits |= em > 0x7cu ? 0x400000u : 0u;
    return td_u2f(bits | (uint32_t)(v & 0x80u) << 24);
  }
  static __device__ __forceinline__ T from_f(float f) {
    uint32_t u = td_f2u(f);
    uint32_t a = u & 0x7fffffffu;
    uint32_t nan = a > 0x7f800000u ? 0x7fu : 0u;
    a = a < 0x47600000u ? a : 0x47600000u;
    return (T)(td_encode(a, 2, 113) | nan | ((u >> 24) & 0x80u));
  }
};

/* Narrow floats: one element of `eop`, as reduce_narrow.c computes it. */
template <class N>
struct td_narrow {
  typedef typename N::T T;
  float s, dv;
  static __device__ __forceinline__ td_narrow make(uint64_t scalar, uint64_t div) {
    return td_narrow{N::to_f((T)scalar), (float)div};
  }
  __device__ __forceinline__ T apply(int eop, T x, T y) const {
    float fx = N::to_f(x), fy = N::to_f(y);
    switch (eop) {
      case TD_SUM:
        return N::from_f(__fadd_rn(fx, fy));
      case TD_PROD:
        return N::from_f(__fmul_rn(fx, fy));
      case TD_MAX:
        return N::from_f(N::to_f((fx == fx) && ((fy != fy) || (fy > fx)) ? y : x));
      case TD_MIN:
        return N::from_f(N::to_f((fx == fx) && ((fy != fy) || (fy < fx)) ? y : x));
      case TD_SUMSCALE:
        return N::from_f(__fadd_rn(fx, N::to_f(N::from_f(__fmul_rn(fy, s)))));
      case TD_SUMDIV:
        return N::from_f(__fdiv_rn(N::to_f(N::from_f(__fadd_rn(fx, fy))), dv));
      case TD_SCALE:
        return N::from_f(__fmul_rn(fx, s));
      case TD_DIV:
        return N::from_f(__fdiv_rn(fx, dv));
      default:
        return x;
    }
  }
};

/* Integers: arithmetic in U, ordering and division in T. */
template <typename TT, typename UU>
struct td_int {
  typedef TT T;
  UU s;
  uint64_t div;
  static __device__ __forceinline__ td_int make(uint64_t scalar, uint64_t d) {
    return td_int{(UU)scalar, d};
  }
  __device__ __forceinline__ T apply(int eop, T x, T y) const {
    switch (eop) {
      case TD_SUM:
        return (T)((UU)x + (UU)y);
      case TD_PROD:
        return (T)((UU)x * (UU)y);
      case TD_MAX:
        return y > x ? y : x;
      case TD_MIN:
        return y < x ? y : x;
      case TD_SUMSCALE:
        return (T)((UU)x + (UU)((UU)y * s));
      case TD_SUMDIV:
        return divide((T)((UU)x + (UU)y));
      case TD_SCALE:
        return (T)((UU)x * s);
      case TD_DIV:
        return divide(x);
      default:
        return x;
    }
  }
  __device__ __forceinline__ T divide(T v) const {
    if ((T)-1 < (T)0) {
      int64_t sdiv = div > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)div;
      return (T)((int64_t)v / sdiv);
    }
    return (T)((uint64_t)v / div);
  }
};

#define TD_FMAX(x, y) ((x) != (x) ? (x) : (y) != (y) ? (y) : (y) > (x) ? (y) : (x))
#define TD_FMIN(x, y) ((x) != (x) ? (x) : (y) != (y) ? (y) : (y) < (x) ? (y) : (x))

struct td_f32 {
  typedef float T;
  float s;
  uint64_t div;
  static __device__ __forceinline__ td_f32 make(uint64_t scalar, uint64_t d) {
    return td_f32{__uint_as_float((uint32_t)scalar), d};
  }
  __device__ __forceinline__ T apply(int eop, T x, T y) const {
    float dv = (float)div;
    switch (eop) {
      case TD_SUM:
        return __fadd_rn(x, y);
      case TD_PROD:
        return __fmul_rn(x, y);
      case TD_MAX:
        return TD_FMAX(x, y);
      case TD_MIN:
        return TD_FMIN(x, y);
      case TD_SUMSCALE:
        return __fadd_rn(x, __fmul_rn(y, s));
      case TD_SUMDIV:
        return __fdiv_rn(__fadd_rn(x, y), dv);
      case TD_SCALE:
        return __fmul_rn(x, s);
      case TD_DIV:
        return __fdiv_rn(x, dv);
      default:
        return x;
    }
  }
};

struct td_f64 {
  typedef double T;
  double s;
  uint64_t div;
  static __device__ __forceinline__ td_f64 make(uint64_t scalar, uint64_t d) {
    return td_f64{__longlong_as_double((long long)scalar), d};
  }
  __device__ __forceinline__ T apply(int eop, T x, T y) const {
    double dv = (double)div;
    switch (eop) {
      case TD_SUM:
        return __dadd_rn(x, y);
      case TD_PROD:
        return __dmul_rn(x, y);
      case TD_MAX:
        return TD_FMAX(x, y);
      case TD_MIN:
        return TD_FMIN(x, y);
      case TD_SUMSCALE:
        return __dadd_rn(x, __dmul_rn(y, s));
      case TD_SUMDIV:
        return __ddiv_rn(__dadd_rn(x, y), dv);
      case TD_SCALE:
        return __dmul_rn(x, s);
      case TD_DIV:
        return __ddiv_rn(x, dv);
      default:
        return x;
    }
  }
};

#endif
