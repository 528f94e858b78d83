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

/* The integer value rank r contributes at element i. */
static int value(ncclDataType_t t, int op, int r, size_t i) {
  if (op == ncclProd) {
    /* A few twos and minus ones: products stay within 2^2 in magnitude. */
    if ((i + (size_t)r) % 11 == 0)
      return 2;
    if (is_signed(t) && (i + 3 * (size_t)r) % 7 == 0)
      return -1;
    return 1;
  }
  if (op == ncclMax || op == ncclMin) {
    int v = (int)((i * 7 + (size_t)r * 13) % 29);
    return is_signed(t) ? v - 14
                        : v; /* e4m3/e5m2 hold every integer up to 14 exactly?  see below */
  }
  int v = (int)((i + (size_t)r) % 3);
  return is_signed(t) ? v - 1 : v;
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
    int v = value(t, op, rank, first + i);
    /* e5m2 holds integers exactly only up to 8 in the steps sums reach: keep
     * max/min values within its exact range. */
    if (t == ncclFloat8e5m2 && (op == ncclMax || op == ncclMin))
      v = v % 8;
    put(buf, t, i, v);
  }
}

double chk_reduce_ref(ncclDataType_t t, int op, int nranks, size_t i, double premul) {
  double acc = 0;
  for (int r = 0; r < nranks; r++) {
    int v = value(t, op, r, i);
    if (t == ncclFloat8e5m2 && (op == ncclMax || op == ncclMin))
      v = v % 8;
    double x = v;
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
    acc = is_float(t) ? acc / nranks : (double)((long long)acc / nranks);
  }
  return acc;
}

int chk_equal(ncclDataType_t t, int op, int nranks, double got, double want) {
  if (op == ncclAvg && is_float(t)) {
    double eps = t == ncclFloat64      ? 1e-15
                 : t == ncclFloat32    ? 1e-6
                 : t == ncclFloat16    ? 1e-3
                 : t == ncclBfloat16   ? 8e-3
                 : t == ncclFloat8e4m3 ? 0.07
                                       : 0.13;
    /* Each of the N pre-multiplied terms is rounded, then each partial sum. */
    return fabs(got - want) <= eps * (2.0 * nranks + 2) + 1e-12;
  }
  return got == want;
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
