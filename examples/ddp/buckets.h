/* Gradient buckets and the communication thread that all-reduces them.
 *
 * The flat gradient vector is cut into buckets of at most `bucket_bytes`,
 * walking the layers in the order backward produces them: consecutive small
 * layers share a bucket, a layer larger than a bucket is cut into several.
 * Backward reports how far the gradients are final (ddp_buckets_ready); every
 * bucket that lies entirely below that point is handed to the communication
 * thread at once, which runs ncclAllReduce (sum, in place, on the host
 * buffer) on it while backward goes on with the earlier layers. Buckets are
 * reduced in the same order on every rank, so the collectives match.
 *
 * Overlap is measured per step: `comm` is the time the thread spent in
 * ncclAllReduce, `hidden` the part of it that ran before backward ended
 * (ddp_buckets_finish is called when it ends), `exposed` the time the
 * training thread then waited in ddp_buckets_finish (the rest of the
 * communication, plus handing over and waking up). Without overlap every
 * bucket starts only in finish, and nothing is hidden. */
#ifndef DDP_BUCKETS_H
#define DDP_BUCKETS_H

#include <pthread.h>
#include <stddef.h>

#include "nccl.h"

struct ddp_bucket {
  size_t begin, end; /* elements of the flat vector */
};

struct ddp_overlap {
  double comm_s;    /* in ncclAllReduce */
  double hidden_s;  /* of that, before backward ended */
  double exposed_s; /* waited for after backward */
  long buckets;
};

struct ddp_buckets {
  ncclComm_t comm;
  ncclDataType_t type;
  size_t elem; /* bytes per element */
  char* base;
  int n;
  struct ddp_bucket* b;
  double* t_begin; /* this step's ncclAllReduce of each bucket: start, end */
  double* t_end;
  int overlap;
  pthread_t thread;
  int running;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  /* Under mu: */
  int launched;  /* buckets [0, launched) handed over this step */
  int next;      /* the next one the thread takes */
  int completed; /* finished this step */
  int quit;
  ncclResult_t err;
  char why[512];
  struct ddp_overlap step; /* this step */
};

/* Cuts [0, ends[nregions-1]) into buckets; ends[] are the ends (in elements,
 * increasing) of the regions that become final together (the layers), in
 * backward order. Starts the thread. Returns 0, or -1 with a reason in
 * why. */
int ddp_buckets_init(struct ddp_buckets* bk, ncclComm_t comm, void* base, ncclDataType_t type,
                     size_t elem, const size_t* ends, int nregions, size_t bucket_bytes,
                     int overlap);
void ddp_buckets_destroy(struct ddp_buckets* bk);

/* Before backward: no bucket in flight. */
void ddp_buckets_begin(struct ddp_buckets* bk);

/* Gradients [0, end) are final: starts the buckets inside (with overlap). */
void ddp_buckets_ready(struct ddp_buckets* bk, size_t end);

/* After backward: starts what is left, waits for every bucket. Adds this
 * step's times to *acc. Returns 0, or -1 with the reason in bk->why. */
int ddp_buckets_finish(struct ddp_buckets* bk, struct ddp_overlap* acc);

/* Seconds on a monotonic clock. */
double ddp_now(void);

#endif
