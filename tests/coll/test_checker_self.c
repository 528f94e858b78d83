/* The checks of the checks (tests/coll/checker.c): faults a library could
 * make, injected into results computed here, must each be caught, and
 * right results computed in any order must pass.
 *   - a swapped slot (all-gather, gather, all-to-all): any two ranks' inputs
 *     differ at the counts the suites use;
 *   - a block or chunk boundary off by a few elements: the reference at i
 *     and at i + s differ;
 *   - ncclAvg on floats: the sum in the type's arithmetic (each term x * q
 *     rounded, each addition rounded) in rank order, reversed and as a
 *     tree passes; the sum without the divide, an all-zero output and a
 *     neighbour's element fail;
 *   - every sum and PreMulSum stays exact: folding in the type in two
 *     orders gives the reference bit for bit.
 * Prints "N passed, N failed". */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "checker.h"
#include "harness.h"
#include "reduce/reduce.h"

static const ncclDataType_t floats[] = {ncclFloat16, ncclBfloat16,   ncclFloat32,
                                        ncclFloat64, ncclFloat8e4m3, ncclFloat8e5m2};

/* Rank r's input at element i, as the suites fill it. */
static double input(ncclDataType_t t, int op, int r, size_t i) {
  unsigned char b[8];
  chk_fill(b, t, op, r, i, 1);
  return chk_get(b, t, 0);
}

static void slots_differ(void) {
  for (int t = 0; t < ncclNumTypes; t++) {
    const ncclDataType_t ty = (ncclDataType_t)t;
    const size_t es = tutti_type_size(ty);
    /* Up to 8 ranks at 64 elements, up to 64 ranks at 1031. */
    const struct {
      int n;
      size_t count;
    } shapes[] = {{8, 64}, {64, 1031}};
    for (size_t k = 0; k < 2; k++) {
      const int n = shapes[k].n;
      const size_t count = shapes[k].count;
      unsigned char* all = malloc((size_t)n * count * es);
      for (int r = 0; r < n; r++) {
        chk_fill(all + (size_t)r * count * es, ty, ncclSum, r, 0, count);
      }
      int same = 0;
      for (int p = 0; p < n; p++) {
        for (int q = p + 1; q < n; q++) {
          same +=
              memcmp(all + (size_t)p * count * es, all + (size_t)q * count * es, count * es) == 0;
        }
      }
      CHECK(same == 0, "%s: %d pairs of %d ranks send the same %zu elements", tutti_type_name(ty),
            same, n, count);
      free(all);
    }
  }
}

static void shifts_differ(void) {
  const int ops[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
  for (int t = 0; t < ncclNumTypes; t++) {
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
      for (int n = 2; n <= 8; n++) {
        for (size_t s = 1; s <= 3; s++) {
          int differs = 0;
          for (size_t i = 0; i < 64 && !differs; i++) {
            differs = chk_reduce_ref((ncclDataType_t)t, ops[o], n, i, 2) !=
                      chk_reduce_ref((ncclDataType_t)t, ops[o], n, i + s, 2);
          }
          CHECK(differs, "%s op %d, %d ranks: a shift by %zu elements looks right",
                tutti_type_name((ncclDataType_t)t), ops[o], n, s);
        }
      }
    }
  }
}

/* The sum of the terms x * q in the type's arithmetic, folded in `order`
 * (0: rank order, 1: reversed, 2: pairs, then pairs of pairs). */
static double fold_avg(ncclDataType_t t, int n, size_t i, int order) {
  const double q = chk_round(t, 1.0 / n);
  double v[64] = {0};
  for (int r = 0; r < n; r++) {
    v[order == 1 ? n - 1 - r : r] = chk_round(t, input(t, ncclSum, r, i) * q);
  }
  if (order == 2) {
    for (int w = 1; w < n; w *= 2) {
      for (int r = 0; r + w < n; r += 2 * w) {
        v[r] = chk_round(t, v[r] + v[r + w]);
      }
    }
    return v[0];
  }
  double acc = v[0];
  for (int r = 1; r < n; r++) {
    acc = chk_round(t, acc + v[r]);
  }
  return acc;
}

static void avg_bound(void) {
  const int ns[] = {2, 3, 5, 7, 8, 16, 64};
  for (size_t f = 0; f < sizeof floats / sizeof floats[0]; f++) {
    const ncclDataType_t t = floats[f];
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
      const int n = ns[k];
      int right = 1, nodiv = 0, zero = 0, neighbour = 0;
      for (size_t i = 0; i < 2048; i++) {
        const double want = chk_round(t, chk_reduce_ref(t, ncclAvg, n, i, 0));
        for (int order = 0; order < 3; order++) {
          right &= chk_equal(t, ncclAvg, n, i, fold_avg(t, n, i, order), want);
        }
        double sum = 0;
        for (int r = 0; r < n; r++) {
          sum += input(t, ncclSum, r, i);
        }
        nodiv |= !chk_equal(t, ncclAvg, n, i, chk_round(t, sum), want);
        zero |= !chk_equal(t, ncclAvg, n, i, 0.0, want);
        neighbour |= !chk_equal(t, ncclAvg, n, i, fold_avg(t, n, i + 1, 0), want);
      }
      CHECK(right, "%s avg, %d ranks: a right result in some order fails", tutti_type_name(t), n);
      CHECK(nodiv, "%s avg, %d ranks: the sum without the divide passes", tutti_type_name(t), n);
      CHECK(zero, "%s avg, %d ranks: an all-zero output passes", tutti_type_name(t), n);
      CHECK(neighbour, "%s avg, %d ranks: the neighbouring element passes", tutti_type_name(t), n);
    }
  }
}

/* Sums and PreMulSums by 2 folded in the type, forwards and backwards,
 * equal the reference: the inputs keep every partial result exact. */
static void sums_exact(void) {
  const int ns[] = {2, 3, 8, 64};
  for (int t = 0; t < ncclNumTypes; t++) {
    const ncclDataType_t ty = (ncclDataType_t)t;
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
      const int n = ns[k];
      int ok = 1;
      for (size_t i = 0; i < 1024 && ok; i++) {
        for (int pre = 0; pre < 2 && ok; pre++) {
          const int op = pre ? ncclNumOps : ncclSum;
          const double m = pre ? 2 : 1;
          double fw = 0, bw = 0;
          for (int r = 0; r < n; r++) {
            fw = chk_round(ty, fw + chk_round(ty, input(ty, ncclSum, r, i) * m));
            bw = chk_round(ty, bw + chk_round(ty, input(ty, ncclSum, n - 1 - r, i) * m));
          }
          const double want = chk_round(ty, chk_reduce_ref(ty, op, n, i, 2));
          ok = fw == want && bw == want;
        }
      }
      CHECK(ok, "%s, %d ranks: a sum in the type's arithmetic is not exact", tutti_type_name(ty),
            n);
    }
  }
}

int main(void) {
  slots_differ();
  shifts_differ();
  avg_bound();
  sums_exact();
  return test_summary("checker_self");
}
