/* One communicator driven from several CUDA streams, as FSDP, ZeRO trainers
 * and overlap schemes drive it: operations must run in the order the host
 * issued them whatever their streams, with exact results, and never
 * deadlock when a later operation's stream is ready before an earlier
 * one's. Each rank picks its own streams (they need not match the peers'). */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu_streams.h"

#define NSTREAMS 3
#define NSLOTS 6  /* operations in flight at once, each with its own buffers */
#define ZLAYERS 4 /* layers of the ZeRO-style step */
#define ZSLOTS 6  /* its operations per layer */

/* One local rank's side: its streams and the buffers of the operations in flight. */
struct srank {
  struct grank* base; /* the rank's communicator, rank, device */
  cudaStream_t st[NSTREAMS];
  struct grank slot[NSLOTS > ZLAYERS* ZSLOTS ? NSLOTS : ZLAYERS* ZSLOTS];
  int nslot;
  char* busy; /* target of the memsets that keep a stream busy for a while */
  cudaEvent_t ev;
};

static uint64_t rng_next(uint64_t* s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* A host function on a stream that holds it until the gate opens (bounded:
 * a test must not hang), so that the operations issued after it on other
 * streams are ready first. */
struct gate {
  volatile int open;
};

static void CUDART_CB gate_wait(void* arg) {
  struct gate* g = arg;
  struct timespec t0, t1, ts = {0, 100 * 1000};
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    if (__atomic_load_n(&g->open, __ATOMIC_ACQUIRE)) {
      return;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (t1.tv_sec - t0.tv_sec > 10) {
      return;
    }
    nanosleep(&ts, NULL);
  }
}

static const size_t BUSY_BYTES = (size_t)256 << 20;

static int srank_setup(struct srank* s, struct grank* base, int nslot, size_t cap,
                       const int* krecv) {
  memset(s, 0, sizeof *s);
  s->base = base;
  s->nslot = nslot;
  cudaSetDevice(base->dev);
  for (int i = 0; i < NSTREAMS; i++) {
    if (!cuda_ok(cudaStreamCreateWithFlags(&s->st[i], cudaStreamNonBlocking), "stream")) {
      return 0;
    }
  }
  if (!cuda_ok(cudaMalloc((void**)&s->busy, BUSY_BYTES), "cudaMalloc") ||
      !cuda_ok(cudaEventCreateWithFlags(&s->ev, cudaEventDisableTiming), "event")) {
    return 0;
  }
  for (int i = 0; i < nslot; i++) {
    struct grank* g = &s->slot[i];
    memset(g, 0, sizeof *g);
    g->comm = base->comm;
    g->rank = base->rank;
    g->nranks = base->nranks;
    g->dev = base->dev;
    g->stream = s->st[0];
    const int kr = krecv != NULL ? krecv[i] : G_MEM_DEVICE;
    if (!grank_alloc_kinds(g, cap, kr, kr)) {
      FAILF("rank %d: slot %d: allocating %zu bytes of %s memory failed", base->rank, i, cap,
            g_mem_name[kr]);
      return 0;
    }
  }
  return 1;
}

static void srank_free(struct srank* s) {
  cudaSetDevice(s->base->dev);
  for (int i = 0; i < s->nslot; i++) {
    grank_free(&s->slot[i]);
  }
  for (int i = 0; i < NSTREAMS; i++) {
    cudaStreamDestroy(s->st[i]);
  }
  cudaFree(s->busy);
  cudaEventDestroy(s->ev);
}

/* Issues case `c` on slot `k` of each of the `nl` local ranks (a group when
 * several), each on its own stream. */
static int issue_all(const struct gcase* c, struct srank* sr, int nl, int k) {
  ncclResult_t res = ncclSuccess;
  if (nl > 1) {
    ncclGroupStart();
  }
  for (int i = 0; i < nl && res == ncclSuccess; i++) {
    res = gcase_issue(c, &sr[i].slot[k]);
  }
  if (nl > 1) {
    ncclResult_t gr = ncclGroupEnd();
    res = res != ncclSuccess ? res : gr;
  }
  if (res != ncclSuccess) {
    char name[200];
    FAILF("%s: returned %d: %s", gcase_name(c, &sr[0].slot[k], name, sizeof name), (int)res,
          ncclGetLastError(sr[0].base->comm));
  }
  return res == ncclSuccess;
}

static int verify_all(const struct gcase* c, struct srank* sr, int nl, int k) {
  int ok = 1;
  for (int i = 0; i < nl; i++) {
    ok &= gcase_verify(c, &sr[i].slot[k]);
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(sr[i].base->comm, &async);
    if (async != ncclSuccess) {
      FAILF("rank %d: asynchronous error %d: %s", sr[i].base->rank, (int)async,
            ncclGetLastError(sr[i].base->comm));
      ok = 0;
    }
  }
  return ok;
}

static int prepare_all(const struct gcase* c, struct srank* sr, int nl, int k) {
  for (int i = 0; i < nl; i++) {
    if (!gcase_prepare(c, &sr[i].slot[k])) {
      char name[200];
      FAILF("%s: prepare failed", gcase_name(c, &sr[i].slot[k], name, sizeof name));
      return 0;
    }
  }
  return 1;
}

/* A random case whose size lands on one of the device paths: a few elements,
 * the low-latency lines, the mapped kernel's rounds, or the ring / copy
 * engines (tens of MB). The same on every rank (shared seed). */
static struct gcase random_case(uint64_t* rng, int n, int k) {
  static const ncclDataType_t types[] = {ncclFloat32, ncclBfloat16, ncclInt32,
                                         ncclFloat16, ncclUint8,    ncclFloat64};
  static const int colls[] = {G_ALLREDUCE, G_ALLREDUCE, G_REDUCESCATTER,
                              G_ALLGATHER, G_BROADCAST, G_REDUCE};
  struct gcase c;
  memset(&c, 0, sizeof c);
  c.coll = colls[rng_next(rng) % 6];
  c.type = types[rng_next(rng) % 6];
  c.op = gcase_reduces(c.coll) ? (int)(rng_next(rng) % (ncclNumOps + 1)) : ncclSum;
  const int band = (int)(rng_next(rng) % 8);
  const size_t es = c.type == ncclFloat64                          ? 8
                    : c.type == ncclInt32 || c.type == ncclFloat32 ? 4
                    : c.type == ncclUint8                          ? 1
                                                                   : 2;
  /* bytes per rank's part: 8 MB * 2 / n at most for the largest band */
  const size_t big = ((size_t)24 << 20) * 2 / (size_t)n;
  size_t bytes = band < 2   ? 1 + rng_next(rng) % 256
                 : band < 4 ? 1024 + rng_next(rng) % (1 << 20)
                 : band < 7 ? ((size_t)1 << 20) + rng_next(rng) % ((size_t)12 << 20)
                            : big / 2 + rng_next(rng) % (big / 2);
  bytes = bytes > big ? big : bytes; /* every rank's part fits a slot (streams_slot_bytes) */
  if (gcase_reduces(c.coll) && c.op == ncclProd) {
    bytes = bytes > 65536 ? 65536 : bytes; /* products of many elements stay exact only so far */
  }
  c.count = bytes / es > 0 ? bytes / es : 1;
  c.inplace = (int)(rng_next(rng) & 1);
  c.root = (int)(rng_next(rng) % (uint64_t)n);
  c.scalar_on_device = (int)(rng_next(rng) & 1);
  c.salt = (size_t)k * 7919 + rng_next(rng) % 1000;
  return c;
}

size_t streams_slot_bytes(int n) {
  return ((size_t)24 << 20) * 2 + 4096 + (size_t)n * 64;
}

/* Batches of NSLOTS random operations over NSTREAMS streams per rank: the
 * first one's stream held by a gate until all are issued, random work and
 * cross-stream waits in front of some, some pairs in one group. */
static void random_batches(struct srank* sr, int nl, int n, int batches, uint64_t seed) {
  struct gate gate;
  for (int b = 0; b < batches && failed == 0; b++) {
    uint64_t shared = seed * 0x9e3779b97f4a7c15ull + (uint64_t)b + 1;
    uint64_t mine = shared ^ ((uint64_t)(sr[0].base->rank + 1) * 0xbf58476d1ce4e5b9ull);
    struct gcase cs[NSLOTS];
    for (int k = 0; k < NSLOTS; k++) {
      cs[k] = random_case(&shared, n, k + b * NSLOTS);
      if (!prepare_all(&cs[k], sr, nl, k)) {
        return;
      }
    }
    gate.open = 0;
    for (int k = 0; k < NSLOTS && failed == 0; k++) {
      const int grouped = k + 1 < NSLOTS && rng_next(&shared) % 5 == 0;
      if (grouped) {
        ncclGroupStart();
      }
      for (int j = k; j <= k + grouped; j++) {
        for (int i = 0; i < nl; i++) {
          struct srank* s = &sr[i];
          const int si = (int)(rng_next(&mine) % NSTREAMS);
          cudaStream_t st = s->st[si];
          s->slot[j].stream = st;
          if (j == 0) {
            cuda_ok(cudaLaunchHostFunc(st, gate_wait, &gate), "cudaLaunchHostFunc");
          }
          const int r = (int)(rng_next(&mine) % 10);
          if (r < 3) { /* a while of other work on this stream first */
            size_t len = ((size_t)1 << 20) + rng_next(&mine) % (BUSY_BYTES - ((size_t)1 << 20));
            cuda_ok(cudaMemsetAsync(s->busy, j, len, st), "cudaMemsetAsync");
          } else if (r < 5) { /* this stream waits for another's work so far */
            cudaStream_t other = s->st[(si + 1) % NSTREAMS];
            cuda_ok(cudaEventRecord(s->ev, other), "cudaEventRecord");
            cuda_ok(cudaStreamWaitEvent(st, s->ev, 0), "cudaStreamWaitEvent");
          }
        }
        if (!issue_all(&cs[j], sr, nl, j)) {
          break;
        }
      }
      if (grouped) {
        ncclResult_t res = ncclGroupEnd();
        if (res != ncclSuccess) {
          FAILF("rank %d: a group of two failed: %s", sr[0].base->rank,
                ncclGetLastError(sr[0].base->comm));
        }
        k++;
      }
    }
    __atomic_store_n(&gate.open, 1, __ATOMIC_RELEASE);
    int ok = 1;
    for (int k = 0; k < NSLOTS; k++) {
      ok &= verify_all(&cs[k], sr, nl, k);
    }
    for (int i = 0; i < nl; i++) {
      for (int j = 0; j < NSTREAMS; j++) {
        cuda_ok(cudaStreamSynchronize(sr[i].st[j]), "cudaStreamSynchronize");
      }
    }
    if (ok) {
      passed++;
    } else {
      failed++;
    }
  }
}

/* The pattern that once hung or gave wrong sums: 40 times an allreduce of
 * 12 MB (sum) on stream A and one of 1 MB (max) on stream B, nothing
 * ordering them, then both streams synchronized. */
static void pattern_ab(struct srank* sr, int nl) {
  struct gcase a = {G_ALLREDUCE, ncclFloat32, ncclSum, (size_t)3 << 20, 0, 0, 0, 11};
  struct gcase b = {G_ALLREDUCE, ncclFloat32, ncclMax, (size_t)1 << 18, 0, 0, 0, 12};
  if (!prepare_all(&a, sr, nl, 0) || !prepare_all(&b, sr, nl, 1)) {
    return;
  }
  for (int i = 0; i < nl; i++) {
    sr[i].slot[0].stream = sr[i].st[0];
    sr[i].slot[1].stream = sr[i].st[1];
  }
  for (int it = 0; it < 40 && failed == 0; it++) {
    if (!issue_all(&a, sr, nl, 0) || !issue_all(&b, sr, nl, 1)) {
      return;
    }
  }
  int ok = verify_all(&a, sr, nl, 0) & verify_all(&b, sr, nl, 1);
  if (ok) {
    passed++;
  } else {
    FAILF("rank %d: 40 x {AR 12 MB sum on A, AR 1 MB max on B}: wrong results", sr[0].base->rank);
  }
}

/* A group whose operations name two streams: each stream first waits for
 * the other (the second operation's input is written on the first
 * operation's stream, behind a gate), and both wait for the whole group
 * (each stream then copies out the other operation's result). */
static void group_two_streams(struct srank* sr, int nl) {
  struct gcase x = {G_ALLREDUCE, ncclInt32, ncclSum, 1000003, 0, 0, 0, 21};
  struct gcase y = {G_ALLREDUCE, ncclFloat32, ncclSum, 300007, 0, 0, 0, 22};
  if (!prepare_all(&x, sr, nl, 0) || !prepare_all(&y, sr, nl, 1)) {
    return;
  }
  const size_t xb = x.count * 4, yb = y.count * 4;
  struct gate gate = {0};
  char* staged[8] = {0};
  char* copy_x[8] = {0};
  char* copy_y[8] = {0};
  for (int i = 0; i < nl; i++) {
    struct srank* s = &sr[i];
    cudaSetDevice(s->base->dev);
    if (!cuda_ok(cudaMalloc((void**)&staged[i], xb), "cudaMalloc") ||
        !cuda_ok(cudaMalloc((void**)&copy_x[i], xb), "cudaMalloc") ||
        !cuda_ok(cudaMalloc((void**)&copy_y[i], yb), "cudaMalloc") ||
        !cuda_ok(cudaMemcpy(staged[i], s->slot[0].send, xb, cudaMemcpyDefault), "cudaMemcpy") ||
        !cuda_ok(cudaMemset(s->slot[0].send, 0x77, xb), "cudaMemset") ||
        !cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize")) {
      return;
    }
    s->slot[0].stream = s->st[0]; /* x on A, its input written on B */
    s->slot[1].stream = s->st[1]; /* y on B */
    cuda_ok(cudaLaunchHostFunc(s->st[1], gate_wait, &gate), "cudaLaunchHostFunc");
    cuda_ok(cudaMemcpyAsync(s->slot[0].send, staged[i], xb, cudaMemcpyDefault, s->st[1]),
            "cudaMemcpyAsync");
  }
  ncclGroupStart();
  for (int i = 0; i < nl; i++) {
    gcase_issue(&x, &sr[i].slot[0]);
    gcase_issue(&y, &sr[i].slot[1]);
  }
  ncclResult_t res = ncclGroupEnd();
  for (int i = 0; i < nl; i++) {
    struct srank* s = &sr[i];
    cudaSetDevice(s->base->dev);
    cuda_ok(cudaMemcpyAsync(copy_y[i], s->slot[1].recv, yb, cudaMemcpyDefault, s->st[0]), "copy");
    cuda_ok(cudaMemcpyAsync(copy_x[i], s->slot[0].recv, xb, cudaMemcpyDefault, s->st[1]), "copy");
  }
  __atomic_store_n(&gate.open, 1, __ATOMIC_RELEASE);
  int ok = res == ncclSuccess;
  for (int i = 0; i < nl; i++) {
    struct srank* s = &sr[i];
    cudaSetDevice(s->base->dev);
    ok &= cuda_ok(cudaStreamSynchronize(s->st[0]), "sync") &&
          cuda_ok(cudaStreamSynchronize(s->st[1]), "sync");
    /* What each stream copied out must be the group's results. */
    char* hx = malloc(xb);
    char* hy = malloc(yb);
    char* rx = malloc(xb);
    char* ry = malloc(yb);
    ok &= hx != NULL && hy != NULL && rx != NULL && ry != NULL &&
          cudaMemcpy(hx, copy_x[i], xb, cudaMemcpyDefault) == cudaSuccess &&
          cudaMemcpy(hy, copy_y[i], yb, cudaMemcpyDefault) == cudaSuccess &&
          cudaMemcpy(rx, s->slot[0].recv, xb, cudaMemcpyDefault) == cudaSuccess &&
          cudaMemcpy(ry, s->slot[1].recv, yb, cudaMemcpyDefault) == cudaSuccess &&
          memcmp(hx, rx, xb) == 0 && memcmp(hy, ry, yb) == 0;
    ok &= gcase_verify(&x, &s->slot[0]) && gcase_verify(&y, &s->slot[1]);
    free(rx);
    free(ry);
    free(hx);
    free(hy);
    cudaFree(staged[i]);
    cudaFree(copy_x[i]);
    cudaFree(copy_y[i]);
  }
  if (ok) {
    passed++;
  } else {
    FAILF("rank %d: a group on two streams did not order them", sr[0].base->rank);
  }
}

/* A step of a ZeRO-style trainer, per layer: the compute stream works, the
 * communication stream waits for it by event, then a group of in-place
 * reduce-scatters (bf16, avg) of the gradients; the gradient norm's scalar
 * all-reduced on the compute stream; a group of in-place all-gathers of the
 * parameter shards on the communication stream; one float in managed
 * memory all-reduced on the compute stream. */
static void zero_steps(struct srank* sr, int nl, int steps) {
  for (int step = 0; step < steps && failed == 0; step++) {
    struct gcase cs[ZLAYERS * ZSLOTS];
    for (int l = 0; l < ZLAYERS; l++) {
      const size_t c = 65536 + (size_t)l * 4099 + (size_t)step;
      const size_t salt = (size_t)(step * ZLAYERS + l) * 101;
      struct gcase* z = &cs[l * ZSLOTS];
      z[0] = (struct gcase){G_REDUCESCATTER, ncclBfloat16, ncclAvg, c, 1, 0, 0, salt};
      z[1] = (struct gcase){G_REDUCESCATTER, ncclBfloat16, ncclAvg, 3 * c + 1, 1, 0, 0, salt + 1};
      z[2] = (struct gcase){G_ALLREDUCE, ncclFloat32, ncclSum, 1, 0, 0, 0, salt + 2};
      z[3] = (struct gcase){G_ALLGATHER, ncclBfloat16, ncclSum, c, 1, 0, 0, salt + 3};
      z[4] = (struct gcase){G_ALLGATHER, ncclBfloat16, ncclSum, 3 * c + 1, 1, 0, 0, salt + 4};
      z[5] = (struct gcase){G_ALLREDUCE, ncclFloat32, ncclSum, 1, 1, 0, 0, salt + 5};
    }
    for (int k = 0; k < ZLAYERS * ZSLOTS; k++) {
      if (!prepare_all(&cs[k], sr, nl, k)) {
        return;
      }
    }
    struct gate gate = {0};
    for (int i = 0; i < nl; i++) {
      cuda_ok(cudaLaunchHostFunc(sr[i].st[0], gate_wait, &gate), "cudaLaunchHostFunc");
    }
    for (int l = 0; l < ZLAYERS && failed == 0; l++) {
      const int b = l * ZSLOTS;
      for (int i = 0; i < nl; i++) {
        struct srank* s = &sr[i];
        cudaStream_t comp = s->st[0], comm = s->st[1];
        cuda_ok(cudaMemsetAsync(s->busy, l, ((size_t)32 << 20) * (size_t)(l + 1), comp), "work");
        cuda_ok(cudaEventRecord(s->ev, comp), "cudaEventRecord");
        cuda_ok(cudaStreamWaitEvent(comm, s->ev, 0), "cudaStreamWaitEvent");
        for (int k = 0; k < ZSLOTS; k++) {
          s->slot[b + k].stream = k == 2 || k == 5 ? comp : comm;
        }
      }
      /* Several local ranks' groups merge into one group, as with one. */
      ncclGroupStart();
      int ok = issue_all(&cs[b], sr, nl, b) && issue_all(&cs[b + 1], sr, nl, b + 1);
      ok = ncclGroupEnd() == ncclSuccess && ok;
      if (l % 2 == 1) { /* the norm from the reduced gradients: compute waits for them */
        for (int i = 0; i < nl; i++) {
          cuda_ok(cudaEventRecord(sr[i].ev, sr[i].st[1]), "cudaEventRecord");
          cuda_ok(cudaStreamWaitEvent(sr[i].st[0], sr[i].ev, 0), "cudaStreamWaitEvent");
        }
      }
      ok = ok && issue_all(&cs[b + 2], sr, nl, b + 2);
      ncclGroupStart();
      ok = ok && issue_all(&cs[b + 3], sr, nl, b + 3) && issue_all(&cs[b + 4], sr, nl, b + 4);
      ok = ncclGroupEnd() == ncclSuccess && ok;
      ok = ok && issue_all(&cs[b + 5], sr, nl, b + 5);
      if (!ok) {
        FAILF("rank %d: ZeRO step %d layer %d: a call failed: %s", sr[0].base->rank, step, l,
              ncclGetLastError(sr[0].base->comm));
      }
    }
    __atomic_store_n(&gate.open, 1, __ATOMIC_RELEASE);
    int ok = 1;
    for (int k = 0; k < ZLAYERS * ZSLOTS; k++) {
      ok &= verify_all(&cs[k], sr, nl, k);
    }
    for (int i = 0; i < nl; i++) {
      cuda_ok(cudaStreamSynchronize(sr[i].st[0]), "sync");
      cuda_ok(cudaStreamSynchronize(sr[i].st[1]), "sync");
    }
    if (ok) {
      passed++;
    } else {
      FAILF("rank %d: ZeRO-style step %d gave wrong results", sr[0].base->rank, step);
    }
  }
}

void run_zero(struct grank* gs, int nl, int n, int steps) {
  int kinds[ZLAYERS * ZSLOTS];
  for (int k = 0; k < ZLAYERS * ZSLOTS; k++) {
    kinds[k] = k % ZSLOTS == 5 ? G_MEM_MANAGED : G_MEM_DEVICE;
  }
  const size_t cap = (3 * ((size_t)65536 + ZLAYERS * 4099 + 16) + 1) * 2 * (size_t)n + 4096;
  struct srank* sr = calloc((size_t)nl, sizeof *sr);
  int ready = 0;
  while (sr != NULL && ready < nl &&
         srank_setup(&sr[ready], &gs[ready], ZLAYERS * ZSLOTS, cap, kinds)) {
    ready++;
  }
  if (ready == nl) {
    zero_steps(sr, nl, steps);
  }
  for (int i = 0; i < ready; i++) {
    srank_free(&sr[i]);
  }
  free(sr);
}

void run_streams(struct grank* gs, int nl, int n, int batches) {
  struct srank* sr = calloc((size_t)nl, sizeof *sr);
  int ready = 0;
  while (sr != NULL && ready < nl &&
         srank_setup(&sr[ready], &gs[ready], NSLOTS, streams_slot_bytes(n), NULL)) {
    ready++;
  }
  if (ready == nl) {
    pattern_ab(sr, nl);
    if (failed == 0) {
      group_two_streams(sr, nl);
    }
    if (failed == 0) {
      random_batches(sr, nl, n, batches, 0x7u);
    }
  }
  for (int i = 0; i < ready; i++) {
    srank_free(&sr[i]);
  }
  free(sr);
}
