/* One-sided operations on host buffers, end to end, checked byte for byte:
 * every datatype, counts 0, 1, odd, larger than a queue slot and than a
 * whole queue, unaligned offsets; several puts then one wait; signals
 * without data over every sigIdx and ctx (numRmaCtx 4); puts to self; a
 * one-sided all-to-all of every rank at once (waits after the group and in
 * it, with a collective between); windows of different sizes per rank, two
 * windows, deregister and register again; every argument error.
 * Usage: test_rma threads|procs RANKS  (RANKS: a list, "1,2,3,4")
 * NCCL_SHM_DISABLE=1 puts every pair on TCP, or on the network transport
 * when NCCL_NET_PLUGIN names a plugin. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/comm.h"
#include "procs.h"
#include "ranks.h"
#include "reduce/reduce.h"
#include "rma/internal.h"
#include "rma_common.h"

#define NCTX 4
#define WBASE (640 * 1024) /* holds 4 ranks' blocks of the largest count */
#define NWIN 3

struct rt {
  struct rma_rank k;
  char* buf[NWIN];
  ncclWindow_t win[NWIN];
  char* src;
  char* expect;
};

static size_t wsize(int which, int rank) {
  return WBASE + (size_t)rank * 4099 + (size_t)which * 8192;
}

/* Resets this rank's window to the sentinel; the barrier keeps peers'
 * puts of the next case from landing before. */
static int reset(struct rt* t, int which) {
  memset(t->buf[which], RMA_SENTINEL, wsize(which, t->k.r));
  ncclResult_t res = rma_barrier(t->k.comm);
  if (res != ncclSuccess) {
    RFAIL(&t->k, "barrier failed: %s", ncclGetLastError(t->k.comm));
  }
  return res == ncclSuccess;
}

static void expect_begin(struct rt* t, int which) {
  memset(t->expect, RMA_SENTINEL, wsize(which, t->k.r));
}

static void expect_put(struct rt* t, size_t off, int origin, uint32_t tag, size_t bytes) {
  rma_fill(t->expect + off, origin, t->k.r, tag, bytes);
}

static void expect_check(struct rt* t, int which, const char* what) {
  const size_t n = wsize(which, t->k.r);
  size_t i = 0;
  while (i < n && t->buf[which][i] == t->expect[i]) {
    i++;
  }
  RCHECK(&t->k, i == n, "%s: window %d byte %zu is 0x%02x, expected 0x%02x", what, which, i,
         i < n ? (uint8_t)t->buf[which][i] : 0, i < n ? (uint8_t)t->expect[i] : 0);
}

static int ok_call(struct rt* t, ncclResult_t res, const char* what) {
  if (res != ncclSuccess) {
    RFAIL(&t->k, "%s returned %d: %s", what, (int)res, ncclGetLastError(t->k.comm));
  }
  return res == ncclSuccess;
}

/* Rank r puts k (at most 3) pieces of `count` to the next rank and waits
 * for k signals from the previous one. */
static void ring_case(struct rt* t, ncclDataType_t type, size_t count, size_t off, int k, int sig,
                      int ctx, uint32_t tag) {
  const int n = t->k.n, r = t->k.r, next = (r + 1) % n, prev = (r + n - 1) % n;
  const size_t bytes = count * tutti_type_size(type);
  char what[128];
  snprintf(what, sizeof what, "ring %s count %zu offset %zu x%d sig %d ctx %d",
           tutti_type_name(type), count, off, k, sig, ctx);
  if (!reset(t, 0)) {
    return;
  }
  for (int j = 0; j < k; j++) {
    /* One source buffer, refilled: a put's buffer is reusable once it returns. */
    rma_fill(t->src, r, next, tag + (uint32_t)j, bytes);
    if (!ok_call(t,
                 ncclPutSignal(t->src, count, type, next, t->win[0], off + (size_t)j * bytes, sig,
                               ctx, 0, t->k.comm, NULL),
                 what)) {
      return;
    }
  }
  /* One desc of opCnt k, or (odd tags) k descs of 1 naming the same signal. */
  ncclWaitSignalDesc_t d[3] = {{k, prev, sig, ctx}, {1, prev, sig, ctx}, {1, prev, sig, ctx}};
  const int split = k > 1 && tag % 2 == 1;
  if (split) {
    d[0].opCnt = 1;
  }
  if (!ok_call(t, ncclWaitSignal(split ? k : 1, d, t->k.comm, NULL), what)) {
    return;
  }
  expect_begin(t, 0);
  for (int j = 0; j < k; j++) {
    expect_put(t, off + (size_t)j * bytes, prev, tag + (uint32_t)j, bytes);
  }
  expect_check(t, 0, what);
}

/* Every rank puts a block to every rank (itself too) at offset off + its
 * rank x bytes of window `which`, in one group, then waits for every rank's
 * signal: after the group, or inside it (with a collective between). */
static void a2a_case(struct rt* t, int which, ncclDataType_t type, size_t count, size_t off,
                     int in_group, int sig, int ctx, uint32_t tag) {
  const int n = t->k.n, r = t->k.r;
  const size_t bytes = count * tutti_type_size(type);
  char what[128];
  snprintf(what, sizeof what, "all-to-all window %d %s count %zu offset %zu%s", which,
           tutti_type_name(type), count, off, in_group ? " (waits in the group)" : "");
  if (!reset(t, which)) {
    return;
  }
  char* srcs = malloc((size_t)n * bytes + 1);
  ncclWaitSignalDesc_t* d = calloc((size_t)n, sizeof *d);
  int32_t x = r, sum = 0;
  ncclGroupStart();
  for (int k = 0; k < n; k++) {
    const int p = (r + 1 + k) % n; /* spread: not everyone at rank 0 first */
    rma_fill(srcs + (size_t)p * bytes, r, p, tag, bytes);
    ncclPutSignal(srcs + (size_t)p * bytes, count, type, p, t->win[which], off + (size_t)r * bytes,
                  sig, ctx, 0, t->k.comm, NULL);
    d[k] = (ncclWaitSignalDesc_t){1, p, sig, ctx};
  }
  if (in_group) {
    ncclAllReduce(&x, &sum, 1, ncclInt32, ncclSum, t->k.comm, NULL);
    ncclWaitSignal(n, d, t->k.comm, NULL);
  }
  int ok = ok_call(t, ncclGroupEnd(), what);
  if (ok && !in_group) {
    ok = ok_call(t, ncclWaitSignal(n, d, t->k.comm, NULL), what);
  }
  if (ok) {
    RCHECK(&t->k, !in_group || sum == n * (n - 1) / 2, "%s: allreduce in the group gave %d", what,
           (int)sum);
    expect_begin(t, which);
    for (int p = 0; p < n; p++) {
      expect_put(t, off + (size_t)p * bytes, p, tag, bytes);
    }
    expect_check(t, which, what);
  }
  free(srcs);
  free(d);
}

/* Signals without data on every (sigIdx, ctx), in counts that differ per
 * pair, awaited in one call; then the counters themselves: each pair got
 * exactly its own signals (none leaked into another). */
static void signals_case(struct rt* t) {
  const int n = t->k.n, r = t->k.r, next = (r + 1) % n, prev = (r + n - 1) % n;
  ncclWaitSignalDesc_t d[NCTX * TUTTI_RMA_SIGNALS];
  int nd = 0;
  if (!reset(t, 0)) {
    return;
  }
  for (int c = 0; c < NCTX; c++) {
    for (int s = 0; s < TUTTI_RMA_SIGNALS; s++) {
      const int cnt = 1 + (s + 3 * c) % 3;
      for (int i = 0; i < cnt; i++) {
        /* A put of 0 elements is a signal too. */
        ncclResult_t res = i == 1 ? ncclPutSignal(t->src, 0, ncclInt8, next, t->win[0], 0, s, c, 0,
                                                  t->k.comm, NULL)
                                  : ncclSignal(next, s, c, 0, t->k.comm, NULL);
        if (!ok_call(t, res, "signal")) {
          return;
        }
      }
      d[nd++] = (ncclWaitSignalDesc_t){cnt, prev, s, c};
    }
  }
  struct tutti_rma* rma = ((struct ncclComm*)t->k.comm)->rma;
  uint64_t before[NCTX * TUTTI_RMA_SIGNALS];
  for (int i = 0; i < nd; i++) {
    before[i] = rma->consumed[tutti_rma_sig_index(rma, d[i].ctx, d[i].sigIdx, prev)];
  }
  if (!ok_call(t, ncclWaitSignal(nd, d, t->k.comm, NULL), "wait for every signal")) {
    return;
  }
  for (int i = 0; i < nd; i++) {
    const size_t idx = tutti_rma_sig_index(rma, d[i].ctx, d[i].sigIdx, prev);
    const uint64_t a = __atomic_load_n(&rma->arrived[idx], __ATOMIC_ACQUIRE);
    RCHECK(&t->k, a == rma->consumed[idx] && a - before[i] == (uint64_t)d[i].opCnt,
           "sigIdx %d ctx %d: %llu arrived, %llu consumed, %d sent", d[i].sigIdx, d[i].ctx,
           (unsigned long long)a, (unsigned long long)rma->consumed[idx], d[i].opCnt);
  }
  expect_begin(t, 0);
  expect_check(t, 0, "signals without data");
}

static void datatype_matrix(struct rt* t) {
  uint32_t tag = 1;
  for (int ty = 0; ty < ncclNumTypes; ty++) {
    const size_t es = tutti_type_size((ncclDataType_t)ty);
    const size_t counts[] = {0, 1, 7, (9001 / es) | 1, (150001 / es) | 1};
    for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
      const size_t off = (size_t)(ty * 3 + (int)ci) % 8 + (ci % 2 ? 4096 : 0);
      ring_case(t, (ncclDataType_t)ty, counts[ci], off, 1 + ty % 3, ty % TUTTI_RMA_SIGNALS,
                ty % NCTX, tag);
      tag += 4;
      a2a_case(t, 0, (ncclDataType_t)ty, counts[ci], off, (int)ci == 2, (ty + 1) % 8,
               (ty + 1) % NCTX, tag++);
    }
  }
}

/* A second window: all-to-all into it leaves the first untouched; then it
 * is deregistered, a third registered, and the old handle refused. */
static void windows_case(struct rt* t) {
  const int r = t->k.r;
  if (!reset(t, 0)) {
    return;
  }
  a2a_case(t, 1, ncclFloat32, 2049, 3, 0, 5, 2, 9001);
  expect_begin(t, 0);
  expect_check(t, 0, "the first window after puts into the second");
  /* Every rank's puts into window 1 are done once every rank passed this. */
  if (!ok_call(t, rma_barrier(t->k.comm), "barrier") ||
      !ok_call(t, ncclCommWindowDeregister(t->k.comm, t->win[1]), "deregister")) {
    return;
  }
  t->win[1] = NULL;
  memset(t->buf[2], RMA_SENTINEL, wsize(2, r)); /* peers may put once it is registered */
  if (!ok_call(t, ncclCommWindowRegister(t->k.comm, t->buf[2], wsize(2, r), &t->win[2], 0),
               "register a third window")) {
    return;
  }
  void* p = NULL;
  RCHECK(&t->k, ncclWinGetUserPtr(t->k.comm, t->win[2], &p) == ncclSuccess && p == t->buf[2],
         "ncclWinGetUserPtr gave %p for %p", p, (void*)t->buf[2]);
  /* Puts right after registration (no barrier): a peer's window is in its
   * table before its registration returns anywhere. */
  const int n = t->k.n, next = (r + 1) % n, prev = (r + n - 1) % n;
  rma_fill(t->src, r, next, 9100, 333);
  ncclWaitSignalDesc_t d = {1, prev, 1, 1};
  if (ok_call(t, ncclPutSignal(t->src, 333, ncclInt8, next, t->win[2], 5, 1, 1, 0, t->k.comm, NULL),
              "put at once after registering") &&
      ok_call(t, ncclWaitSignal(1, &d, t->k.comm, NULL), "wait at once after registering")) {
    expect_begin(t, 2);
    expect_put(t, 5, prev, 9100, 333);
    expect_check(t, 2, "a put right after registration");
  }
  a2a_case(t, 2, ncclUint8, 70001, 1, 0, 7, 3, 9101);
  /* Deregistered (no window registered after, which could take its
   * address): its handle is refused. */
  ncclWindow_t old = t->win[2];
  if (!ok_call(t, rma_barrier(t->k.comm), "barrier") ||
      !ok_call(t, ncclCommWindowDeregister(t->k.comm, old), "deregister the third window")) {
    return;
  }
  t->win[2] = NULL;
  RCHECK(&t->k,
         ncclPutSignal(t->src, 1, ncclInt8, 0, old, 0, 0, 0, 0, t->k.comm, NULL) ==
             ncclInvalidArgument,
         "a put into a deregistered window was not refused");
  RCHECK(&t->k, ncclWinGetUserPtr(t->k.comm, old, &p) == ncclInvalidArgument,
         "ncclWinGetUserPtr of a deregistered window was not refused");
  RCHECK(&t->k, ncclCommWindowDeregister(t->k.comm, old) == ncclInvalidArgument,
         "deregistering a window twice was not refused");
}

/* An error code and a sentence naming what was wrong. */
static void expect_err(struct rt* t, ncclResult_t got, ncclResult_t want, const char* words,
                       const char* what) {
  const char* why = ncclGetLastError(NULL);
  RCHECK(&t->k, got == want && strstr(why, words) != NULL,
         "%s returned %d (expected %d) with \"%s\" (expected it to say \"%s\")", what, (int)got,
         (int)want, why, words);
}

static void argument_errors(struct rt* t) {
  ncclComm_t c = t->k.comm;
  const int n = t->k.n, r = t->k.r, next = (r + 1) % n;
  ncclWindow_t w = t->win[0];
  const ncclResult_t IA = ncclInvalidArgument;
  char* s = t->src;
  int dummy;
  expect_err(t, ncclPutSignal(s, 1, ncclInt8, next, w, 0, 0, 0, 0, NULL, NULL), IA, "comm is NULL",
             "put with comm NULL");
  expect_err(t, ncclPutSignal(s, 1, ncclInt8, n, w, 0, 0, 0, 0, c, NULL), IA, "out of range",
             "put to rank nranks");
  expect_err(t, ncclPutSignal(s, 1, ncclInt8, -1, w, 0, 0, 0, 0, c, NULL), IA, "out of range",
             "put to rank -1");
  expect_err(t, ncclPutSignal(s, 1, (ncclDataType_t)99, next, w, 0, 0, 0, 0, c, NULL), IA,
             "datatype", "put of datatype 99");
  expect_err(t, ncclPutSignal(s, 1, ncclInt8, next, w, 0, 0, NCTX, 0, c, NULL), IA, "ctx",
             "put on ctx numRmaCtx");
  expect_err(t, ncclPutSignal(s, 1, ncclInt8, next, w, 0, 0, -1, 0, c, NULL), IA, "ctx",
             "put on ctx -1");
  expect_err(t, ncclPutSignal(s, 1, ncclInt8, next, w, 0, TUTTI_RMA_SIGNALS, 0, 0, c, NULL), IA,
             "sigIdx", "put on sigIdx 8");
  expect_err(t, ncclPutSignal(s, 1, ncclInt8, next, w, 0, -1, 0, 0, c, NULL), IA, "sigIdx",
             "put on sigIdx -1");
  expect_err(t, ncclPutSignal(s, 1, ncclInt8, next, w, 0, 0, 0, 1, c, NULL), IA, "flags",
             "put with flags 1");
  expect_err(t, ncclPutSignal(s, 1, ncclInt8, next, NULL, 0, 0, 0, 0, c, NULL), IA,
             "peerWin is NULL", "put into window NULL");
  expect_err(t, ncclPutSignal(NULL, 0, ncclInt8, next, w, 0, 0, 0, 0, c, NULL), IA,
             "localbuff is NULL", "put of 0 elements from NULL");
  expect_err(t,
             ncclPutSignal(s, 1, ncclInt8, next, (ncclWindow_t)(void*)&dummy, 0, 0, 0, 0, c, NULL),
             IA, "not a window", "put into a pointer that is no window");
  expect_err(t, ncclPutSignal(s, SIZE_MAX / 2, ncclFloat64, next, w, 0, 0, 0, 0, c, NULL), IA,
             "overflows", "put of a count that overflows");
  /* The target's part is what counts: ranks' parts differ in size. */
  char size_words[64];
  snprintf(size_words, sizeof size_words, "holds %zu bytes", wsize(0, next));
  expect_err(t, ncclPutSignal(s, 2, ncclInt8, next, w, wsize(0, next) - 1, 0, 0, 0, c, NULL), IA,
             size_words, "put ending one byte beyond the target's part");
  expect_err(t, ncclPutSignal(s, 1, ncclInt8, next, w, wsize(0, next) + 1, 0, 0, 0, c, NULL), IA,
             size_words, "put starting beyond the target's part");
  expect_err(t, ncclSignal(n, 0, 0, 0, c, NULL), IA, "out of range", "signal to rank nranks");
  expect_err(t, ncclSignal(next, 9, 0, 0, c, NULL), IA, "sigIdx", "signal on sigIdx 9");
  expect_err(t, ncclSignal(next, 0, 5, 0, c, NULL), IA, "ctx", "signal on ctx 5");
  expect_err(t, ncclSignal(next, 0, 0, 2, c, NULL), IA, "flags", "signal with flags 2");
  expect_err(t, ncclSignal(next, 0, 0, 0, NULL, NULL), IA, "comm is NULL", "signal, comm NULL");
  ncclWaitSignalDesc_t d[2] = {{1, next, 0, 0}, {1, next, 0, 0}};
  expect_err(t, ncclWaitSignal(0, d, c, NULL), IA, "nDesc", "wait with nDesc 0");
  expect_err(t, ncclWaitSignal(1, NULL, c, NULL), IA, "signalDescs is NULL", "wait on NULL");
  d[1].opCnt = 0;
  expect_err(t, ncclWaitSignal(2, d, c, NULL), IA, "signalDescs[1].opCnt", "wait with opCnt 0");
  d[1] = (ncclWaitSignalDesc_t){1, n, 0, 0};
  expect_err(t, ncclWaitSignal(2, d, c, NULL), IA, "signalDescs[1].peer", "wait on rank n");
  d[1] = (ncclWaitSignalDesc_t){1, next, TUTTI_RMA_SIGNALS, 0};
  expect_err(t, ncclWaitSignal(2, d, c, NULL), IA, "sigIdx", "wait on sigIdx 8");
  d[1] = (ncclWaitSignalDesc_t){1, next, 0, NCTX};
  expect_err(t, ncclWaitSignal(2, d, c, NULL), IA, "ctx", "wait on ctx numRmaCtx");
  expect_err(t, ncclWaitSignal(1, d, NULL, NULL), IA, "comm is NULL", "wait, comm NULL");
  expect_err(t, ncclCommWindowRegister(NULL, s, 16, &w, 0), IA, "comm is NULL",
             "register, comm NULL");
  expect_err(t, ncclCommWindowDeregister(NULL, w), IA, "comm is NULL", "deregister, comm NULL");
  expect_err(t, ncclWinGetUserPtr(NULL, w, (void**)&s), IA, "comm is NULL",
             "user pointer, comm NULL");
  RCHECK(&t->k, w == t->win[0] && s == t->src, "a refused call changed its arguments");
  expect_err(t, ncclCommWindowRegister(c, s, 16, NULL, 0), IA, "win is NULL", "register, win NULL");
  ncclWindow_t nw = (ncclWindow_t)(void*)&dummy;
  expect_err(t, ncclCommWindowRegister(c, NULL, 16, &nw, 0), IA, "buff is NULL", "register NULL");
  RCHECK(&t->k, nw == NULL, "a refused registration left *win %p", (void*)nw);
  expect_err(t, ncclCommWindowRegister(c, s, 0, &nw, 0), IA, "size is 0", "register 0 bytes");
  expect_err(t, ncclCommWindowRegister(c, s, 16, &nw, 0x10), IA, "winFlags", "register flags");
  void* p = NULL;
  expect_err(t, ncclWinGetUserPtr(c, w, NULL), IA, "outUserPtr is NULL", "user pointer to NULL");
  expect_err(t, ncclWinGetUserPtr(c, NULL, &p), IA, "win is NULL", "user pointer of NULL");
  expect_err(t, ncclWinGetUserPtr(c, (ncclWindow_t)(void*)&dummy, &p), IA, "not registered",
             "user pointer of no window");
  RCHECK(&t->k, ncclCommWindowDeregister(c, NULL) == ncclSuccess, "deregistering NULL failed");
  expect_err(t, ncclCommWindowDeregister(c, (ncclWindow_t)(void*)&dummy), IA, "not registered",
             "deregister no window");
  /* In a group, an invalid call fails ncclGroupEnd and nothing runs. */
  ncclGroupStart();
  ncclSignal(next, 0, 0, 0, c, NULL);
  ncclSignal(next, 0, 0, 1, c, NULL);
  RCHECK(&t->k, ncclGroupEnd() == IA, "a group holding an invalid call did not fail");
}

/* Communicators made by split: one with numRmaCtx 0 refuses every
 * one-sided call; one with no window yet refuses signals and waits. */
static void split_errors(struct rt* t) {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.numRmaCtx = 0;
  ncclComm_t z = NULL, fresh = NULL;
  if (!ok_call(t, ncclCommSplit(t->k.comm, 0, t->k.r, &z, &cfg), "split with numRmaCtx 0") ||
      !ok_call(t, ncclCommSplit(t->k.comm, 0, t->k.r, &fresh, NULL), "split")) {
    ncclCommDestroy(z);
    return;
  }
  ncclWaitSignalDesc_t d = {1, 0, 0, 0};
  expect_err(t, ncclSignal(0, 0, 0, 0, z, NULL), ncclInvalidArgument, "numRmaCtx is 0",
             "signal with numRmaCtx 0");
  expect_err(t, ncclWaitSignal(1, &d, z, NULL), ncclInvalidArgument, "numRmaCtx is 0",
             "wait with numRmaCtx 0");
  expect_err(t, ncclPutSignal(t->src, 1, ncclInt8, 0, t->win[0], 0, 0, 0, 0, z, NULL),
             ncclInvalidArgument, "numRmaCtx is 0", "put with numRmaCtx 0");
  expect_err(t, ncclSignal(0, 0, 0, 0, fresh, NULL), ncclInvalidUsage, "no window",
             "signal before any window");
  expect_err(t, ncclWaitSignal(1, &d, fresh, NULL), ncclInvalidUsage, "no window",
             "wait before any window");
  expect_err(t, ncclPutSignal(t->src, 1, ncclInt8, 0, t->win[0], 0, 0, 0, 0, fresh, NULL),
             ncclInvalidArgument, "not a window", "put into another communicator's window");
  ncclCommDestroy(z);
  ncclCommDestroy(fresh);
}

static long run_rank(int n, int r, const ncclUniqueId* id) {
  struct rt t;
  memset(&t, 0, sizeof t);
  t.k.n = n;
  t.k.r = r;
  ncclUniqueId own;
  if (id == NULL && ncclGetUniqueId(&own) == ncclSuccess) {
    id = &own;
  }
  t.src = malloc(WBASE);
  t.expect = malloc(wsize(NWIN - 1, n));
  for (int w = 0; w < NWIN; w++) {
    t.buf[w] = malloc(wsize(w, r));
  }
  if (id == NULL || rma_comm(&t.k.comm, n, *id, r, NCTX) != ncclSuccess) {
    fprintf(stderr, "rank %d: init failed: %s\n", r, ncclGetLastError(NULL));
    return 1;
  }
  /* Two registrations in one group: they run in order at its end. */
  ncclGroupStart();
  for (int w = 0; w < 2; w++) {
    ok_call(&t, ncclCommWindowRegister(t.k.comm, t.buf[w], wsize(w, r), &t.win[w], 0), "register");
  }
  ok_call(&t, ncclGroupEnd(), "group of two registrations");
  if (t.win[0] != NULL && t.win[1] != NULL) {
    argument_errors(&t);
    split_errors(&t);
    signals_case(&t);
    datatype_matrix(&t);
    windows_case(&t);
    ok_call(&t, rma_barrier(t.k.comm), "final barrier");
  }
  for (int w = 0; w < NWIN; w++) {
    if (t.win[w] != NULL) {
      ok_call(&t, ncclCommWindowDeregister(t.k.comm, t.win[w]), "deregister");
    }
  }
  ok_call(&t, ncclCommDestroy(t.k.comm), "destroy");
  printf("rank %d/%d: %ld passed, %ld failed\n", r, n, t.k.passed, t.k.failed);
  for (int w = 0; w < NWIN; w++) {
    free(t.buf[w]);
  }
  free(t.src);
  free(t.expect);
  return t.k.failed;
}

static void proc_body(int rank, void* arg, long* p, long* f) {
  long bad = run_rank(*(int*)arg, rank, NULL);
  *p += bad == 0;
  *f += bad;
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long thread_bad;

static void thread_body(struct rank_ctx* c) {
  long bad = run_rank(c->nranks, c->rank, &c->id);
  pthread_mutex_lock(&lock);
  thread_bad += bad;
  pthread_mutex_unlock(&lock);
  c->result = bad == 0;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "threads";
  char list[64];
  snprintf(list, sizeof list, "%s", argc > 2 ? argv[2] : "1,2,3,4");
  setvbuf(stdout, NULL, _IOLBF, 0);
  /* Small queues: the large counts take many slots and more than a queue. */
  setenv("NCCL_BUFFSIZE", "65536", 0);
  long passed = 0, failed = 0;
  for (char* tok = strtok(list, ","); tok != NULL; tok = strtok(NULL, ",")) {
    int n = atoi(tok);
    if (strcmp(mode, "procs") == 0) {
      if (procs_comm_id() != 0) {
        fprintf(stderr, "no free port\n");
        return 1;
      }
      procs_run(n, proc_body, &n, &passed, &failed);
    } else {
      unsetenv("NCCL_COMM_ID");
      thread_bad = 0;
      int ok = run_ranks(n, thread_body, NULL);
      passed += ok;
      failed += thread_bad + (ok < n && thread_bad == 0);
    }
    printf("%s %d ranks: %ld passed, %ld failed so far\n", mode, n, passed, failed);
  }
  printf("%ld passed, %ld failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
