/* The synthetic data set: points in `dim` dimensions drawn from a mixture of
 * Gaussian clusters, three per class, so that the classes are not linearly
 * separable and the hidden layers have something to learn. Every rank
 * generates the same data from the seed; only IEEE arithmetic (no libm) is
 * used, so hosts with different C libraries generate the same bits. */
#ifndef DDP_DATA_H
#define DDP_DATA_H

#include <stdint.h>

/* splitmix64: a small, fast generator; the whole state is one word. */
struct ddp_rng {
  uint64_t s;
};

void ddp_rng_seed(struct ddp_rng* r, uint64_t seed, uint64_t stream);
uint64_t ddp_rng_next(struct ddp_rng* r);
/* Uniform in [0, 1), 24 random bits. */
float ddp_rng_uniform(struct ddp_rng* r);
/* Uniform integer in [0, n), n > 0. */
uint32_t ddp_rng_below(struct ddp_rng* r, uint32_t n);
/* Approximately standard normal: the sum of 12 uniforms minus 6. */
float ddp_rng_normal(struct ddp_rng* r);

struct ddp_dataset {
  int n;       /* samples */
  int dim;     /* features per sample */
  int classes; /* labels are 0 .. classes-1 */
  float* x;    /* n x dim, row-major */
  int32_t* y;  /* n */
};

enum { DDP_SPLIT_TRAIN = 0, DDP_SPLIT_VAL = 1 };

/* Generates `n` samples of split `split`: the cluster centres depend on the
 * seed only (shared by both splits), the samples on the seed and the split.
 * Returns 0, or -1 when out of memory. */
int ddp_data_make(struct ddp_dataset* d, int n, int dim, int classes, uint64_t seed, int split);
void ddp_data_free(struct ddp_dataset* d);

#endif
