/* Narrow-float conversions (half, bfloat16, fp8 e4m3 and e5m2) checked
 * exhaustively against a table reference: every code decoded and round-
 * tripped, every value, tie and neighbour rounded, specials, random floats. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "narrow_ref.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
  return test_xorshift(&rng);
}

static int check_from(int f, float x, int* shown) {
  unsigned got = lib_from(f, x), want = ref_round(f, x);
  int ok = want == NAN_CODE ? nan_code(f, got) : got == want;
  if (!ok && (*shown)++ < 5) {
    fprintf(stderr, "fmt %d: %a -> %#x, want %#x\n", f, x, got, want);
  }
  return !ok;
}

static void test_conversions(int f) {
  unsigned ncode = 1u << f_w[f], bad_dec = 0, bad_rt = 0, bad_round = 0;
  int shown = 0;
  for (unsigned c = 0; c < ncode; c++) {
    float got = lib_to(f, c);
    double want = dec(f, c);
    uint32_t gu;
    memcpy(&gu, &got, 4);
    if (isnan(want)) {
      /* NaN stays NaN with its sign; half and e5m2 come out quiet with the payload kept. */
      int shift = 23 - f_m[f];
      unsigned sign = c >> (f_w[f] - 1), mt = c & ((1u << f_m[f]) - 1);
      uint32_t q = (sign << 31) | 0x7fc00000u | (mt << shift);
      bad_dec += !isnan(got) || (gu >> 31) != sign || ((f == F_HALF || f == F_E5M2) && gu != q);
      bad_rt += !nan_code(f, lib_from(f, got));
    } else {
      bad_dec += got != want || !signbit(got) != !signbit(want);
      /* fp8 saturates: e5m2's inf comes back as the largest finite value */
      bad_rt += lib_from(f, got) != (isinf(want) && f_sat[f] ? (c & ~0x7fu) | f_max[f] : c);
    }
  }
  /* Every value, the ties between neighbours and the floats either side of both. */
  for (unsigned c = 0; c <= f_max[f]; c++) {
    double v = f_vals[f][c], mid = (v + f_vals[f][c + 1]) / 2;
    float cand[6] = {(float)v,
                     (float)mid,
                     nextafterf((float)mid, INFINITY),
                     nextafterf((float)mid, 0),
                     nextafterf((float)v, INFINITY),
                     nextafterf((float)v, 0)};
    for (int i = 0; i < 12; i++) {
      bad_round += check_from(f, i < 6 ? cand[i] : -cand[i - 6], &shown);
    }
  }
  float special[] = {INFINITY,  -INFINITY, NAN,   -NAN,  3.4e38f, -3.4e38f,
                     1e-45f,    -1e-45f,   0.0f,  -0.0f, 65504.f, 65520.f,
                     65519.99f, 448.f,     464.f, 465.f, 57344.f, 61440.f};
  for (size_t i = 0; i < sizeof(special) / sizeof(special[0]); i++) {
    bad_round += check_from(f, special[i], &shown);
  }
  for (int i = 0; i < 400000; i++) {
    uint32_t u = (uint32_t)rnd();
    if (i & 1) { /* exponents around the format's range */
      u = (u & 0x807fffffu) | ((uint32_t)(100 + rnd() % 60) << 23);
    }
    float x;
    memcpy(&x, &u, 4);
    bad_round += check_from(f, x, &shown);
  }
  CHECK(bad_dec == 0, "fmt %d: %u codes decode wrongly", f, bad_dec);
  CHECK(bad_rt == 0, "fmt %d: %u codes do not round-trip", f, bad_rt);
  CHECK(bad_round == 0, "fmt %d: %u floats round wrongly", f, bad_round);
}

int main(void) {
  setup_formats();
  for (int f = 0; f < NFMT; f++) {
    test_conversions(f);
  }
  free_formats();
  return test_summary("convert");
}
