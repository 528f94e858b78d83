/* Bootstrap ranks as threads, shared by the bootstrap tests: each rank
 * joins, allgathers a pattern, checks it, and passes barriers. */
#ifndef TUTTI_TEST_BOOT_RANKS_H
#define TUTTI_TEST_BOOT_RANKS_H

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bootstrap/bootstrap.h"
#include "harness.h"
#include "util/check.h"
#include "util/socket.h"

#define MAXR 64

struct rank_arg {
  ncclUniqueId id;
  int rank, nranks, keep, fake;
  double timeout, delay;
  size_t bytes;
  volatile int* abort_flag;
  ncclResult_t res;
  int data_ok;
  double done_at;
  char err[1024];
  struct tutti_bootstrap* b;
};

static inline void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
}

static inline void fill(unsigned char* p, int rank, size_t bytes) {
  for (size_t i = 0; i < bytes; i++) {
    p[i] = (unsigned char)(rank * 131 + i * 7 + (i >> 8));
  }
}

static inline void* rank_main(void* p) {
  struct rank_arg* a = p;
  sleep_s(a->delay);
  a->res = tutti_bootstrap_init(&a->id, a->rank, a->nranks, a->timeout, a->abort_flag, &a->b);
  if (a->res == ncclSuccess && a->bytes > 0) {
    unsigned char* buf = malloc(a->bytes * (size_t)a->nranks);
    unsigned char* want = malloc(a->bytes);
    memset(buf, 0xee, a->bytes * (size_t)a->nranks);
    fill(buf + (size_t)a->rank * a->bytes, a->rank, a->bytes);
    a->res = tutti_bootstrap_allgather(a->b, buf, a->bytes);
    a->data_ok = 1;
    for (int r = 0; r < a->nranks && a->res == ncclSuccess; r++) {
      fill(want, r, a->bytes);
      a->data_ok &= memcmp(want, buf + (size_t)r * a->bytes, a->bytes) == 0;
    }
    free(buf);
    free(want);
  }
  for (int i = 0; i < 3 && a->res == ncclSuccess; i++) {
    a->res = tutti_bootstrap_barrier(a->b);
  }
  if (a->res == ncclSuccess && a->bytes > 0) {
    a->res = tutti_bootstrap_allgather(a->b, NULL, 0);
    a->data_ok &= tutti_bootstrap_address(a->b, a->nranks - 1)[0] != '\0';
  }
  snprintf(a->err, sizeof a->err, "%s", a->res == ncclSuccess ? "" : tutti_last_error());
  a->done_at = tutti_socket_now();
  if (!a->keep) {
    tutti_bootstrap_close(a->b);
    a->b = NULL;
  }
  return NULL;
}

/* Runs args[0..n) as threads and waits for them all. */
static inline void run(struct rank_arg* args, int n) {
  pthread_t t[MAXR + 4];
  for (int i = 0; i < n; i++) {
    pthread_create(&t[i], NULL, rank_main, &args[i]);
  }
  for (int i = 0; i < n; i++) {
    pthread_join(t[i], NULL);
  }
}

static inline void setup(struct rank_arg* a, int n, const ncclUniqueId* id, int nranks,
                         double timeout, size_t bytes) {
  memset(a, 0, sizeof *a * (size_t)n);
  for (int i = 0; i < n; i++) {
    a[i].id = *id;
    a[i].rank = i;
    a[i].nranks = nranks;
    a[i].timeout = timeout;
    a[i].bytes = bytes;
  }
}

static inline ncclUniqueId new_id(void) {
  ncclUniqueId id;
  ncclResult_t r = tutti_bootstrap_get_unique_id(&id);
  CHECK(r == ncclSuccess, "get_unique_id: %s", tutti_last_error());
  return id;
}

static inline void expect_all(struct rank_arg* a, int n, ncclResult_t want, const char* text,
                              const char* what) {
  for (int i = 0; i < n; i++) {
    CHECK(a[i].res == want && strstr(a[i].err, text) != NULL, "%s: rank %d got %d: %s", what,
          a[i].rank, (int)a[i].res, a[i].err);
  }
}

#endif
