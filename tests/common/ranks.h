/* Running N ranks as threads of this process. */
#ifndef TUTTI_TEST_RANKS_H
#define TUTTI_TEST_RANKS_H

#include <pthread.h>
#include <stdlib.h>

#include "nccl.h"

struct rank_ctx {
  int rank;
  int nranks;
  ncclUniqueId id;
  void* user;
  int result; /* set by the body: 1 ok, 0 failed */
};

typedef void (*rank_fn)(struct rank_ctx* ctx);

struct rank_thread_arg {
  struct rank_ctx ctx;
  rank_fn fn;
};

static void* rank_thread_main(void* p) {
  struct rank_thread_arg* a = p;
  a->fn(&a->ctx);
  return NULL;
}

/* Runs fn on n threads with a fresh unique id; returns how many reported ok. */
static inline int run_ranks(int n, rank_fn fn, void* user) {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess)
    return 0;
  struct rank_thread_arg* args = calloc((size_t)n, sizeof *args);
  pthread_t* th = calloc((size_t)n, sizeof *th);
  for (int r = 0; r < n; r++) {
    args[r].ctx = (struct rank_ctx){r, n, id, user, 0};
    args[r].fn = fn;
    pthread_create(&th[r], NULL, rank_thread_main, &args[r]);
  }
  int ok = 0;
  for (int r = 0; r < n; r++) {
    pthread_join(th[r], NULL);
    ok += args[r].ctx.result;
  }
  free(args);
  free(th);
  return ok;
}

#endif
