#include "data.h"

#include <stdlib.h>

enum { CLUSTERS_PER_CLASS = 3 };

/* How far cluster centres lie from the origin, in units of the noise. */
static const float CENTRE_SPREAD = 0.9f;

void ddp_rng_seed(struct ddp_rng* r, uint64_t seed, uint64_t stream) {
  r->s = seed * 0x9e3779b97f4a7c15ull ^ (stream + 1) * 0xd1b54a32d192ed03ull;
  (void)ddp_rng_next(r);
}

uint64_t ddp_rng_next(struct ddp_rng* r) {
  uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

float ddp_rng_uniform(struct ddp_rng* r) {
  return (float)(ddp_rng_next(r) >> 40) * (1.0f / 16777216.0f);
}

uint32_t ddp_rng_below(struct ddp_rng* r, uint32_t n) {
  return (uint32_t)(((ddp_rng_next(r) >> 32) * (uint64_t)n) >> 32);
}

float ddp_rng_normal(struct ddp_rng* r) {
  float s = 0.0f;
  for (int i = 0; i < 12; i++) {
    s += ddp_rng_uniform(r);
  }
  return s - 6.0f;
}

int ddp_data_make(struct ddp_dataset* d, int n, int dim, int classes, uint64_t seed, int split) {
  d->n = n;
  d->dim = dim;
  d->classes = classes;
  d->x = malloc(sizeof(float) * (size_t)n * (size_t)dim + 1);
  d->y = malloc(sizeof(int32_t) * (size_t)n + 1);
  int ncentres = classes * CLUSTERS_PER_CLASS;
  float* centre = malloc(sizeof(float) * (size_t)ncentres * (size_t)dim);
  if (d->x == NULL || d->y == NULL || centre == NULL) {
    free(centre);
    ddp_data_free(d);
    return -1;
  }
  struct ddp_rng r;
  ddp_rng_seed(&r, seed, 1ull << 32);
  for (int i = 0; i < ncentres * dim; i++) {
    centre[i] = CENTRE_SPREAD * ddp_rng_normal(&r);
  }
  ddp_rng_seed(&r, seed, (1ull << 32) + 1 + (uint64_t)split);
  for (int s = 0; s < n; s++) {
    int c = (int)ddp_rng_below(&r, (uint32_t)ncentres);
    const float* mu = centre + (size_t)c * (size_t)dim;
    float* x = d->x + (size_t)s * (size_t)dim;
    for (int k = 0; k < dim; k++) {
      x[k] = mu[k] + ddp_rng_normal(&r);
    }
    d->y[s] = c % classes;
  }
  free(centre);
  return 0;
}

void ddp_data_free(struct ddp_dataset* d) {
  free(d->x);
  free(d->y);
  d->x = NULL;
  d->y = NULL;
}
