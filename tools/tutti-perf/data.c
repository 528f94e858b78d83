/* Types and verifiable values (see data.h). */
#include "data.h"

#include <math.h>
#include <string.h>
#include <strings.h>

#include "perf.h"

struct type_info {
  const char* name;
  size_t size;
  /* Largest L such that every integer in 0..L is exact: bounds sums. */
  uint32_t exact;
  /* Largest k such that 2^k is exact: bounds products. */
  int pow2;
  /* Mantissa bits, for the tolerance of averages (0: integer type). */
  int mbits;
};

static const struct type_info types[ncclNumTypes] = {
    [ncclInt8] = {"int8", 1, 127, 6, 0},
    [ncclUint8] = {"uint8", 1, 255, 7, 0},
    [ncclInt32] = {"int32", 4, 1u << 24, 24, 0},
    [ncclUint32] = {"uint32", 4, 1u << 24, 24, 0},
    [ncclInt64] = {"int64", 8, 1u << 24, 24, 0},
    [ncclUint64] = {"uint64", 8, 1u << 24, 24, 0},
    [ncclFloat16] = {"half", 2, 2048, 15, 10},
    [ncclFloat32] = {"float", 4, 1u << 24, 24, 23},
    [ncclFloat64] = {"double", 8, 1u << 24, 24, 52},
    [ncclBfloat16] = {"bfloat16", 2, 256, 15, 7},
    [ncclFloat8e4m3] = {"f8e4m3", 1, 16, 8, 3},
    [ncclFloat8e5m2] = {"f8e5m2", 1, 8, 15, 2},
};

static const struct {
  const char* name;
  int type;
} type_aliases[] = {
    {"char", ncclInt8},       {"int", ncclInt32},          {"float16", ncclFloat16},
    {"fp16", ncclFloat16},    {"float32", ncclFloat32},    {"fp32", ncclFloat32},
    {"float64", ncclFloat64}, {"bf16", ncclBfloat16},      {"e4m3", ncclFloat8e4m3},
    {"e5m2", ncclFloat8e5m2}, {"fp8e4m3", ncclFloat8e4m3}, {"fp8e5m2", ncclFloat8e5m2}};

static const char* op_names[] = {"sum", "prod", "max", "min", "avg", "mulsum"};

size_t perf_type_size(ncclDataType_t t) {
  return types[t].size;
}

const char* perf_type_name(ncclDataType_t t) {
  return types[t].name;
}

int perf_type_parse(const char* s) {
  for (int t = 0; t < ncclNumTypes; t++) {
    if (strcasecmp(s, types[t].name) == 0) {
      return t;
    }
  }
  for (size_t i = 0; i < sizeof type_aliases / sizeof type_aliases[0]; i++) {
    if (strcasecmp(s, type_aliases[i].name) == 0) {
      return type_aliases[i].type;
    }
  }
  return -1;
}

const char* perf_op_name(int op) {
  return op >= 0 && op <= PERF_OP_MULSUM ? op_names[op] : "none";
}

int perf_op_parse(const char* s) {
  for (int op = 0; op <= PERF_OP_MULSUM; op++) {
    if (strcasecmp(s, op_names[op]) == 0) {
      return op;
    }
  }
  return -1;
}

/* Small floating formats: IEEE-like unless `fn` (e4m3: no infinities, the
 * all-ones pattern is NaN and the rest of the top binade is finite). */
struct minifloat {
  int ebits, mbits, bias, fn;
};

static const struct minifloat f16 = {5, 10, 15, 0}, bf16 = {8, 7, 127, 0}, e4m3 = {4, 3, 7, 1},
                              e5m2 = {5, 2, 15, 0};

static double mf_decode(uint32_t bits, const struct minifloat* f) {
  uint32_t emask = (1u << f->ebits) - 1, mmask = (1u << f->mbits) - 1;
  uint32_t e = (bits >> f->mbits) & emask, m = bits & mmask;
  double sign = (bits >> (f->ebits + f->mbits)) & 1 ? -1.0 : 1.0;
  if (e == emask && (!f->fn || m == mmask)) {
    return (!f->fn && m == 0) ? sign * INFINITY : NAN;
  }
  if (e == 0) {
    return sign * ldexp((double)m, 1 - f->bias - f->mbits);
  }
  return sign * ldexp((double)((1u << f->mbits) + m), (int)e - f->bias - f->mbits);
}

/* Round to nearest even; the tool only stores values that are exact, but
 * rounding keeps a stray value sane rather than garbage. */
static uint32_t mf_encode(double v, const struct minifloat* f) {
  uint32_t emask = (1u << f->ebits) - 1;
  uint32_t sign = signbit(v) ? 1u << (f->ebits + f->mbits) : 0;
  if (isnan(v)) {
    return f->fn ? 0x7f : (emask << f->mbits) | (1u << (f->mbits - 1));
  }
  double a = fabs(v);
  if (a == 0.0) {
    return sign;
  }
  int e;
  frexp(a, &e);
  int field = e - 1 + f->bias;
  uint32_t bits;
  if (field >= 1) {
    double m = nearbyint((ldexp(a, -(e - 1)) - 1.0) * (double)(1u << f->mbits));
    bits = ((uint32_t)field << f->mbits) + (uint32_t)m; /* a carry moves into the exponent */
  } else {
    bits = (uint32_t)nearbyint(ldexp(a, f->bias - 1 + f->mbits));
  }
  uint32_t max_finite = f->fn ? (emask << f->mbits) | ((1u << f->mbits) - 2)
                              : ((emask - 1) << f->mbits) | ((1u << f->mbits) - 1);
  if (bits > max_finite) {
    bits = f->fn ? max_finite : emask << f->mbits; /* saturate, or infinity */
  }
  return sign | bits;
}

double perf_load(const void* buf, size_t i, ncclDataType_t t) {
  const char* p = (const char*)buf + i * types[t].size;
  union {
    int8_t i8;
    uint8_t u8;
    uint16_t u16;
    int32_t i32;
    uint32_t u32;
    int64_t i64;
    uint64_t u64;
    float f32;
    double f64;
  } u;
  memcpy(&u, p, types[t].size);
  switch (t) {
    case ncclInt8:
      return u.i8;
    case ncclUint8:
      return u.u8;
    case ncclInt32:
      return u.i32;
    case ncclUint32:
      return u.u32;
    case ncclInt64:
      return (double)u.i64;
    case ncclUint64:
      return (double)u.u64;
    case ncclFloat16:
      return mf_decode(u.u16, &f16);
    case ncclFloat32:
      return u.f32;
    case ncclFloat64:
      return u.f64;
    case ncclBfloat16:
      return mf_decode(u.u16, &bf16);
    case ncclFloat8e4m3:
      return mf_decode(u.u8, &e4m3);
    case ncclFloat8e5m2:
      return mf_decode(u.u8, &e5m2);
    default:
      return NAN;
  }
}

void perf_store(void* buf, size_t i, ncclDataType_t t, double v) {
  char* p = (char*)buf + i * types[t].size;
  switch (t) {
    case ncclInt8:
      *(int8_t*)p = (int8_t)v;
      break;
    case ncclUint8:
      *(uint8_t*)p = (uint8_t)v;
      break;
    case ncclInt32: {
      int32_t x = (int32_t)v;
      memcpy(p, &x, 4);
      break;
    }
    case ncclUint32: {
      uint32_t x = (uint32_t)v;
      memcpy(p, &x, 4);
      break;
    }
    case ncclInt64: {
      int64_t x = (int64_t)v;
      memcpy(p, &x, 8);
      break;
    }
    case ncclUint64: {
      uint64_t x = (uint64_t)v;
      memcpy(p, &x, 8);
      break;
    }
    case ncclFloat16: {
      uint16_t x = (uint16_t)mf_encode(v, &f16);
      memcpy(p, &x, 2);
      break;
    }
    case ncclFloat32: {
      float x = (float)v;
      memcpy(p, &x, 4);
      break;
    }
    case ncclFloat64:
      memcpy(p, &v, 8);
      break;
    case ncclBfloat16: {
      uint16_t x = (uint16_t)mf_encode(v, &bf16);
      memcpy(p, &x, 2);
      break;
    }
    case ncclFloat8e4m3:
      *(uint8_t*)p = (uint8_t)mf_encode(v, &e4m3);
      break;
    case ncclFloat8e5m2:
      *(uint8_t*)p = (uint8_t)mf_encode(v, &e5m2);
      break;
    default:
      break;
  }
}

static inline uint32_t mix(uint64_t i, uint32_t salt) {
  uint64_t x =
      (i + 1) * 0x9E3779B97F4A7C15ull ^ ((uint64_t)salt << 32 | salt) * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  return (uint32_t)(x >> 32);
}

static int imin(int a, int b) {
  return a < b ? a : b;
}

void perf_gen_init(struct perf_gen* g, ncclDataType_t t, int op, int nranks, uint32_t seed) {
  const struct type_info* ti = &types[t];
  memset(g, 0, sizeof *g);
  g->type = t;
  g->op = op;
  g->nranks = nranks;
  g->seed = seed;
  uint32_t span = ti->exact < 0xffff ? ti->exact : 0xffff;
  g->mask = 1;
  while (g->mask * 2 + 1 <= span) {
    g->mask = g->mask * 2 + 1;
  }
  /* Inputs of sum are 0..3 (times a scalar up to 2 for mulsum): when the
   * type cannot hold 3*n, only some ranks add to each element. */
  int step = op == PERF_OP_MULSUM ? 6 : 3;
  g->contrib = imin(nranks, (int)(ti->exact / (uint32_t)step));
  g->pow2 = imin(nranks, ti->pow2);
  int w = nranks > 0 ? (int)((ti->exact - 1) / (uint32_t)nranks) : 0;
  g->avg_w = imin(w, 4);
  if (op == ncclAvg && ti->mbits > 0) {
    /* Floating averages pre-multiply by a rounded 1/n: allow the rounding
     * of every term and of the sum. */
    g->tol = 2.0 * (nranks + 1) * ldexp(1.0, -ti->mbits) * (g->avg_w + 1);
  }
}

double perf_gen_plain(const struct perf_gen* g, size_t gi) {
  return (double)(mix(gi, g->seed) & g->mask);
}

static int in_window(const struct perf_gen* g, int rank, size_t i, int width) {
  return width >= g->nranks || (int)((i + (size_t)rank) % (size_t)g->nranks) < width;
}

double perf_gen_input(const struct perf_gen* g, int rank, size_t i) {
  uint32_t h = mix(i, g->seed ^ ((uint32_t)rank * 0x85EBCA77u));
  switch (g->op) {
    case ncclSum:
    case PERF_OP_MULSUM:
      return in_window(g, rank, i, g->contrib) ? (double)(h & 3) : 0.0;
    case ncclProd:
      return in_window(g, rank, i, g->pow2) && (h & 1) ? 2.0 : 1.0;
    case ncclAvg: {
      if (g->avg_w < 1) {
        return 0.0;
      }
      /* w +1 on one rank and -1 on the next keeps the mean exactly w while
       * making every rank's contribution matter. */
      double w = 1.0 + (double)(mix(i, g->seed) % (uint32_t)g->avg_w);
      int n = g->nranks;
      if (n >= 2 && rank == (int)(i % (size_t)n)) {
        return w + 1.0;
      }
      if (n >= 2 && rank == (int)((i + 1) % (size_t)n)) {
        return w - 1.0;
      }
      return w;
    }
    default:
      return (double)(h & g->mask); /* max, min */
  }
}

double perf_gen_premul(int rank) {
  return 1.0 + (double)(rank & 1);
}

double perf_gen_result(const struct perf_gen* g, size_t i) {
  if (g->op == ncclAvg) {
    return g->avg_w < 1 ? 0.0 : 1.0 + (double)(mix(i, g->seed) % (uint32_t)g->avg_w);
  }
  double acc = perf_gen_input(g, 0, i);
  if (g->op == PERF_OP_MULSUM) {
    acc *= perf_gen_premul(0);
  }
  for (int r = 1; r < g->nranks; r++) {
    double v = perf_gen_input(g, r, i);
    switch (g->op) {
      case ncclProd:
        acc *= v;
        break;
      case ncclMax:
        acc = v > acc ? v : acc;
        break;
      case ncclMin:
        acc = v < acc ? v : acc;
        break;
      case PERF_OP_MULSUM:
        acc += v * perf_gen_premul(r);
        break;
      default:
        acc += v;
        break;
    }
  }
  return acc;
}

int perf_gen_wrong(const struct perf_gen* g, double got, double expected) {
  if (g->tol == 0.0) {
    return got != expected; /* also true for NaN */
  }
  return !(fabs(got - expected) <= g->tol);
}
