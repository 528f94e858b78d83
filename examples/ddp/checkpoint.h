/* Checkpoints: what a resumed run needs to continue exactly where a stopped
 * one left off. Rank 0 writes the file (to FILE.tmp, then renamed over FILE,
 * so a reader never sees half a file); every rank reads it to resume.
 *
 * Layout (native byte order, which the header records): the 8-byte magic
 * "TUTTIDDP", the header fields below as fixed-width integers and doubles,
 * the parameters and the momentum buffers as float arrays, and an FNV-1a
 * checksum of everything before it. Nothing else is needed: the data set,
 * the sampler's permutations and the initial parameters are functions of the
 * seed, and the training step is deterministic. */
#ifndef DDP_CHECKPOINT_H
#define DDP_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

struct ddp_ckpt {
  int32_t nlayers;
  int32_t size[DDP_MAX_LAYERS + 1];
  uint64_t seed;
  int32_t train_size;
  int32_t global_batch; /* ranks x batch: the sampler depends on it */
  int32_t drop_last;
  int32_t grad_mode;     /* enum ddp_grad_mode of the run that wrote it */
  int32_t epoch;         /* the epoch in progress */
  int32_t step_in_epoch; /* its steps done */
  uint64_t step;         /* global steps done */
  double loss_sum;       /* the epoch so far, summed over all ranks */
  int64_t correct;
  int64_t seen;
  uint64_t nparams;
};

/* Writes header, params and velocity (h->nparams each). Returns 0, or -1
 * with the reason in why. */
int ddp_ckpt_save(const char* path, const struct ddp_ckpt* h, const float* params,
                  const float* velocity, char* why, size_t whylen);

/* Reads a checkpoint; *params and *velocity are malloc'ed (h->nparams each).
 * Returns 0, or -1 with the reason in why. */
int ddp_ckpt_load(const char* path, struct ddp_ckpt* h, float** params, float** velocity, char* why,
                  size_t whylen);

/* FNV-1a over n bytes, continuing from h (start with DDP_FNV_INIT). */
#define DDP_FNV_INIT 0xcbf29ce484222325ull
uint64_t ddp_fnv(uint64_t h, const void* p, size_t n);

#endif
