/* References for reductions whose order shows: inputs that make the order of
 * a floating-point fold visible (mixed magnitudes, cancellation, subnormals,
 * signed zeros, infinities, NaNs with payloads), and the fold of every
 * rank's element in a given order of ranks, rounded to the type after each
 * operation with the accumulator on the left, as docs/design.md defines
 * deterministic reductions ("Deterministic reductions"). Header-only: the
 * host collective tests and the GPU suite share it. */
#ifndef TUTTI_TEST_FOLD_REF_H
#define TUTTI_TEST_FOLD_REF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "nccl.h"
#include "reduce/reduce.h"

#define FR_PREMUL ((int)ncclNumOps) /* PreMulSum with the scalar fr_scalar() */
#define FR_NOPS (FR_PREMUL + 1)

static inline int fr_is_float(ncclDataType_t t) {
  return t == ncclFloat16 || t == ncclFloat32 || t == ncclFloat64 || t == ncclBfloat16 ||
         t == ncclFloat8e4m3 || t == ncclFloat8e5m2;
}

static inline uint64_t fr_get(ncclDataType_t t, const void* buf, size_t i) {
  const size_t es = tutti_type_size(t);
  uint64_t v = 0;
  memcpy(&v, (const char*)buf + i * es, es);
  return v;
}

static inline void fr_put(ncclDataType_t t, void* buf, size_t i, uint64_t v) {
  const size_t es = tutti_type_size(t);
  memcpy((char*)buf + i * es, &v, es);
}

/* Floating codes as double (exact: every narrow value and float is a double). */
static inline double fr_dec(ncclDataType_t t, uint64_t v) {
  float f;
  double d;
  switch (t) {
    case ncclFloat16:
      return tutti_half_to_float((uint16_t)v);
    case ncclBfloat16:
      return tutti_bf16_to_float((uint16_t)v);
    case ncclFloat8e4m3:
      return tutti_e4m3_to_float((uint8_t)v);
    case ncclFloat8e5m2:
      return tutti_e5m2_to_float((uint8_t)v);
    case ncclFloat32:
      memcpy(&f, &v, 4);
      return f;
    default:
      memcpy(&d, &v, 8);
      return d;
  }
}

/* A float result rounded to a narrow type (narrow types compute in float). */
static inline uint64_t fr_enc_f(ncclDataType_t t, float f) {
  uint32_t u;
  switch (t) {
    case ncclFloat16:
      return tutti_float_to_half(f);
    case ncclBfloat16:
      return tutti_float_to_bf16(f);
    case ncclFloat8e4m3:
      return tutti_float_to_e4m3(f);
    case ncclFloat8e5m2:
      return tutti_float_to_e5m2(f);
    default:
      memcpy(&u, &f, 4);
      return u;
  }
}

/* max / min as the library defines them: a NaN operand wins (the left one
 * first); on equal values (+0 against -0) the left one is kept. */
#define FR_MAX(x, y) ((x) != (x) ? (x) : (y) != (y) ? (y) : (y) > (x) ? (y) : (x))
#define FR_MIN(x, y) ((x) != (x) ? (x) : (y) != (y) ? (y) : (y) < (x) ? (y) : (x))

/* a OP b in type t, rounded once (op: ncclSum, ncclProd, ncclMax, ncclMin). */
static inline uint64_t fr_op(ncclDataType_t t, int op, uint64_t a, uint64_t b) {
  if (fr_is_float(t) && (op == ncclMax || op == ncclMin)) {
    /* Narrow types are widened to float, one is chosen and rounded back (a
     * NaN comes back quiet); float and double keep the chosen bits. */
    const double x = fr_dec(t, a), y = fr_dec(t, b);
    const int left = op == ncclMax ? (x != x   ? 1
                                      : y != y ? 0
                                               : !(y > x))
                                   : (x != x   ? 1
                                      : y != y ? 0
                                               : !(y < x));
    if (t == ncclFloat32 || t == ncclFloat64) {
      return left ? a : b;
    }
    return fr_enc_f(t, (float)(left ? x : y));
  }
  if (t == ncclFloat64) {
    volatile double x = fr_dec(t, a), y = fr_dec(t, b);
    double r = op == ncclSum ? x + y : x * y;
    uint64_t u;
    memcpy(&u, &r, 8);
    return u;
  }
  if (fr_is_float(t)) {
    volatile float x = (float)fr_dec(t, a), y = (float)fr_dec(t, b);
    return fr_enc_f(t, op == ncclSum ? x + y : x * y);
  }
  /* Integers wrap; the tests keep them small. */
  const int sgn = t == ncclInt8 || t == ncclInt32 || t == ncclInt64;
  const unsigned bits = 8u * (unsigned)tutti_type_size(t);
  const uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
  int64_t x = (int64_t)a, y = (int64_t)b;
  if (sgn && bits < 64) {
    x = (int64_t)(a << (64 - bits)) >> (64 - bits);
    y = (int64_t)(b << (64 - bits)) >> (64 - bits);
  }
  int64_t r;
  if (op == ncclSum) {
    r = (int64_t)((uint64_t)x + (uint64_t)y);
  } else if (op == ncclProd) {
    r = (int64_t)((uint64_t)x * (uint64_t)y);
  } else if (sgn) {
    r = op == ncclMax ? (y > x ? y : x) : (y < x ? y : x);
  } else {
    r = op == ncclMax ? ((uint64_t)y > (uint64_t)x ? y : x) : ((uint64_t)y < (uint64_t)x ? y : x);
  }
  return (uint64_t)r & mask;
}

/* The PreMulSum scalar `v` as the library keeps it for type t, and x times it. */
static inline uint64_t fr_scale(ncclDataType_t t, uint64_t x, double v) {
  if (!fr_is_float(t)) {
    return fr_op(t, ncclProd, x, (uint64_t)(int64_t)v);
  }
  if (t == ncclFloat64) {
    volatile double r = fr_dec(t, x) * v;
    double rr = r;
    uint64_t u;
    memcpy(&u, &rr, 8);
    return u;
  }
  const float s = t == ncclFloat32 ? (float)v : (float)fr_dec(t, fr_enc_f(t, (float)v));
  volatile float r = (float)fr_dec(t, x) * s;
  return fr_enc_f(t, r);
}

/* One element's reduction: in[r] is rank r's input, folded in the order
 * ord[0], ord[1], ... (ranks), the accumulator on the left. Avg on floating
 * types is PreMulSum by 1/nranks (as NCCL); on integers the sum divided. */
static inline uint64_t fr_fold(ncclDataType_t t, int op, int nranks, const int* ord,
                               const uint64_t* in, double scalar) {
  int premul = op == FR_PREMUL;
  if (op == ncclAvg && fr_is_float(t)) {
    premul = 1;
    scalar = 1.0 / nranks;
  }
  const int eop = premul || op == ncclAvg ? ncclSum : op;
  uint64_t acc = 0;
  for (int k = 0; k < nranks; k++) {
    uint64_t x = in[ord[k]];
    x = premul ? fr_scale(t, x, scalar) : x;
    acc = k == 0 ? x : fr_op(t, eop, acc, x);
  }
  if (op == ncclAvg && !fr_is_float(t)) {
    const unsigned bits = 8u * (unsigned)tutti_type_size(t);
    const uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
    if (t == ncclInt8 || t == ncclInt32 || t == ncclInt64) {
      int64_t v = bits < 64 ? (int64_t)(acc << (64 - bits)) >> (64 - bits) : (int64_t)acc;
      acc = (uint64_t)(v / nranks) & mask;
    } else {
      acc = (acc / (uint64_t)nranks) & mask;
    }
  }
  return acc;
}

static inline int fr_isnan(ncclDataType_t t, uint64_t v) {
  return fr_is_float(t) && isnan(fr_dec(t, v));
}

/* Same bits; a NaN of a sum, product, average or PreMulSum may carry any
 * payload (the hardware's: GPUs return the canonical NaN). */
static inline int fr_same(ncclDataType_t t, int op, uint64_t got, uint64_t want) {
  if (got == want) {
    return 1;
  }
  return op != ncclMax && op != ncclMin && fr_isnan(t, got) && fr_isnan(t, want);
}

static inline uint64_t fr_mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* Rank `rank`'s element i for reduction `op`: mostly values of mixed
 * magnitudes, many of them cancelling across ranks (the same magnitude,
 * signs by rank), with subnormals, signed zeros (every 16th element has
 * only zeros and tiny values, so max and min meet +0 against -0), and rare
 * infinities and NaNs with payloads. Products take values near 1. Integers
 * stay small, so sums never wrap and averages are exact divisions. */
static inline uint64_t fr_input(ncclDataType_t t, int op, int rank, size_t i) {
  uint64_t h =
      fr_mix(((uint64_t)rank << 40) ^ (uint64_t)i ^ ((uint64_t)t << 52) ^ ((uint64_t)op << 58));
  const uint64_t hi = fr_mix((uint64_t)i ^ ((uint64_t)t << 52) ^ 0x5bd1e995ull);
  if (!fr_is_float(t)) {
    const int sgn = t == ncclInt8 || t == ncclInt32 || t == ncclInt64;
    int64_t v =
        op == ncclProd ? (int64_t)(h % 3) + (sgn ? -1 : 1) : (int64_t)(h % 16) - (sgn ? 8 : 0);
    const unsigned bits = 8u * (unsigned)tutti_type_size(t);
    return (uint64_t)v & (bits == 64 ? ~0ull : (1ull << bits) - 1);
  }
  /* Exponent range and mantissa bits of the type. */
  int range, mbits, emin;
  switch (t) {
    case ncclFloat16:
      range = 6, mbits = 10, emin = -14;
      break;
    case ncclBfloat16:
      range = 20, mbits = 7, emin = -126;
      break;
    case ncclFloat8e4m3:
      range = 3, mbits = 3, emin = -6;
      break;
    case ncclFloat8e5m2:
      range = 5, mbits = 2, emin = -14;
      break;
    case ncclFloat32:
      range = 40, mbits = 23, emin = -126;
      break;
    default:
      range = 60, mbits = 52, emin = -1022;
      break;
  }
  const double sign = (h >> 63) ? -1.0 : 1.0;
  const unsigned cat = (unsigned)(h % 64);
  h >>= 8;
  double v;
  if (i % 16 == 0) {
    const double zs[4] = {0.0, -0.0, -ldexp(1.0, emin), 0.0};
    v = zs[h % 4];
  } else if (cat == 2 && i % 7 == 0) {
    v = sign * INFINITY;
  } else if (cat == 3 && i % 5 == 0) {
    if (t == ncclFloat64) {
      uint64_t u = 0x7ff8000000000000ull | (h & 0x7ffffffffffffull) | ((uint64_t)(sign < 0) << 63);
      return u;
    }
    uint32_t u = 0x7fc00000u | (uint32_t)(h & 0x3fffffu) | ((uint32_t)(sign < 0) << 31);
    float f;
    memcpy(&f, &u, 4);
    return fr_enc_f(t, f);
  } else if (cat == 4) {
    v = sign * ldexp((double)(h % (1ull << (mbits < 20 ? mbits : 20))), emin - mbits);
  } else if (op == ncclProd) {
    v = sign * (1.0 + (double)(h % 1024) / 4096.0);
  } else if (cat < 40) {
    /* Cancelling: this element's magnitude on every rank, the sign by rank. */
    const double frac = (double)(hi % (1u << 16)) / 65536.0;
    v = sign * ldexp(1.0 + frac, (int)((hi >> 20) % (uint64_t)(2 * range + 1)) - range);
  } else {
    const double frac = (double)(h % (1u << 20)) / 1048576.0;
    v = sign * ldexp(1.0 + frac, (int)((h >> 24) % (uint64_t)(2 * range + 1)) - range);
  }
  if (t == ncclFloat64) {
    uint64_t u;
    memcpy(&u, &v, 8);
    return u;
  }
  return fr_enc_f(t, (float)v);
}

#endif
