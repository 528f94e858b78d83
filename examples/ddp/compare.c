/* tutti-ddp-compare A B [--tol X] [--expect-differ]: compares the parameters
 * and momentum buffers of two tutti-ddp checkpoints taken at the same step.
 * Passes (exit 0) when every element differs by at most X (default 0: the
 * same bits), or with --expect-differ when some element differs by more.
 * Exit 1 when the comparison fails, 2 on bad usage or unreadable files. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"

struct diff {
  double max;    /* largest |a - b| */
  size_t at;     /* where */
  size_t differ; /* elements whose bits differ */
};

static struct diff compare(const float* a, const float* b, size_t n) {
  struct diff d = {0, 0, 0};
  for (size_t k = 0; k < n; k++) {
    if (memcmp(&a[k], &b[k], sizeof(float)) == 0) {
      continue;
    }
    d.differ++;
    double e = fabs((double)a[k] - (double)b[k]);
    if (!(e <= d.max)) { /* NaN counts as the largest difference */
      d.max = isnan(e) ? INFINITY : e;
      d.at = k;
    }
  }
  return d;
}

int main(int argc, char** argv) {
  const char* path[2] = {NULL, NULL};
  double tol = 0;
  int expect_differ = 0, np = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--tol") == 0 && i + 1 < argc) {
      tol = atof(argv[++i]);
    } else if (strcmp(argv[i], "--expect-differ") == 0) {
      expect_differ = 1;
    } else if (argv[i][0] != '-' && np < 2) {
      path[np++] = argv[i];
    } else {
      np = -1;
      break;
    }
  }
  if (np != 2) {
    fprintf(stderr, "usage: tutti-ddp-compare A B [--tol X] [--expect-differ]\n");
    return 2;
  }
  struct ddp_ckpt h[2];
  float *p[2], *v[2];
  char why[4200];
  for (int k = 0; k < 2; k++) {
    if (ddp_ckpt_load(path[k], &h[k], &p[k], &v[k], why, sizeof why) != 0) {
      fprintf(stderr, "tutti-ddp-compare: %s\n", why);
      return 2;
    }
  }
  if (h[0].nparams != h[1].nparams || h[0].step != h[1].step) {
    printf("FAIL: %s has %llu params at step %llu, %s %llu at step %llu\n", path[0],
           (unsigned long long)h[0].nparams, (unsigned long long)h[0].step, path[1],
           (unsigned long long)h[1].nparams, (unsigned long long)h[1].step);
    return 1;
  }
  size_t n = h[0].nparams;
  struct diff dp = compare(p[0], p[1], n), dv = compare(v[0], v[1], n);
  double worst = dp.max > dv.max ? dp.max : dv.max;
  printf(
      "step %llu, %zu params: %zu differ, max |diff| %.3g (param %zu: %.9g vs %.9g); "
      "momentum: %zu differ, max |diff| %.3g; tolerance %.3g\n",
      (unsigned long long)h[0].step, n, dp.differ, dp.max, dp.at, p[0][dp.at], p[1][dp.at],
      dv.differ, dv.max, tol);
  int within = worst <= tol;
  int ok = expect_differ ? !within : within;
  printf("%s: %s\n", ok ? "PASS" : "FAIL",
         expect_differ ? (within ? "the runs agree although they should not"
                                 : "the runs differ beyond the tolerance, as they should")
                       : (within ? (worst == 0 ? "identical" : "within the tolerance")
                                 : "the runs differ beyond the tolerance"));
  for (int k = 0; k < 2; k++) {
    free(p[k]);
    free(v[k]);
  }
  return ok ? 0 : 1;
}
