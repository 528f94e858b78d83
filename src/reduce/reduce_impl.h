/* Private to src/reduce: branch-free narrow-float conversions (shared by the
 * exported scalar functions and the vectorized loops) and the internal entry points. */
#ifndef TUTTI_REDUCE_REDUCE_IMPL_H
#define TUTTI_REDUCE_REDUCE_IMPL_H

#include <stdint.h>
#include <string.h>

#include "reduce/reduce.h"
#include "util/param.h"

#if defined(__x86_64__) || defined(__i386__)
#define TUTTI_RED_X86 1
/* One binary, the best loop for the CPU it runs on. By hand rather than with
 * target_clones: an ifunc resolver runs during relocation, before TSan's
 * runtime is up (it crashes there), and musl has no ifuncs.
 * RED_VERSIONS(K, ...) expands K(suffix, attribute, ...) for AVX-512 (with BW
 * and VL: the 8- and 16-bit packs of the narrow types), AVX2 and the
 * baseline; RED_CALL(fn, (args)) calls the one this CPU runs. */
#define RED_VERSIONS(K, ...)                                                         \
  K(_v4, __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq"))), __VA_ARGS__) \
  K(_v3, __attribute__((target("avx2"))), __VA_ARGS__)                               \
  K(_v0, , __VA_ARGS__)
#define RED_CALL(FN, ARGS)  \
  do {                      \
    int isa_ = red_isa();   \
    if (isa_ >= 2) {        \
      FN##_v4 ARGS;         \
    } else if (isa_ == 1) { \
      FN##_v3 ARGS;         \
    } else {                \
      FN##_v0 ARGS;         \
    }                       \
  } while (0)

/* Caps the instruction set of the loops (3: AVX512-FP16 and VBMI, 2: AVX-512, 1: AVX2
 * and F16C, 0: baseline), to rule a path out when debugging and for the test
 * to cover all. */
static inline TUTTI_PARAM(reduce_isa, "TUTTI_REDUCE_ISA", 3,
                          "caps the host reductions' instructions (3: AVX512-FP16 and VBMI, 2: "
                          "AVX-512, 1: AVX2 and F16C, 0: baseline)");

/* 3: AVX-512 F/BW/VL/DQ, FP16 and VBMI, 2: AVX-512 F/BW/VL/DQ, 1: AVX2, 0: none of
 * them; cached, as the checks are not free. */
static inline int red_isa(void) {
  static int level = -1;
  int v = __atomic_load_n(&level, __ATOMIC_RELAXED);
  if (v < 0) {
    __builtin_cpu_init(); /* we may run before the constructor that does it */
    v = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")
            ? (__builtin_cpu_supports("avx512fp16") && __builtin_cpu_supports("avx512vbmi") ? 3 : 2)
        : __builtin_cpu_supports("avx2") ? 1
                                         : 0;
    int64_t cap = tutti_param_reduce_isa();
    v = cap < v ? (int)(cap > 0 ? cap : 0) : v;
    __atomic_store_n(&level, v, __ATOMIC_RELAXED);
  }
  return v;
}
#else
#define TUTTI_RED_X86 0
#define RED_VERSIONS(K, ...) K(_v0, , __VA_ARGS__)
#define RED_CALL(FN, ARGS) FN##_v0 ARGS
#endif

/* Forced: the many loops of one file would otherwise exhaust GCC's inlining
 * budget and leave per-element calls in the hot loops. */
#define RED_INLINE static inline __attribute__((always_inline))

/* What one element-wise pass computes once the kind and flags are resolved. */
enum tutti_red_eop {
  TUTTI_EOP_SUM,
  TUTTI_EOP_PROD,
  TUTTI_EOP_MAX,
  TUTTI_EOP_MIN,
  TUTTI_EOP_SUMSCALE, /* a + b * scalar */
  TUTTI_EOP_SUMDIV,   /* (a + b) / divisor */
  TUTTI_EOP_SCALE,    /* copy: src * scalar */
  TUTTI_EOP_DIV       /* copy: src / divisor */
};

/* Half, bfloat16 and fp8 loops (reduce_narrow.c); b is NULL for the copy ops. */
__attribute__((visibility("hidden"))) void tutti_reduce_narrow(void* dst, const void* a,
                                                               const void* b, size_t n,
                                                               const struct tutti_redop* op,
                                                               enum tutti_red_eop eop);

#if TUTTI_RED_X86
/* The AVX-512 loops of the narrow floats (reduce_narrow_avx512.c): whole
 * groups of 16 elements; returns how many it did, the caller does the rest. */
__attribute__((visibility("hidden"))) size_t tutti_reduce_narrow_avx512(
    unsigned char* d, const unsigned char* a, const unsigned char* b, size_t n, ncclDataType_t type,
    enum tutti_red_eop eop, float s, float dv);

/* The same with AVX2 and F16C, 8 at a time. */
__attribute__((visibility("hidden"))) size_t tutti_reduce_narrow_avx2(
    unsigned char* d, const unsigned char* a, const unsigned char* b, size_t n, ncclDataType_t type,
    enum tutti_red_eop eop, float s, float dv);

/* The same in half precision (reduce_narrow_fp16.c), 32 at a time, for the
 * ops where that gives the float loops' bits; 0 for the others. */
__attribute__((visibility("hidden"))) size_t tutti_reduce_narrow_fp16(unsigned char* d,
                                                                      const unsigned char* a,
                                                                      const unsigned char* b,
                                                                      size_t n, ncclDataType_t type,
                                                                      enum tutti_red_eop eop);
#endif

/* Asks for the data a few KB ahead of a loop over long inputs: with the
 * hardware prefetcher alone, the narrow-float loops (many operations per
 * byte) left a stream from memory ~25% short of float's rate on this
 * class of core. Addresses past the end are harmless: prefetches do not fault. */
#define RED_AHEAD 8192
/* Bytes per element of the narrow types, by the names the loops use. */
enum { RED_W_half = 2, RED_W_bf16 = 2, RED_W_e4m3 = 1, RED_W_e5m2 = 1 };
#define RED_PREFETCH(P, OFF) __builtin_prefetch((const void*)((uintptr_t)(P) + (OFF) + RED_AHEAD))

/* Element access through memcpy: any alignment, and no aliasing assumptions. */
#define LDST(NAME, T)                                          \
  RED_INLINE T ld_##NAME(const unsigned char* p, size_t i) {   \
    T v;                                                       \
    memcpy(&v, p + i * sizeof(T), sizeof(T));                  \
    return v;                                                  \
  }                                                            \
  RED_INLINE void st_##NAME(unsigned char* p, size_t i, T v) { \
    memcpy(p + i * sizeof(T), &v, sizeof(T));                  \
  }

/* In-place (dst == a or dst == b) is the common case. GCC's runtime alias
 * check lets an exact alias (distance 0) take the vector loop; clang's wants
 * disjoint ranges, so for clang the aliased operand is loaded through dst
 * itself, which it can see needs no check. GCC gets one loop (half the
 * compile time). */
#define RED_LOOP(NAME, T, PA, PB, EXPR)           \
  for (size_t i = 0; i < n; i++) {                \
    T x = ld_##NAME(PA, i), y = ld_##NAME(PB, i); \
    (void)y;                                      \
    st_##NAME(d, i, (EXPR));                      \
  }

#if defined(__clang__)
#define BINARY(NAME, T, EXPR)       \
  do {                              \
    if (d == a) {                   \
      RED_LOOP(NAME, T, d, b, EXPR) \
    } else if (d == b) {            \
      RED_LOOP(NAME, T, a, d, EXPR) \
    } else {                        \
      RED_LOOP(NAME, T, a, b, EXPR) \
    }                               \
  } while (0)
#define UNARY(NAME, T, EXPR)        \
  do {                              \
    if (d == a) {                   \
      RED_LOOP(NAME, T, d, d, EXPR) \
    } else {                        \
      RED_LOOP(NAME, T, a, a, EXPR) \
    }                               \
  } while (0)
#else
#define BINARY(NAME, T, EXPR)     \
  do {                            \
    RED_LOOP(NAME, T, a, b, EXPR) \
  } while (0)
#define UNARY(NAME, T, EXPR)      \
  do {                            \
    RED_LOOP(NAME, T, a, a, EXPR) \
  } while (0)
#endif

/* Floating max/min: a NaN operand wins (a's first), unlike fmax; on equal
 * values (+0 vs -0) a is kept. */
#define FMAX(x, y) ((x) != (x) ? (x) : (y) != (y) ? (y) : (y) > (x) ? (y) : (x))
#define FMIN(x, y) ((x) != (x) ? (x) : (y) != (y) ? (y) : (y) < (x) ? (y) : (x))

RED_INLINE uint32_t red_f2u(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof(u));
  return u;
}

RED_INLINE float red_u2f(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof(f));
  return f;
}

/* The conversions below are written for GCC's vectorizer: a float operation
 * whose result is used only under a condition blocks it (the operation might
 * trap), so every float operation runs unconditionally and conditions only
 * pick integer constants that are OR-ed in. Rounding is done by adding a power
 * of two whose ulp is the target's ulp, so it relies on the rounding mode
 * being the default nearest-even, as all float arithmetic here does. No
 * operation sees a subnormal operand that matters, so FTZ/DAZ change nothing. */

/* Decodes a narrow value (exponent and mantissa bits em) by placing the bits
 * into a float and rebiasing the exponent by 127 - bias; subnormals
 * (em < 1 << mbits) get the implicit bit of the smallest normal, then lose its
 * value, 2^(1 - bias), again. */
RED_INLINE float red_decode(uint32_t em, int mbits, uint32_t bias) {
  uint32_t sub = em < (1u << mbits);
  float x = red_u2f(((em | (sub << mbits)) << (23 - mbits)) + ((127u - bias) << 23));
  return x + (sub ? -red_u2f((128u - bias) << 23) : 0.0f);
}

/* Encodes |f| (bits a, already clamped to the largest finite value or the
 * overflow threshold): c is 2^(max(E, Emin) + 23 - mbits), whose ulp is the
 * target's ulp at E, so a + c rounds a onto the target's grid; normals and
 * subnormals come out of the same formula. */
RED_INLINE uint32_t red_encode(uint32_t a, int mbits, uint32_t min_eb) {
  uint32_t eb = a >> 23;
  eb = eb > min_eb ? eb : min_eb;
  uint32_t cb = (eb + 23u - (uint32_t)mbits) << 23;
  uint32_t t = red_f2u(red_u2f(a) + red_u2f(cb)) - cb;
  return ((eb - min_eb) << mbits) + t;
}

RED_INLINE float red_half_to_float(uint16_t h) {
  uint32_t em = h & 0x7fffu;
  uint32_t bits = red_f2u(red_decode(em, 10, 15));
  /* inf and NaN: the decoded exponent bits are a subset of 0xff; NaNs come out
   * quiet with the payload kept, as F16C's vcvtph2ps does. */
  bits |= em >= 0x7c00u ? 0x7f800000u : 0u;
  bits |= em > 0x7c00u ? 0x400000u : 0u;
  return red_u2f(bits | (uint32_t)(h & 0x8000u) << 16);
}

RED_INLINE uint16_t red_float_to_half(float f) {
  uint32_t u = red_f2u(f);
  uint32_t a = u & 0x7fffffffu;
  /* Quiet NaN with the payload's top bits, bit-identical to F16C's vcvtps2ph. */
  uint32_t nan = a > 0x7f800000u ? 0x7e00u | ((a >> 13) & 0x3ffu) : 0u;
  a = a < 0x47800000u ? a : 0x47800000u; /* 65536 and above encode as inf */
  return (uint16_t)(red_encode(a, 10, 113) | nan | ((u >> 16) & 0x8000u));
}

RED_INLINE float red_bf16_to_float(uint16_t h) {
  return red_u2f((uint32_t)h << 16);
}

RED_INLINE uint16_t red_float_to_bf16(float f) {
  uint32_t u = red_f2u(f);
  uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  /* Rounding could carry a NaN's payload into inf; keep it a quiet NaN. */
  r = (u & 0x7fffffffu) > 0x7f800000u ? ((u >> 16) | 0x40u) : r;
  return (uint16_t)r;
}

/* E4M3FN: bias 7, no infinities, S.1111.111 is the only NaN, max 448. */
RED_INLINE float red_e4m3_to_float(uint8_t v) {
  uint32_t em = v & 0x7fu;
  uint32_t bits = red_f2u(red_decode(em, 3, 7));
  /* em == 0x7f, spelled so GCC does not split the loop on that one value;
   * 480.0f, what the decode gave, OR this is a quiet NaN. */
  bits |= (0u - ((em + 1u) >> 7)) & 0x7fc00000u;
  return red_u2f(bits | (uint32_t)(v & 0x80u) << 24);
}

/* Saturating like CUDA's __NV_SATFINITE: everything above 448, inf included,
 * becomes 448; NaN stays NaN. */
RED_INLINE uint8_t red_float_to_e4m3(float f) {
  uint32_t u = red_f2u(f);
  uint32_t a = u & 0x7fffffffu;
  uint32_t nan = a > 0x7f800000u ? 0x7fu : 0u;
  a = a < 0x43e00000u ? a : 0x43e00000u;
  return (uint8_t)(red_encode(a, 3, 121) | nan | ((u >> 24) & 0x80u));
}

/* E5M2: bias 15, IEEE-like; the top byte of a half. */
RED_INLINE float red_e5m2_to_float(uint8_t v) {
  uint32_t em = v & 0x7fu;
  uint32_t bits = red_f2u(red_decode(em, 2, 15));
  bits |= em >= 0x7cu ? 0x7f800000u : 0u;
  bits |= em > 0x7cu ? 0x400000u : 0u;
  return red_u2f(bits | (uint32_t)(v & 0x80u) << 24);
}

/* Saturating at 57344, inf included; NaN stays NaN. */
RED_INLINE uint8_t red_float_to_e5m2(float f) {
  uint32_t u = red_f2u(f);
  uint32_t a = u & 0x7fffffffu;
  uint32_t nan = a > 0x7f800000u ? 0x7fu : 0u;
  a = a < 0x47600000u ? a : 0x47600000u;
  return (uint8_t)(red_encode(a, 2, 113) | nan | ((u >> 24) & 0x80u));
}

#endif
