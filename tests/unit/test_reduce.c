/* Host reductions: every type x op x flags against a scalar reference, every
 * narrow-float code through the vector loops, in each instruction-set
 * version of them; prints throughput. (Conversions: test_convert.c.) */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "narrow_ref.h"
#include "reduce/reduce.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
  return test_xorshift(&rng);
}

/* ---- Element-wise reference for tutti_reduce / tutti_copy. ---- */
enum { E_SUM, E_PROD, E_MAX, E_MIN, E_SUMSCALE, E_SUMDIV, E_SCALE, E_DIV, E_COPY };

static int narrow_fmt(ncclDataType_t t) {
  for (int f = 0; f < NFMT; f++) {
    if (f_type[f] == t) {
      return f;
    }
  }
  return -1;
}

static int is_signed(ncclDataType_t t) {
  return t == ncclInt8 || t == ncclInt32 || t == ncclInt64;
}

/* Returns 1 when the reference result is a NaN (compared by NaN-ness only).
 * The product goes through a volatile so that it is rounded on its own. */
#define REF_FLOAT(T, SC)                                                                  \
  static int ref_##T(int e, const struct tutti_redop* op, const void* px, const void* py, \
                     void* out) {                                                         \
    T x, y = 0, s = op->scalar.SC, dv = (T)(op->divisor ? op->divisor : 1);               \
    memcpy(&x, px, sizeof(T));                                                            \
    if (py) {                                                                             \
      memcpy(&y, py, sizeof(T));                                                          \
    }                                                                                     \
    volatile T p = y * s;                                                                 \
    int nan = isnan(x) || isnan(y);                                                       \
    T mx = nan ? (T)NAN : y > x ? y : x, mn = nan ? (T)NAN : y < x ? y : x;               \
    T r = e == E_SUM        ? x + y                                                       \
          : e == E_PROD     ? x * y                                                       \
          : e == E_MAX      ? mx                                                          \
          : e == E_MIN      ? mn                                                          \
          : e == E_SUMSCALE ? x + p                                                       \
          : e == E_SUMDIV   ? (x + y) / dv                                                \
          : e == E_SCALE    ? x * s                                                       \
                            : x / dv;                                                        \
    memcpy(out, &r, sizeof(T));                                                           \
    return isnan(r);                                                                      \
  }
REF_FLOAT(float, f32)
REF_FLOAT(double, f64)

/* Computed in double (exact for these sums and products) and rounded once;
 * max/min re-encode the pick, so fp8's saturation turns an inf into its max. */
static int ref_narrow(int f, int e, const struct tutti_redop* op, unsigned cx, unsigned cy,
                      unsigned* out) {
  double x = dec(f, cx), y = dec(f, cy), s = dec(f, f_w[f] == 8 ? op->scalar.u8 : op->scalar.u16);
  float dv = (float)(op->divisor ? op->divisor : 1);
  int nan = isnan(x) || isnan(y);
  unsigned p = ref_round(f, e == E_SUMSCALE ? y * s : x + y); /* rounded to the type first */
  double pv = p == NAN_CODE ? NAN : dec(f, p);
  *out = ref_round(f, e == E_SUM        ? x + y
                      : e == E_PROD     ? x * y
                      : e == E_MAX      ? (nan     ? NAN
                                           : y > x ? y
                                                   : x)
                      : e == E_MIN      ? (nan     ? NAN
                                           : y < x ? y
                                                   : x)
                      : e == E_SUMSCALE ? x + pv
                      : e == E_SUMDIV   ? (float)pv / dv
                      : e == E_SCALE    ? x * s
                                        : (float)x / dv);
  return *out == NAN_CODE;
}

static uint64_t load_int(const void* p, size_t sz, int sgn) {
  uint64_t v = 0;
  memcpy(&v, p, sz);
  if (sgn && sz < 8 && (v >> (8 * sz - 1))) {
    v |= ~0ull << (8 * sz);
  }
  return v;
}

/* Integer results are computed modulo 2^64, then truncated to the width. */
static void ref_int(ncclDataType_t t, int e, const struct tutti_redop* op, const void* px,
                    const void* py, void* out) {
  size_t sz = tutti_type_size(t);
  int sgn = is_signed(t);
  uint64_t x = load_int(px, sz, sgn), y = py ? load_int(py, sz, sgn) : 0, q;
  uint64_t s = load_int(&op->scalar, sz, sgn), div = op->divisor ? op->divisor : 1;
  int ygt = sgn ? (int64_t)y > (int64_t)x : y > x, ylt = sgn ? (int64_t)y < (int64_t)x : y < x;
  q = e == E_SUMDIV ? x + y : x;
  memcpy(out, &q, sz);
  q = load_int(out, sz, sgn); /* the sum wraps to the type before the division */
  q = sgn ? (uint64_t)((int64_t)q / (int64_t)div) : q / div;
  uint64_t r = e == E_SUM        ? x + y
               : e == E_PROD     ? x * y
               : e == E_MAX      ? (ygt ? y : x)
               : e == E_MIN      ? (ylt ? y : x)
               : e == E_SUMSCALE ? x + y * s
               : e == E_SCALE    ? x * s
                                 : q;
  memcpy(out, &r, sz);
}

/* Returns 1 when the result is a NaN. */
static int ref_elem(ncclDataType_t t, int e, const struct tutti_redop* op, const void* x,
                    const void* y, void* out) {
  int f = narrow_fmt(t);
  size_t sz = tutti_type_size(t);
  unsigned cx = 0, cy = 0, r;
  if (e == E_COPY) {
    memcpy(out, x, sz);
    return 0;
  } else if (f >= 0) {
    memcpy(&cx, x, sz);
    memcpy(&cy, y ? y : x, sz);
    int isn = ref_narrow(f, e, op, cx, cy, &r);
    memcpy(out, &r, sz);
    return isn;
  } else if (t == ncclFloat32 || t == ncclFloat64) {
    return t == ncclFloat32 ? ref_float(e, op, x, y, out) : ref_double(e, op, x, y, out);
  }
  ref_int(t, e, op, x, y, out);
  return 0;
}

static int out_is_nan(ncclDataType_t t, const void* p) {
  unsigned c = 0;
  float fv = 0;
  double dv = 0;
  memcpy(narrow_fmt(t) >= 0 ? (void*)&c
         : t == ncclFloat32 ? (void*)&fv
                            : (void*)&dv,
         p, tutti_type_size(t));
  return narrow_fmt(t) >= 0 ? nan_code(narrow_fmt(t), c) : isnan(fv) || isnan(dv);
}

static void random_elem(ncclDataType_t t, void* p) {
  uint64_t r = rnd();
  if (t == ncclFloat32 || t == ncclFloat64) {
    static const double special[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1e-310, 3e38};
    double v =
        (rnd() % 64 == 0) ? special[r % 7] : ldexp((double)(int64_t)r, -60 + (int)(rnd() % 40));
    float fv = (float)v;
    memcpy(p, t == ncclFloat32 ? (void*)&fv : (void*)&v, tutti_type_size(t));
  } else {
    memcpy(p, &r, tutti_type_size(t));
  }
}

static const ncclDataType_t all_types[] = {
    ncclInt8,    ncclUint8,   ncclInt32,   ncclUint32,   ncclInt64,      ncclUint64,
    ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
static const size_t counts[] = {0, 1, 2, 3, 7, 15, 16, 17, 31, 33, 255, 256, 257, 1000, 4099};
#define MAXN 4099
#define PAD 16

static void random_op(struct tutti_redop* op, ncclDataType_t t, int kind) {
  memset(op, 0, sizeof(*op));
  op->type = t;
  op->kind = (enum tutti_red_kind)kind;
  op->divisor = 1 + rnd() % 9;
  double s = ((double)(rnd() % 2001) - 1000) / 37.0;
  int f = narrow_fmt(t);
  if (f >= 0) {
    unsigned c = lib_from(f, (float)(s / 10));
    op->scalar.u16 = (uint16_t)c; /* u8 shares the low byte */
  } else if (t == ncclFloat32) {
    op->scalar.f32 = (float)s;
  } else if (t == ncclFloat64) {
    op->scalar.f64 = s;
  } else {
    op->scalar.i64 = (int64_t)(rnd() % 11) - 5; /* little-endian: every width reads the low bytes */
  }
}

/* Buffers a, b, d each filled around the data with their own byte; dst is
 * d (mode 0), a (mode 1) or b (mode 2); offsets misalign each of them. */
static int run_case(ncclDataType_t t, int kind, int flags, size_t n, int copy, int mode,
                    const size_t off[3]) {
  static unsigned char x[2][MAXN * 8], ref[MAXN * 8], isn[MAXN], buf[3][MAXN * 8 + PAD];
  size_t sz = tutti_type_size(t), bytes = n * sz;
  int out = mode == 0 ? 2 : mode - 1;
  struct tutti_redop op;
  random_op(&op, t, kind);
  int e = kind == TUTTI_RED_PREMULSUM && (flags & TUTTI_RED_SCALE_B) ? (copy ? E_SCALE : E_SUMSCALE)
          : kind == TUTTI_RED_SUMPOSTDIV && (flags & TUTTI_RED_FINAL) ? (copy ? E_DIV : E_SUMDIV)
          : copy                                                      ? E_COPY
          : kind <= TUTTI_RED_MIN                                     ? kind
                                                                      : E_SUM;
  for (size_t i = 0; i < n; i++) {
    random_elem(t, x[0] + i * sz);
    random_elem(t, x[1] + i * sz);
    isn[i] = (unsigned char)ref_elem(t, e, &op, x[0] + i * sz, copy ? NULL : x[1] + i * sz,
                                     ref + i * sz);
  }
  for (int k = 0; k < 3; k++) {
    memset(buf[k], 0x5a + k, bytes + PAD);
    memcpy(buf[k] + off[k], x[k < 2 ? k : 0], k < 2 ? bytes : 0);
  }
  unsigned char* dst = buf[out] + off[out];
  if (copy) {
    tutti_copy(dst, buf[0] + off[0], n, &op, flags);
  } else {
    tutti_reduce(dst, buf[0] + off[0], buf[1] + off[1], n, &op, flags);
  }
  int bad = 0;
  for (size_t i = 0; i < n && !bad; i++) {
    bad = isn[i] ? !out_is_nan(t, dst + i * sz) : memcmp(dst + i * sz, ref + i * sz, sz) != 0;
  }
  /* Nothing outside dst is written, and an input not aliased stays intact. */
  for (size_t i = 0; i < bytes + PAD; i++) {
    bad |= (i < off[out] || i >= off[out] + bytes) && buf[out][i] != 0x5a + out;
  }
  for (int k = 0; k < 2 - copy; k++) {
    bad |= k != out && memcmp(buf[k] + off[k], x[k], bytes) != 0;
  }
  CHECK(!bad, "%s %s %s flags %d n %zu mode %d offsets %zu/%zu/%zu", copy ? "copy" : "reduce",
        tutti_type_name(t), tutti_red_name((enum tutti_red_kind)kind), flags, n, mode, off[0],
        off[1], off[2]);
  return bad;
}

static void test_matrix(ncclDataType_t t) {
  for (int kind = 0; kind <= TUTTI_RED_SUMPOSTDIV; kind++) {
    for (int flags = 0; flags < 4; flags++) {
      for (size_t ni = 0; ni < sizeof(counts) / sizeof(counts[0]); ni++) {
        for (int trial = 0; trial < 6; trial++) {
          size_t off[3] = {0, 0, 0};
          for (int k = 0; k < 3 && trial >= 3; k++) {
            off[k] = 1 + rnd() % 7;
          }
          run_case(t, kind, flags, counts[ni], 0, trial % 3, off);
          if (trial % 3 != 2) {
            run_case(t, kind, flags, counts[ni], 1, trial % 3, off);
          }
        }
      }
    }
  }
}

/* Every code through the vector loops: x + (-0) is x, NaNs come out quiet. */
static void test_loop_roundtrip(int f) {
  ncclDataType_t t = f_type[f];
  size_t n = 1u << f_w[f], sz = f_w[f] / 8, bad = 0;
  unsigned char* a = malloc(n * sz + 1);
  unsigned char* b = malloc(n * sz + 1);
  unsigned negzero = 1u << (f_w[f] - 1);
  for (unsigned c = 0; c < n; c++) {
    memcpy(a + 1 + c * sz, &c, sz);
    memcpy(b + c * sz, &negzero, sz);
  }
  struct tutti_redop op = {.type = t, .kind = TUTTI_RED_SUM};
  tutti_reduce(a + 1, a + 1, b, n, &op, 0);
  for (unsigned c = 0; c < n; c++) {
    unsigned got = 0, want = c;
    memcpy(&got, a + 1 + c * sz, sz);
    if (nan_code(f, c)) {
      want = f == F_HALF ? c | 0x200 : f == F_BF16 ? c | 0x40 : (c & 0x80) | 0x7f;
    } else if (isinf(dec(f, c)) && f_sat[f]) {
      want = (c & 0x80) | f_max[f];
    }
    bad += got != want;
  }
  CHECK(bad == 0, "%s: %zu codes change through the loop", tutti_type_name(t), bad);
  free(a);
  free(b);
}

/* fp8: every pair of codes, every op, through the vector loops (the half
 * arithmetic of AVX512-FP16 included), against the reference. */
static void test_fp8_pairs(int f) {
  ncclDataType_t t = f_type[f];
  if (f_w[f] != 8) {
    return;
  }
  static unsigned char x[1 << 16], y[1 << 16], d[1 << 16];
  for (unsigned i = 0; i < (1u << 16); i++) {
    x[i] = (unsigned char)(i >> 8);
    y[i] = (unsigned char)i;
  }
  for (int kind = 0; kind <= TUTTI_RED_SUMPOSTDIV; kind++) {
    struct tutti_redop op;
    random_op(&op, t, kind);
    int flags = kind >= TUTTI_RED_PREMULSUM ? TUTTI_RED_SCALE_B | TUTTI_RED_FINAL : 0;
    int e = kind == TUTTI_RED_PREMULSUM    ? E_SUMSCALE
            : kind == TUTTI_RED_SUMPOSTDIV ? E_SUMDIV
                                           : kind;
    tutti_reduce(d, x, y, 1u << 16, &op, flags);
    unsigned bad = 0, first = 0;
    for (unsigned i = 0; i < (1u << 16); i++) {
      unsigned char r;
      int isn = ref_elem(t, e, &op, &x[i], &y[i], &r);
      int wrong = isn ? !nan_code(f, d[i]) : d[i] != r;
      first = bad == 0 && wrong ? i : first;
      bad += (unsigned)wrong;
    }
    CHECK(bad == 0, "%s %s: %u of 65536 pairs wrong, first %#04x op %#04x", tutti_type_name(t),
          tutti_red_name((enum tutti_red_kind)kind), bad, x[first], y[first]);
  }
}

static void test_explicit(void) {
  struct tutti_redop op = {.type = ncclInt32, .kind = TUTTI_RED_SUMPOSTDIV, .divisor = 2};
  int32_t a[4] = {-7, 7, -8, INT32_MAX}, b[4] = {0, 0, 1, 1}, d[4];
  tutti_reduce(d, a, b, 4, &op, TUTTI_RED_FINAL);
  CHECK(d[0] == -3 && d[1] == 3 && d[2] == -3 && d[3] == INT32_MIN / 2, "%d %d %d %d", d[0], d[1],
        d[2], d[3]);
  int8_t a8[2] = {100, -128}, b8[2] = {100, -1};
  op.type = ncclInt8;
  op.divisor = 4;
  tutti_reduce(a8, a8, b8, 2, &op, TUTTI_RED_FINAL);
  CHECK(a8[0] == -14 && a8[1] == 31, "int8 avg %d %d", a8[0], a8[1]);
  op.divisor = 0; /* a caller bug, but it must not trap */
  tutti_copy(a8, a8, 2, &op, TUTTI_RED_FINAL);
  CHECK(a8[0] == -14, "divisor 0: %d", a8[0]);
  float x[3] = {1.0f, NAN, 2.0f}, y[3] = {NAN, 1.0f, 3.0f};
  op = (struct tutti_redop){.type = ncclFloat32, .kind = TUTTI_RED_MAX};
  tutti_reduce(x, x, x, 3, &op, 0); /* all three the same buffer */
  CHECK(x[0] == 1.0f && isnan(x[1]) && x[2] == 2.0f, "max x,x");
  tutti_reduce(x, x, y, 3, &op, 0);
  CHECK(isnan(x[0]) && isnan(x[1]) && x[2] == 3.0f, "max with NaN");
  CHECK(tutti_type_size(ncclBfloat16) == 2 && tutti_type_size(ncclFloat8e5m2) == 1 &&
            tutti_type_size(ncclUint64) == 8 && tutti_type_size(ncclNumTypes) == 0,
        "sizes");
  CHECK(!strcmp(tutti_type_name(ncclFloat8e4m3), "f8e4m3") &&
            !strcmp(tutti_type_name(ncclHalf), "half") &&
            !strcmp(tutti_red_name(TUTTI_RED_SUMPOSTDIV), "sumpostdiv"),
        "names");
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif

#ifndef SANITIZED
static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}
#endif

/* Printed, never asserted: best of several runs, bytes read plus written per
 * second; skipped under sanitizers, where the figures mean nothing. */
static void bench(void) {
#ifdef SANITIZED
  printf("bench: skipped (sanitizer build)\n");
#else
  size_t bytes = 64u << 20;
  unsigned char* a = malloc(bytes);
  unsigned char* b = malloc(bytes);
  unsigned char* d = malloc(bytes);
  memset(a, 0x3c, bytes); /* 1.0 in half; small in bf16 and float */
  memset(b, 0x3c, bytes);
  memset(d, 0, bytes);
  ncclDataType_t types[5] = {ncclFloat32, ncclBfloat16, ncclFloat16, ncclFloat8e4m3,
                             ncclFloat8e5m2};
  for (int k = -1; k < 5; k++) {
    double best = 1e9;
    struct tutti_redop op = {.type = k < 0 ? ncclFloat32 : types[k], .kind = TUTTI_RED_SUM};
    for (int rep = 0; rep < 5; rep++) {
      double t0 = now();
      if (k < 0) {
        memcpy(d, a, bytes);
      } else {
        tutti_reduce(d, d, b, bytes / tutti_type_size(op.type), &op, 0);
      }
      double dt = now() - t0;
      best = dt < best ? dt : best;
    }
    printf("bench %-9s %-6s 64 MB: %6.2f ms, %6.2f GB/s\n",
           k < 0 ? "memcpy" : tutti_type_name(op.type), k < 0 ? "" : "sum", best * 1e3,
           (k < 0 ? 2.0 : 3.0) * bytes / best / 1e9);
  }
  free(a);
  free(b);
  free(d);
#endif
}

/* Runs this test again with the loops capped at AVX-512 without FP16, at
 * AVX2 (and F16C), then at the baseline, so every version of them is covered
 * on a machine with them all. */
static void run_capped(const char* self, const char* isa) {
  pid_t pid = fork();
  if (pid == 0) {
    setenv("TUTTI_REDUCE_ISA", isa, 1);
    execl("/proc/self/exe", self, isa, (char*)NULL);
    _exit(127);
  }
  int status = 0;
  CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
        "run with TUTTI_REDUCE_ISA=%s: status %#x", isa, status);
}

int main(int argc, char** argv) {
  int capped = argc > 1; /* argv[1]: the TUTTI_REDUCE_ISA of this run */
  setup_formats();
  for (int f = 0; f < NFMT; f++) {
    test_loop_roundtrip(f);
    test_fp8_pairs(f);
  }
  for (size_t i = 0; i < sizeof(all_types) / sizeof(all_types[0]); i++) {
    test_matrix(all_types[i]);
  }
  if (capped) {
    printf("TUTTI_REDUCE_ISA=%s: ", argv[1]);
    return test_summary("reduce");
  }
  test_explicit();
  run_capped(argv[0], "2");
  run_capped(argv[0], "1");
  run_capped(argv[0], "0");
  bench();
  free_formats();
  return test_summary("reduce");
}
