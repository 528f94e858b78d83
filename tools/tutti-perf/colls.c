/* The collectives table (see colls.h): counts and calls. Filling and
 * checking the buffers lives in check.c. */
#include "colls.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "lib.h"
#include "perf.h"

/* nccl-tests rounds per-rank counts down to 16 bytes, so that every rank's
 * block stays aligned; the sizes it prints then step in those units. */
static size_t per_rank(size_t count, size_t elt, int n) {
  size_t align = elt < 16 ? 16 / elt : 1;
  return (count / (size_t)n) & ~(align - 1);
}

static void counts_same(size_t count, size_t elt, int n, struct perf_counts* c) {
  (void)elt;
  (void)n;
  *c = (struct perf_counts){count, count, count, 0, 0};
}

static void counts_gather(size_t count, size_t elt, int n, struct perf_counts* c) {
  size_t b = per_rank(count, elt, n); /* allgather, gather: one block in, n out */
  *c = (struct perf_counts){b, b * (size_t)n, b, b, 0};
}

static void counts_scatter(size_t count, size_t elt, int n, struct perf_counts* c) {
  size_t b = per_rank(count, elt, n); /* reducescatter, scatter: n blocks in, one out */
  *c = (struct perf_counts){b * (size_t)n, b, b, 0, b};
}

static void counts_alltoall(size_t count, size_t elt, int n, struct perf_counts* c) {
  size_t b = per_rank(count, elt, n);
  *c = (struct perf_counts){b * (size_t)n, b * (size_t)n, b, 0, 0};
}

#define CALL(expr) PERF_NCCL(expr, c->comm, c->rank)

static void run_allreduce(const struct perf_call* c) {
  CALL(perf_nccl.AllReduce(c->send, c->recv, c->count, c->type, c->op, c->comm, c->stream));
}

static void run_broadcast(const struct perf_call* c) {
  CALL(perf_nccl.Broadcast(c->send, c->recv, c->count, c->type, c->root, c->comm, c->stream));
}

static void run_reduce(const struct perf_call* c) {
  CALL(perf_nccl.Reduce(c->send, c->recv, c->count, c->type, c->op, c->root, c->comm, c->stream));
}

static void run_allgather(const struct perf_call* c) {
  CALL(perf_nccl.AllGather(c->send, c->recv, c->count, c->type, c->comm, c->stream));
}

static void run_reducescatter(const struct perf_call* c) {
  CALL(perf_nccl.ReduceScatter(c->send, c->recv, c->count, c->type, c->op, c->comm, c->stream));
}

static size_t block_bytes(const struct perf_call* c) {
  return c->count * perf_type_size(c->type);
}

/* Libraries older than NCCL 2.28 lack ncclAlltoAll, ncclGather and
 * ncclScatter: build them from grouped send/recv as nccl-tests does. */
static void run_alltoall(const struct perf_call* c) {
  if (perf_nccl.AlltoAll != NULL) {
    CALL(perf_nccl.AlltoAll(c->send, c->recv, c->count, c->type, c->comm, c->stream));
    return;
  }
  size_t b = block_bytes(c);
  CALL(perf_nccl.GroupStart());
  for (int r = 0; r < c->nranks; r++) {
    CALL(perf_nccl.Send((const char*)c->send + r * b, c->count, c->type, r, c->comm, c->stream));
    CALL(perf_nccl.Recv((char*)c->recv + r * b, c->count, c->type, r, c->comm, c->stream));
  }
  CALL(perf_nccl.GroupEnd());
}

static void run_gather(const struct perf_call* c) {
  if (perf_nccl.Gather != NULL) {
    CALL(perf_nccl.Gather(c->send, c->recv, c->count, c->type, c->root, c->comm, c->stream));
    return;
  }
  size_t b = block_bytes(c);
  CALL(perf_nccl.GroupStart());
  CALL(perf_nccl.Send(c->send, c->count, c->type, c->root, c->comm, c->stream));
  for (int r = 0; c->rank == c->root && r < c->nranks; r++) {
    CALL(perf_nccl.Recv((char*)c->recv + r * b, c->count, c->type, r, c->comm, c->stream));
  }
  CALL(perf_nccl.GroupEnd());
}

static void run_scatter(const struct perf_call* c) {
  if (perf_nccl.Scatter != NULL) {
    CALL(perf_nccl.Scatter(c->send, c->recv, c->count, c->type, c->root, c->comm, c->stream));
    return;
  }
  size_t b = block_bytes(c);
  CALL(perf_nccl.GroupStart());
  for (int r = 0; c->rank == c->root && r < c->nranks; r++) {
    CALL(perf_nccl.Send((const char*)c->send + r * b, c->count, c->type, r, c->comm, c->stream));
  }
  CALL(perf_nccl.Recv(c->recv, c->count, c->type, c->root, c->comm, c->stream));
  CALL(perf_nccl.GroupEnd());
}

/* A ring: send to the next rank, receive from the previous one. */
static void run_sendrecv(const struct perf_call* c) {
  int next = (c->rank + 1) % c->nranks, prev = (c->rank - 1 + c->nranks) % c->nranks;
  CALL(perf_nccl.GroupStart());
  CALL(perf_nccl.Send(c->send, c->count, c->type, next, c->comm, c->stream));
  CALL(perf_nccl.Recv(c->recv, c->count, c->type, prev, c->comm, c->stream));
  CALL(perf_nccl.GroupEnd());
}

/* The one-sided ring: put to the next rank's window (the receive buffer, at
 * the same place as sendrecv receives), then wait for the signal of the
 * previous rank's put: what sendrecv moves, so the two compare directly. */
static void run_putsignal(const struct perf_call* c) {
  int next = (c->rank + 1) % c->nranks, prev = (c->rank - 1 + c->nranks) % c->nranks;
  ncclWaitSignalDesc_t d = {1, prev, 0, 0};
  CALL(perf_nccl.PutSignal(c->send, c->count, c->type, next, c->win, c->win_off, 0, 0, 0, c->comm,
                           c->stream));
  CALL(perf_nccl.WaitSignal(1, &d, c->comm, c->stream));
}

const struct perf_coll perf_colls[] = {
    {"allreduce", "ncclAllReduce", 1, 0, 0, PERF_BUSBW_ALLREDUCE, 1, counts_same, run_allreduce,
     perf_fill_allreduce, perf_verify_allreduce},
    {"allgather", "ncclAllGather", 0, 0, 1, PERF_BUSBW_RING, 1, counts_gather, run_allgather,
     perf_fill_allgather, perf_verify_allgather},
    {"reducescatter", "ncclReduceScatter", 1, 0, 1, PERF_BUSBW_RING, 1, counts_scatter,
     run_reducescatter, perf_fill_reducescatter, perf_verify_reducescatter},
    {"broadcast", "ncclBroadcast", 0, 1, 0, PERF_BUSBW_ONE, 1, counts_same, run_broadcast,
     perf_fill_broadcast, perf_verify_broadcast},
    {"reduce", "ncclReduce", 1, 1, 0, PERF_BUSBW_ONE, 1, counts_same, run_reduce, perf_fill_reduce,
     perf_verify_reduce},
    {"alltoall", "ncclAlltoAll", 0, 0, 1, PERF_BUSBW_RING, 0, counts_alltoall, run_alltoall,
     perf_fill_alltoall, perf_verify_alltoall},
    {"gather", "ncclGather", 0, 1, 1, PERF_BUSBW_RING, 1, counts_gather, run_gather,
     perf_fill_gather, perf_verify_gather},
    {"scatter", "ncclScatter", 0, 1, 1, PERF_BUSBW_RING, 1, counts_scatter, run_scatter,
     perf_fill_scatter, perf_verify_scatter},
    {"sendrecv", "ncclSend/ncclRecv", 0, 0, 0, PERF_BUSBW_ONE, 0, counts_same, run_sendrecv,
     perf_fill_sendrecv, perf_verify_sendrecv},
    {"putsignal", "ncclPutSignal/ncclWaitSignal", 0, 0, 0, PERF_BUSBW_ONE, 0, counts_same,
     run_putsignal, perf_fill_sendrecv, perf_verify_sendrecv, 1},
};

const int perf_ncolls = (int)(sizeof perf_colls / sizeof perf_colls[0]);

/* Lower case without '_' and '-', so "all_reduce", "AllReduce" and
 * "all-reduce" name the same collective. */
static void squash(const char* in, char* out, size_t len) {
  size_t n = 0;
  for (; *in != '\0' && n + 1 < len; in++) {
    if (*in != '_' && *in != '-') {
      out[n++] = (char)tolower((unsigned char)*in);
    }
  }
  out[n] = '\0';
}

const struct perf_coll* perf_coll_find(const char* name) {
  char s[128];
  squash(name, s, sizeof s);
  /* Program names: all_reduce_perf (nccl-tests), tutti-perf-allreduce. */
  size_t len = strlen(s);
  if (len > 4 && strcmp(s + len - 4, "perf") == 0) {
    s[len - 4] = '\0';
  }
  const char* p = strncmp(s, "tuttiperf", 9) == 0 ? s + 9 : s;
  if (strcmp(p, "bcast") == 0) {
    p = "broadcast";
  }
  for (int i = 0; i < perf_ncolls; i++) {
    if (strcmp(p, perf_colls[i].name) == 0) {
      return &perf_colls[i];
    }
  }
  return NULL;
}

double perf_busbw_factor(enum perf_busbw f, int n) {
  switch (f) {
    case PERF_BUSBW_ALLREDUCE:
      return 2.0 * (n - 1) / n;
    case PERF_BUSBW_RING:
      return (double)(n - 1) / n;
    default:
      return 1.0;
  }
}
