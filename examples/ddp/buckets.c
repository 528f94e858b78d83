#include "buckets.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double ddp_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void* comm_thread(void* arg) {
  struct ddp_buckets* bk = arg;
  pthread_mutex_lock(&bk->mu);
  for (;;) {
    while (!bk->quit && bk->next >= bk->launched) {
      pthread_cond_wait(&bk->cv, &bk->mu);
    }
    if (bk->quit) {
      break;
    }
    const struct ddp_bucket* b = &bk->b[bk->next++];
    int failed = bk->err != ncclSuccess;
    pthread_mutex_unlock(&bk->mu);
    ncclResult_t res = ncclSuccess;
    double t0 = ddp_now();
    if (!failed) { /* after a failure the rest only count as done */
      void* p = bk->base + b->begin * bk->elem;
      res = ncclAllReduce(p, p, b->end - b->begin, bk->type, ncclSum, bk->comm, NULL);
    }
    double t1 = ddp_now();
    pthread_mutex_lock(&bk->mu);
    bk->t_begin[b - bk->b] = t0;
    bk->t_end[b - bk->b] = t1;
    if (res != ncclSuccess && bk->err == ncclSuccess) {
      bk->err = res;
      snprintf(bk->why, sizeof bk->why, "ncclAllReduce of gradient bucket %d failed: %s (%s)",
               (int)(b - bk->b), ncclGetErrorString(res), ncclGetLastError(bk->comm));
    }
    bk->step.comm_s += t1 - t0;
    bk->step.buckets++;
    bk->completed++;
    pthread_cond_broadcast(&bk->cv);
  }
  pthread_mutex_unlock(&bk->mu);
  return NULL;
}

/* Buckets in order: a region joins the open bucket while it fits; a region
 * larger than a bucket is cut into bucket-sized pieces. */
static int cut(struct ddp_buckets* bk, const size_t* ends, int nregions, size_t cap) {
  size_t total = ends[nregions - 1];
  size_t most = total / cap + (size_t)nregions + 1;
  bk->b = malloc(sizeof *bk->b * most);
  bk->t_begin = malloc(sizeof(double) * most);
  bk->t_end = malloc(sizeof(double) * most);
  if (bk->b == NULL || bk->t_begin == NULL || bk->t_end == NULL) {
    return -1;
  }
  size_t open = 0; /* start of the open bucket */
  size_t start = 0;
  for (int r = 0; r < nregions; r++) {
    size_t end = ends[r];
    if (end - open > cap && start > open) { /* close the open bucket before this region */
      bk->b[bk->n++] = (struct ddp_bucket){open, start};
      open = start;
    }
    while (end - open > cap) {
      bk->b[bk->n++] = (struct ddp_bucket){open, open + cap};
      open += cap;
    }
    start = end;
  }
  if (total > open) {
    bk->b[bk->n++] = (struct ddp_bucket){open, total};
  }
  return 0;
}

int ddp_buckets_init(struct ddp_buckets* bk, ncclComm_t comm, void* base, ncclDataType_t type,
                     size_t elem, const size_t* ends, int nregions, size_t bucket_bytes,
                     int overlap) {
  memset(bk, 0, sizeof *bk);
  bk->comm = comm;
  bk->base = base;
  bk->type = type;
  bk->elem = elem;
  bk->overlap = overlap;
  size_t cap = bucket_bytes / elem;
  if (cap == 0) {
    cap = 1;
  }
  if (nregions < 1 || cut(bk, ends, nregions, cap) != 0) {
    snprintf(bk->why, sizeof bk->why, "cannot make the gradient buckets (out of memory?)");
    free(bk->b);
    free(bk->t_begin);
    free(bk->t_end);
    return -1;
  }
  pthread_mutex_init(&bk->mu, NULL);
  pthread_cond_init(&bk->cv, NULL);
  if (pthread_create(&bk->thread, NULL, comm_thread, bk) != 0) {
    snprintf(bk->why, sizeof bk->why, "cannot start the communication thread");
    free(bk->b);
    free(bk->t_begin);
    free(bk->t_end);
    return -1;
  }
  bk->running = 1;
  return 0;
}

void ddp_buckets_destroy(struct ddp_buckets* bk) {
  if (bk->running) {
    pthread_mutex_lock(&bk->mu);
    bk->quit = 1;
    pthread_cond_broadcast(&bk->cv);
    pthread_mutex_unlock(&bk->mu);
    pthread_join(bk->thread, NULL);
    pthread_mutex_destroy(&bk->mu);
    pthread_cond_destroy(&bk->cv);
  }
  free(bk->b);
  free(bk->t_begin);
  free(bk->t_end);
  memset(bk, 0, sizeof *bk);
}

void ddp_buckets_begin(struct ddp_buckets* bk) {
  pthread_mutex_lock(&bk->mu);
  bk->launched = bk->next = bk->completed = 0;
  memset(&bk->step, 0, sizeof bk->step);
  pthread_mutex_unlock(&bk->mu);
}

static void launch_upto(struct ddp_buckets* bk, size_t end) {
  pthread_mutex_lock(&bk->mu);
  int k = bk->launched;
  while (k < bk->n && bk->b[k].end <= end) {
    k++;
  }
  if (k != bk->launched) {
    bk->launched = k;
    pthread_cond_broadcast(&bk->cv);
  }
  pthread_mutex_unlock(&bk->mu);
}

void ddp_buckets_ready(struct ddp_buckets* bk, size_t end) {
  if (bk->overlap) {
    launch_upto(bk, end);
  }
}

int ddp_buckets_finish(struct ddp_buckets* bk, struct ddp_overlap* acc) {
  double t0 = ddp_now();
  launch_upto(bk, (size_t)-1);
  pthread_mutex_lock(&bk->mu);
  while (bk->completed < bk->n) {
    pthread_cond_wait(&bk->cv, &bk->mu);
  }
  bk->step.exposed_s = ddp_now() - t0;
  for (int k = 0; k < bk->n; k++) { /* the part of each all-reduce before t0 */
    double end = bk->t_end[k] < t0 ? bk->t_end[k] : t0;
    bk->step.hidden_s += end > bk->t_begin[k] ? end - bk->t_begin[k] : 0;
  }
  acc->comm_s += bk->step.comm_s;
  acc->hidden_s += bk->step.hidden_s;
  acc->exposed_s += bk->step.exposed_s;
  acc->buckets += bk->step.buckets;
  int failed = bk->err != ncclSuccess;
  pthread_mutex_unlock(&bk->mu);
  return failed ? -1 : 0;
}
