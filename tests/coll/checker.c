/* See checker.h. */
#include "checker.h"

#include <math.h>
#include <string.h>

#include "reduce/reduce.h"

static int is_signed(ncclDataType_t t) {
  return t == ncclInt8 || t == ncclInt32 || t == ncclInt64 || t >= ncclFloat16;
}

static int is_float(ncclDataType_t t) {
  return t >= ncclFloat16;
}

/* A hash of (rank, element): inputs that identify their origin, so that a
 * wrong slot, offset, block or chunk boundary gives a wrong value, at any
 * rank count (no period in the rank or the index). */
static uint64_t mix(int r, size_t i) {
  uint64_t x =
      (uint64_t)i * 0x9E3779B97F4A7C15ull ^ ((uint64_t)(unsigned)r + 1) * 0xD1B54A32D192ED03ull;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return x;
}

/* The sums' inputs per type: values in [-amp, amp] ([0, amp] unsigned), and
 * only ranks r with (r + i) % every == 0 contribute at element i (the rest
 * give 0), so that with up to 64 ranks every partial sum, in any order, and
 * twice it (PreMulSum by 2), is an integer the type holds exactly: e5m2
 * every integer to 8 and every even one to 16 (at most 8 ranks of +-1),
 * e4m3 to 16 and 32 (16 ranks), int8 within +-64 (32 ranks), bf16 256 and
 * 512 (64 ranks of +-2), fp16 2048 and 4096 (+-16), the rest 12800 (+-100). */
static void sum_shape(ncclDataType_t t, int* amp, int* every) {
  *every = 1;
  switch (t) {
    case ncclFloat8e5m2:
      *amp = 1, *every = 8;
      break;
    case ncclFloat8e4m3:
      *amp = 1, *every = 4;
      break;
    case ncclInt8:
      *amp = 1, *every = 2;
      break;
    case ncclUint8:
      *amp = 1;
      break;
    case ncclBfloat16:
      *amp = 2;
      break;
    case ncclFloat16:
      *amp = 16;
      break;
    default:
      *amp = 100;
      break;
  }
}

/* The integer value rank r contributes at element i. */
static int value(ncclDataType_t t, int op, int r, size_t i) {
  const uint64_t h = mix(r, i);
  if (op == ncclProd) {
    /* Twos at one rank in 11 (where, shifted by element), minus ones at
     * random: products stay powers of two within 2^6 in magnitude. */
    if (((size_t)r + (size_t)(mix(-1, i) % 11)) % 11 == 0)
      return 2;
    if (is_signed(t) && (h & 7) == 0)
      return -1;
    return 1;
  }
  if (op == ncclMax || op == ncclMin) {
    /* Within what every type holds exactly (e5m2: every integer to 7). */
    const int span = t == ncclFloat8e5m2 ? 15 : 29;
    const int v = (int)(h % (uint64_t)span);
    return is_signed(t) ? v - span / 2 : v;
  }
  if (op == ncclAvg && (t == ncclInt8 || t == ncclUint8)) {
    /* The average of small integers truncates to 0: a share of the
     * element's own (the same on every rank, so the average is it), plus,
     * unsigned, a part of the rank's that the truncation leaves out. */
    const int base = t == ncclInt8 ? (int)(mix(-2, i) % 3) - 1 : (int)(mix(-2, i) % 2);
    return base + (t == ncclUint8 ? (int)(h % 2) : 0);
  }
  int amp, every;
  sum_shape(t, &amp, &every);
  if (((size_t)r + i) % (size_t)every != 0)
    return 0;
  const int v = (int)(h % (uint64_t)(2 * amp + 1));
  return is_signed(t) ? v - amp : v % (amp + 1);
}

static double to_type(ncclDataType_t t, double v) {
  switch (t) {
    case ncclFloat16:
      return tutti_half_to_float(tutti_float_to_half((float)v));
    case ncclBfloat16:
      return tutti_bf16_to_float(tutti_float_to_bf16((float)v));
    case ncclFloat8e4m3:
      return tutti_e4m3_to_float(tutti_float_to_e4m3((float)v));
    case ncclFloat8e5m2:
      return tutti_e5m2_to_float(tutti_float_to_e5m2((float)v));
    case ncclFloat32:
      return (float)v;
    default:
      return v;
  }
}

double chk_round(ncclDataType_t t, double v) {
  return to_type(t, v);
}

static void put(void* buf, ncclDataType_t t, size_t i, double v) {
  switch (t) {
    case ncclInt8:
      ((int8_t*)buf)[i] = (int8_t)v;
      break;
    case ncclUint8:
      ((uint8_t*)buf)[i] = (uint8_t)v;
      break;
    case ncclInt32:
      ((int32_t*)buf)[i] = (int32_t)v;
      break;
    case ncclUint32:
      ((uint32_t*)buf)[i] = (uint32_t)v;
      break;
    case ncclInt64:
      ((int64_t*)buf)[i] = (int64_t)v;
      break;
    case ncclUint64:
      ((uint64_t*)buf)[i] = (uint64_t)v;
      break;
    case ncclFloat16:
      ((uint16_t*)buf)[i] = tutti_float_to_half((float)v);
      break;
    case ncclBfloat16:
      ((uint16_t*)buf)[i] = tutti_float_to_bf16((float)v);
      break;
    case ncclFloat8e4m3:
      ((uint8_t*)buf)[i] = tutti_float_to_e4m3((float)v);
      break;
    case ncclFloat8e5m2:
      ((uint8_t*)buf)[i] = tutti_float_to_e5m2((float)v);
      break;
    case ncclFloat32:
      ((float*)buf)[i] = (float)v;
      break;
    case ncclFloat64:
      ((double*)buf)[i] = v;
      break;
    default:
      break;
  }
}

double chk_get(const void* buf, ncclDataType_t t, size_t i) {
  switch (t) {
    case ncclInt8:
      return ((const int8_t*)buf)[i];
    case ncclUint8:
      return ((const uint8_t*)buf)[i];
    case ncclInt32:
      return ((const int32_t*)buf)[i];
    case ncclUint32:
      return ((const uint32_t*)buf)[i];
    case ncclInt64:
      return (double)((const int64_t*)buf)[i];
    case ncclUint64:
      return (double)((const uint64_t*)buf)[i];
    case ncclFloat16:
      return tutti_half_to_float(((const uint16_t*)buf)[i]);
    case ncclBfloat16:
      return tutti_bf16_to_float(((const uint16_t*)buf)[i]);
    case ncclFloat8e4m3:
      return tutti_e4m3_to_float(((const uint8_t*)buf)[i]);
    case ncclFloat8e5m2:
      return tutti_e5m2_to_float(((const uint8_t*)buf)[i]);
    case ncclFloat32:
      return ((const float*)buf)[i];
    case ncclFloat64:
      return ((const double*)buf)[i];
    default:
      return 0;
  }
}

void chk_fill(void* buf, ncclDataType_t t, int op, int rank, size_t first, size_t n) {
  for (size_t i = 0; i < n; i++) {
    put(buf, t, i, value(t, op, rank, first + i));
  }
}

/* ncclAvg on floating types is a PreMulSum by 1/n rounded to the type
 * (api/redop.c): each term x * q rounded to the type, then added. */
static double avg_scalar(ncclDataType_t t, int nranks) {
  return to_type(t, 1.0 / nranks);
}

double chk_reduce_ref(ncclDataType_t t, int op, int nranks, size_t i, double premul) {
  if (op == ncclAvg && is_float(t)) {
    /* The exact sum of the rounded terms; chk_equal bounds the rest. */
    const double q = avg_scalar(t, nranks);
    double acc = 0;
    for (int r = 0; r < nranks; r++) {
      acc += to_type(t, value(t, ncclSum, r, i) * q);
    }
    return acc;
  }
  double acc = 0;
  for (int r = 0; r < nranks; r++) {
    double x = value(t, op == ncclNumOps ? ncclSum : op, r, i);
    if (r == 0) {
      acc = op == ncclNumOps ? x * premul : x;
      continue;
    }
    switch (op) {
      case ncclProd:
        acc *= x;
        break;
      case ncclMax:
        acc = x > acc ? x : acc;
        break;
      case ncclMin:
        acc = x < acc ? x : acc;
        break;
      case ncclNumOps:
        acc += x * premul;
        break;
      default:
        acc += x;
        break;
    }
  }
  if (op == ncclAvg) {
    acc = (double)((long long)acc / nranks); /* integers: the sum, divided, truncated */
  }
  return acc;
}

/* The unit roundoff of a floating type (half its precision's last place). */
static double unit_roundoff(ncclDataType_t t) {
  switch (t) {
    case ncclFloat64:
      return 0x1p-53;
    case ncclFloat32:
      return 0x1p-24;
    case ncclFloat16:
      return 0x1p-11;
    case ncclBfloat16:
      return 0x1p-8;
    case ncclFloat8e4m3:
      return 0x1p-4;
    default:
      return 0x1p-3; /* e5m2 */
  }
}

int chk_equal(ncclDataType_t t, int op, int nranks, size_t i, double got, double want) {
  if (op != ncclAvg || !is_float(t)) {
    return got == want; /* every input and partial result is exact */
  }
  /* Avg on floats: n terms x_r * q, each rounded to the type, then
   * additions, each rounded (in whatever order the algorithm takes). The
   * terms are exact in the reference; an addition's error is at most
   * u |partial sum|, and no partial sum exceeds sum |x_r * q| (mass); the
   * caller's `want` was rounded to the type once more (u |want|). Where
   * at most one rank contributes, nothing is left to round: exact. A result
   * of 0, one not divided, or a neighbour's misses this bound
   * (test_checker_self shows it for every type at 2 to 64 ranks). */
  const double q = avg_scalar(t, nranks), u = unit_roundoff(t);
  double mass = 0;
  int terms = 0;
  for (int r = 0; r < nranks; r++) {
    const int x = value(t, ncclSum, r, i);
    mass += fabs(to_type(t, x * q));
    terms += x != 0;
  }
  if (terms <= 1) {
    return got == want;
  }
  /* Additions of 0 are exact: terms - 1 of them round, each by at most u
   * times a partial sum, which stays within mass grown by the errors before
   * it (the second factor). */
  const double k = (double)(terms - 1) * u;
  const double tol = k * mass * (1 + k) + u * fabs(want);
  return fabs(got - want) <= tol;
}

void chk_two(ncclDataType_t t, void* out) {
  double two = 2;
  memset(out, 0, 8);
  switch (t) {
    case ncclFloat16:
      *(uint16_t*)out = tutti_float_to_half(2);
      break;
    case ncclBfloat16:
      *(uint16_t*)out = tutti_float_to_bf16(2);
      break;
    case ncclFloat8e4m3:
      *(uint8_t*)out = tutti_float_to_e4m3(2);
      break;
    case ncclFloat8e5m2:
      *(uint8_t*)out = tutti_float_to_e5m2(2);
      break;
    case ncclFloat32:
      *(float*)out = 2;
      break;
    case ncclFloat64:
      memcpy(out, &two, 8);
      break;
    default:
      *(unsigned char*)out = 2; /* little-endian integers */
      break;
  }
}
