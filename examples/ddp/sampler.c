#include "sampler.h"

#include <stdlib.h>

#include "data.h"

int ddp_sampler_init(struct ddp_sampler* s, int n, int nranks, int rank, int batch, int drop_last,
                     uint64_t seed) {
  s->n = n;
  s->nranks = nranks;
  s->rank = rank;
  s->batch = batch;
  s->drop_last = drop_last;
  s->seed = seed;
  s->epoch = -1;
  s->perm = malloc(sizeof(int) * (size_t)n + 1);
  return s->perm != NULL ? 0 : -1;
}

void ddp_sampler_free(struct ddp_sampler* s) {
  free(s->perm);
  s->perm = NULL;
}

void ddp_sampler_set_epoch(struct ddp_sampler* s, int epoch) {
  struct ddp_rng r;
  ddp_rng_seed(&r, s->seed, (2ull << 32) + (uint64_t)epoch);
  for (int i = 0; i < s->n; i++) {
    s->perm[i] = i;
  }
  for (int i = s->n - 1; i > 0; i--) { /* Fisher-Yates */
    int j = (int)ddp_rng_below(&r, (uint32_t)i + 1);
    int t = s->perm[i];
    s->perm[i] = s->perm[j];
    s->perm[j] = t;
  }
  s->epoch = epoch;
}

int ddp_sampler_steps(const struct ddp_sampler* s) {
  long global = (long)s->nranks * s->batch;
  return (int)(s->drop_last ? s->n / global : (s->n + global - 1) / global);
}

void ddp_sampler_share(int total, int nranks, int rank, int* begin, int* end) {
  *begin = (int)((long)rank * total / nranks);
  *end = (int)((long)(rank + 1) * total / nranks);
}

int ddp_sampler_batch(const struct ddp_sampler* s, int step, const int** idx, int* global) {
  long gb = (long)s->nranks * s->batch;
  long start = (long)step * gb;
  long count = s->n - start < gb ? s->n - start : gb;
  if (count < 0) {
    count = 0;
  }
  int b, e;
  ddp_sampler_share((int)count, s->nranks, s->rank, &b, &e);
  *idx = s->perm + start + b;
  *global = (int)count;
  return e - b;
}
