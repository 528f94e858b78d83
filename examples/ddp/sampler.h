/* The distributed sampler. Every epoch all ranks shuffle the sample indices
 * with the same permutation, made from (seed, epoch). Global step s of the
 * epoch takes the next `nranks * batch` indices of the permutation, and rank
 * r takes the r-th contiguous slice of them: exactly the samples one rank
 * with batch nranks * batch would take, in the same order.
 *
 * The last partial batch: when the data set size is not a multiple of the
 * global batch, the last step of an epoch has R < nranks * batch samples.
 * By default it is kept and split as evenly as the count allows (rank r takes
 * positions floor(r*R/N) .. floor((r+1)*R/N) - 1, so some ranks may get one
 * sample fewer, or none); the gradient is the sum over all R samples divided
 * by R, so it equals what a single rank computes on the same R samples.
 * With drop_last the partial batch is skipped; its samples are reshuffled
 * into the next epoch. */
#ifndef DDP_SAMPLER_H
#define DDP_SAMPLER_H

#include <stdint.h>

struct ddp_sampler {
  int n;         /* data set size */
  int nranks;    /* N */
  int rank;      /* r */
  int batch;     /* per rank */
  int drop_last; /* skip the last partial batch */
  uint64_t seed;
  int epoch; /* the permutation's epoch, -1 before the first */
  int* perm; /* n indices */
};

/* Returns 0, or -1 when out of memory. */
int ddp_sampler_init(struct ddp_sampler* s, int n, int nranks, int rank, int batch, int drop_last,
                     uint64_t seed);
void ddp_sampler_free(struct ddp_sampler* s);

/* Makes the permutation of `epoch` (a pure function of seed and epoch). */
void ddp_sampler_set_epoch(struct ddp_sampler* s, int epoch);

/* Global steps in one epoch. */
int ddp_sampler_steps(const struct ddp_sampler* s);

/* The samples of step `step` of the current epoch: this rank's indices in
 * *idx (into the permutation, valid until the next set_epoch), its count as
 * the result, and the step's global sample count in *global. */
int ddp_sampler_batch(const struct ddp_sampler* s, int step, const int** idx, int* global);

/* Any rank's share of [0, total): positions [*begin, *end). */
void ddp_sampler_share(int total, int nranks, int rank, int* begin, int* end);

#endif
