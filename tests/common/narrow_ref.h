/* Reference narrow floats (half, bfloat16, fp8 e4m3 and e5m2), decoded from
 * their definitions with ldexp, and the library's conversions beside them:
 * shared by the reduction and conversion tests. */
#ifndef TUTTI_TEST_NARROW_REF_H
#define TUTTI_TEST_NARROW_REF_H

#include <math.h>
#include <stdlib.h>

#include "reduce/reduce.h"

#define NREF_UNUSED __attribute__((unused))

enum { F_HALF, F_BF16, F_E4M3, F_E5M2, NFMT };
NREF_UNUSED static const int f_w[NFMT] = {16, 16, 8, 8}, f_e[NFMT] = {5, 8, 4, 5},
                             f_m[NFMT] = {10, 7, 3, 2};
NREF_UNUSED static const unsigned f_max[NFMT] = {0x7bff, 0x7f7f, 0x7e,
                                                 0x7b}; /* largest finite code */
NREF_UNUSED static const int f_sat[NFMT] = {0, 0, 1, 1};
NREF_UNUSED static const ncclDataType_t f_type[NFMT] = {ncclFloat16, ncclBfloat16, ncclFloat8e4m3,
                                                        ncclFloat8e5m2};
NREF_UNUSED static double*
    f_vals[NFMT]; /* value of each code 0..max, then 2^(emax+1) for rounding to inf */
#define NAN_CODE 0xffffffffu

static inline double dec(int f, unsigned c) {
  int m = f_m[f], bias = (1 << (f_e[f] - 1)) - 1;
  unsigned e = (c >> m) & ((1u << f_e[f]) - 1), mt = c & ((1u << m) - 1);
  double v;
  if (f == F_E4M3 && e == 15 && mt == 7) {
    v = NAN;
  } else if (f != F_E4M3 && e == (1u << f_e[f]) - 1) {
    v = mt ? NAN : INFINITY;
  } else {
    v = e == 0 ? ldexp(mt, 1 - bias - m) : ldexp(mt + (1u << m), (int)e - bias - m);
  }
  return (c >> (f_w[f] - 1)) ? -v : v;
}

static inline int nan_code(int f, unsigned c) {
  return isnan(dec(f, c));
}

/* Nearest code, ties to the even code; saturating formats clamp to max. */
static inline unsigned ref_round(int f, double v) {
  if (isnan(v)) {
    return NAN_CODE;
  }
  unsigned sign = signbit(v) ? 1u << (f_w[f] - 1) : 0, top = f_max[f] + (f_sat[f] ? 0 : 1);
  double x = fabs(v);
  if (f_sat[f] && x > f_vals[f][f_max[f]]) {
    return sign | f_max[f];
  }
  if (x >= f_vals[f][top]) {
    return sign | top;
  }
  unsigned lo = 0, hi = top; /* vals[lo] <= x < vals[hi] */
  while (hi - lo > 1) {
    unsigned mid = (lo + hi) / 2;
    *(f_vals[f][mid] <= x ? &lo : &hi) = mid;
  }
  double d1 = x - f_vals[f][lo], d2 = f_vals[f][hi] - x;
  return sign | (d1 < d2 ? lo : d2 < d1 ? hi : (lo & 1) ? hi : lo);
}

static inline float lib_to(int f, unsigned c) {
  return f == F_HALF   ? tutti_half_to_float((uint16_t)c)
         : f == F_BF16 ? tutti_bf16_to_float((uint16_t)c)
         : f == F_E4M3 ? tutti_e4m3_to_float((uint8_t)c)
                       : tutti_e5m2_to_float((uint8_t)c);
}

static inline unsigned lib_from(int f, float x) {
  return f == F_HALF   ? tutti_float_to_half(x)
         : f == F_BF16 ? tutti_float_to_bf16(x)
         : f == F_E4M3 ? tutti_float_to_e4m3(x)
                       : tutti_float_to_e5m2(x);
}

static inline void setup_formats(void) {
  for (int f = 0; f < NFMT; f++) {
    f_vals[f] = malloc((f_max[f] + 2) * sizeof(double));
    for (unsigned c = 0; c <= f_max[f]; c++) {
      f_vals[f][c] = dec(f, c);
    }
    int emax = (1 << f_e[f]) - 2 - ((1 << (f_e[f] - 1)) - 1);
    f_vals[f][f_max[f] + 1] = ldexp(1, emax + 1);
  }
}

static inline void free_formats(void) {
  for (int f = 0; f < NFMT; f++) {
    free(f_vals[f]);
  }
}

#endif
