/* Two threads of one process, each driving its own communicator over the
 * same hosts at once (issue 61): small and large calls interleaved, every
 * element of every result checked, with values that differ between the
 * communicators and from call to call, so that bytes of one reaching the
 * other, or a slot taken out of order, show. Across hosts both go over TCP:
 * small slots on the calling threads' own path, large ones through the
 * proxies, on the same connections (transport/tcp_direct.c).
 *   test_netns_two job N     under tuttirun (RANK, WORLD_SIZE, NCCL_COMM_ID):
 *                            communicator 0 from the job's id, 1 split from
 *                            it; each thread makes N calls ("rank R comm C
 *                            looping" after the first), or stops at an
 *                            error: "rank R comm C LOST at <epoch s> after
 *                            K calls: <why>"; then "rank R comm C: P
 *                            passed, F failed"
 *   test_netns_two threads R N  R ranks as threads of this process, each
 *                            with two communicators (2R threads); with
 *                            NCCL_SHM_DISABLE=1 every pair is TCP, for the
 *                            sanitizers, which cannot follow tuttirun */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "nccl.h"

#define SMALL_MAX 16384   /* floats: calls of 4 B - 64 KB */
#define LARGE_MIN 131072  /* floats: 512 KB - */
#define LARGE_MAX 1048576 /* 4 MB */

struct worker {
  ncclComm_t comm;
  int r, n, c; /* rank, ranks, which communicator (0 or 1) */
  long calls;
  long passed, failed;
  ncclUniqueId id; /* threads mode: the communicator's id */
  pthread_t th;
};

static double wall(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Small integers: every sum exact in float, whatever the order. */
static float val(int c, int rank, long it, size_t i) {
  return (float)(c * 1000 + rank * 7 + (int)(((size_t)it + i) % 13));
}

static int check(struct worker* w, const char* what, long it, const float* got, size_t i,
                 float want) {
  if (got[i] == want) {
    return 1;
  }
  if (w->failed++ < 5) {
    printf("rank %d comm %d: %s call %ld element %zu is %g, want %g\n", w->r, w->c, what, it, i,
           (double)got[i], (double)want);
  }
  return 0;
}

/* Call `it`: kind and size drawn alike on every rank from the
 * communicator's stream; small (even calls) and large (odd) alternate. */
static ncclResult_t one(struct worker* w, uint64_t* rng, long it, float* in, float* out) {
  const int n = w->n, r = w->r, c = w->c;
  const int kind = (int)(test_xorshift(rng) % 4);
  const uint64_t draw = test_xorshift(rng);
  size_t count = it % 2 == 0 ? 1 + draw % SMALL_MAX : LARGE_MIN + draw % (LARGE_MAX - LARGE_MIN);
  const int root = (int)(it % n);
  const size_t total = kind == 1 || kind == 2 ? count * (size_t)n : count;
  for (size_t i = 0; i < total; i++) {
    in[i] = val(c, r, it, i);
  }
  ncclResult_t res;
  const char* what;
  switch (kind) {
    case 0:
      what = "AllReduce";
      res = ncclAllReduce(in, out, count, ncclFloat, ncclSum, w->comm, NULL);
      break;
    case 1:
      what = "ReduceScatter";
      res = ncclReduceScatter(in, out, count, ncclFloat, ncclSum, w->comm, NULL);
      break;
    case 2:
      what = "AllGather";
      res = ncclAllGather(in, out, count, ncclFloat, w->comm, NULL);
      break;
    default:
      what = "Broadcast";
      res = ncclBroadcast(in, out, count, ncclFloat, root, w->comm, NULL);
      break;
  }
  if (res != ncclSuccess) {
    return res;
  }
  int ok = 1;
  for (size_t i = 0; i < count * (kind == 2 ? (size_t)n : 1) && ok; i++) {
    float want = 0;
    if (kind == 0 || kind == 1) {
      const size_t at = kind == 1 ? (size_t)r * count + i : i;
      for (int q = 0; q < n; q++) {
        want += val(c, q, it, at);
      }
    } else if (kind == 2) {
      want = val(c, (int)(i / count), it, i % count);
    } else {
      want = val(c, root, it, i);
    }
    ok = check(w, what, it, out, i, want);
  }
  w->passed += ok;
  return ncclSuccess;
}

static void* run(void* arg) {
  struct worker* w = arg;
  if (w->comm == NULL && ncclCommInitRank(&w->comm, w->n, w->id, w->r) != ncclSuccess) {
    printf("rank %d comm %d: init failed: %s\n", w->r, w->c, ncclGetLastError(NULL));
    w->failed++;
    return NULL;
  }
  const size_t cap = (size_t)LARGE_MAX * (size_t)w->n;
  float* in = malloc(cap * sizeof *in);
  float* out = malloc(cap * sizeof *out);
  uint64_t rng = 0x9E3779B97F4A7C15ull * (uint64_t)(w->c + 1);
  int lost = 0;
  for (long it = 0; it < w->calls && in != NULL && out != NULL; it++) {
    if (one(w, &rng, it, in, out) != ncclSuccess) {
      printf("rank %d comm %d LOST at %.3f after %ld calls: %s\n", w->r, w->c, wall(), it,
             ncclGetLastError(w->comm));
      lost = 1;
      break;
    }
    if (it == 0) {
      printf("rank %d comm %d looping\n", w->r, w->c);
    }
  }
  printf("rank %d comm %d: %ld passed, %ld failed\n", w->r, w->c, w->passed, w->failed);
  if (lost) {
    ncclCommAbort(w->comm);
  } else {
    ncclCommDestroy(w->comm);
  }
  free(in);
  free(out);
  return NULL;
}

static int finish(struct worker* w, int nw) {
  int rc = 0;
  for (int i = 0; i < nw; i++) {
    pthread_join(w[i].th, NULL);
    rc |= w[i].failed != 0 || w[i].passed == 0;
  }
  return rc;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char* mode = argc > 1 ? argv[1] : "job";
  if (strcmp(mode, "threads") == 0) {
    const int n = argc > 2 ? atoi(argv[2]) : 2;
    const long calls = argc > 3 ? atol(argv[3]) : 40;
    struct worker* w = calloc(2 * (size_t)n, sizeof *w);
    ncclUniqueId id[2];
    if (w == NULL || ncclGetUniqueId(&id[0]) != ncclSuccess ||
        ncclGetUniqueId(&id[1]) != ncclSuccess) {
      fprintf(stderr, "cannot start: %s\n", ncclGetLastError(NULL));
      return 1;
    }
    for (int i = 0; i < 2 * n; i++) {
      w[i] = (struct worker){.r = i / 2, .n = n, .c = i % 2, .calls = calls, .id = id[i % 2]};
      pthread_create(&w[i].th, NULL, run, &w[i]);
    }
    const int rc = finish(w, 2 * n);
    free(w);
    return rc;
  }
  const char* rs = getenv("RANK");
  const char* ns = getenv("WORLD_SIZE");
  if (rs == NULL || ns == NULL || getenv("NCCL_COMM_ID") == NULL) {
    fprintf(stderr, "%s: run under tuttirun (RANK, WORLD_SIZE, NCCL_COMM_ID)\n", argv[0]);
    return 2;
  }
  const int r = atoi(rs), n = atoi(ns);
  struct worker w[2];
  memset(w, 0, sizeof w);
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess ||
      ncclCommInitRank(&w[0].comm, n, id, r) != ncclSuccess ||
      ncclCommSplit(w[0].comm, 0, r, &w[1].comm, NULL) != ncclSuccess) {
    fprintf(stderr, "rank %d: init failed: %s\n", r, ncclGetLastError(NULL));
    return 1;
  }
  for (int c = 0; c < 2; c++) {
    w[c].r = r;
    w[c].n = n;
    w[c].c = c;
    w[c].calls = argc > 2 ? atol(argv[2]) : 200;
    pthread_create(&w[c].th, NULL, run, &w[c]);
  }
  return finish(w, 2);
}
