/* See gpu_case.h. */
#include "gpu_case.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checker.h"
#include "reduce/reduce.h"

static const char* cname[G_NCOLL] = {"AllReduce", "Reduce",   "ReduceScatter", "Broadcast",
                                     "AllGather", "AlltoAll", "Gather",        "Scatter"};

int gcase_reduces(int coll) {
  return coll == G_ALLREDUCE || coll == G_REDUCE || coll == G_REDUCESCATTER;
}

int grank_alloc(struct grank* g, size_t cap) {
  g->cap = cap;
  g->hbuf = malloc(cap);
  g->ref = malloc(cap);
  return g->hbuf != NULL && g->ref != NULL && cudaMalloc((void**)&g->dsend, cap) == cudaSuccess &&
         cudaMalloc((void**)&g->drecv, cap) == cudaSuccess &&
         cudaMalloc((void**)&g->dscalar, 64) == cudaSuccess;
}

void grank_free(struct grank* g) {
  cudaFree(g->dsend);
  cudaFree(g->drecv);
  cudaFree(g->dscalar);
  free(g->hbuf);
  free(g->ref);
}

const char* gcase_name(const struct gcase* c, const struct grank* g, char* buf, size_t len) {
  snprintf(buf, len, "rank %d/%d (GPU %d) %s %s op %d count %zu %s root %d", g->rank, g->nranks,
           g->dev, cname[c->coll], tutti_type_name(c->type), c->op, c->count,
           c->inplace ? "in-place" : "out-of-place", c->root);
  return buf;
}

static size_t in_elems(const struct gcase* c, int n) {
  return (c->coll == G_REDUCESCATTER || c->coll == G_ALLTOALL || c->coll == G_SCATTER)
             ? c->count * (size_t)n
             : c->count;
}

int gcase_prepare(const struct gcase* c, struct grank* g) {
  const size_t es = tutti_type_size(c->type);
  const int n = g->nranks, r = g->rank;
  const size_t big = c->count * (size_t)n * es;
  char name[200];
  if (big > g->cap) {
    fprintf(stderr, "%s: buffers too small\n", gcase_name(c, g, name, sizeof name));
    return 0;
  }
  cudaSetDevice(g->dev);
  g->send = g->dsend;
  g->recv = g->drecv;
  if (c->inplace) {
    switch (c->coll) {
      case G_ALLGATHER:
        g->send = g->drecv + (size_t)r * c->count * es;
        break;
      case G_REDUCESCATTER:
        g->recv = g->dsend + (size_t)r * c->count * es;
        break;
      case G_GATHER:
        g->send = r == c->root ? g->drecv + (size_t)r * c->count * es : g->dsend;
        break;
      case G_SCATTER:
        g->recv = r == c->root ? g->dsend + (size_t)r * c->count * es : g->drecv;
        break;
      default:
        g->send = g->drecv;
        break;
    }
  }
  /* Poison the output, then place the input. */
  if (cudaMemset(g->drecv, 0x5a, big > 0 ? big : 1) != cudaSuccess) {
    return 0;
  }
  int fop = gcase_reduces(c->coll) ? (c->op == ncclNumOps ? ncclSum : c->op) : ncclSum;
  size_t ne = in_elems(c, n);
  chk_fill(g->hbuf, c->type, fop, r, 0, ne);
  if (ne > 0 && cudaMemcpy(g->send, g->hbuf, ne * es, cudaMemcpyHostToDevice) != cudaSuccess) {
    return 0;
  }
  g->rop = (ncclRedOp_t)c->op;
  if (c->op == ncclNumOps) {
    char s[8];
    chk_two(c->type, s);
    void* where = s;
    if (c->scalar_on_device) {
      cudaMemcpy(g->dscalar, s, 8, cudaMemcpyHostToDevice);
      where = g->dscalar;
    }
    if (ncclRedOpCreatePreMulSum(&g->rop, where, c->type,
                                 c->scalar_on_device ? ncclScalarDevice : ncclScalarHostImmediate,
                                 g->comm) != ncclSuccess) {
      fprintf(stderr, "%s: ncclRedOpCreatePreMulSum: %s\n", gcase_name(c, g, name, sizeof name),
              ncclGetLastError(g->comm));
      return 0;
    }
  }
  return 1;
}

ncclResult_t gcase_issue(const struct gcase* c, struct grank* g) {
  cudaStream_t s = g->stream;
  switch (c->coll) {
    case G_ALLREDUCE:
      return ncclAllReduce(g->send, g->recv, c->count, c->type, g->rop, g->comm, s);
    case G_REDUCE:
      return ncclReduce(g->send, g->recv, c->count, c->type, g->rop, c->root, g->comm, s);
    case G_REDUCESCATTER:
      return ncclReduceScatter(g->send, g->recv, c->count, c->type, g->rop, g->comm, s);
    case G_BROADCAST:
      return ncclBroadcast(g->send, g->recv, c->count, c->type, c->root, g->comm, s);
    case G_ALLGATHER:
      return ncclAllGather(g->send, g->recv, c->count, c->type, g->comm, s);
    case G_ALLTOALL:
      return ncclAlltoAll(g->send, g->recv, c->count, c->type, g->comm, s);
    case G_GATHER:
      return ncclGather(g->send, g->recv, c->count, c->type, c->root, g->comm, s);
    case G_SCATTER:
      return ncclScatter(g->send, g->recv, c->count, c->type, c->root, g->comm, s);
    default:
      return ncclInvalidArgument;
  }
}

int gcase_verify(const struct gcase* c, struct grank* g) {
  const size_t es = tutti_type_size(c->type);
  const int n = g->nranks, r = g->rank;
  const size_t big = c->count * (size_t)n;
  char name[200];
  gcase_name(c, g, name, sizeof name);
  cudaSetDevice(g->dev);
  cudaError_t e = cudaStreamSynchronize(g->stream);
  if (c->op == ncclNumOps) {
    ncclRedOpDestroy(g->rop, g->comm);
  }
  if (e != cudaSuccess) {
    fprintf(stderr, "%s: stream: %s\n", name, cudaGetErrorString(e));
    return 0;
  }
  size_t out_elems = c->count;
  if (c->coll == G_ALLGATHER || c->coll == G_ALLTOALL || (c->coll == G_GATHER && r == c->root)) {
    out_elems = big;
  }
  if ((c->coll == G_REDUCE || c->coll == G_GATHER) && r != c->root) {
    out_elems = 0;
  }
  if (out_elems > 0 &&
      cudaMemcpy(g->hbuf, g->recv, out_elems * es, cudaMemcpyDeviceToHost) != cudaSuccess) {
    fprintf(stderr, "%s: copying the result back failed\n", name);
    return 0;
  }
  if (gcase_reduces(c->coll)) {
    size_t first = c->coll == G_REDUCESCATTER ? (size_t)r * c->count : 0;
    for (size_t i = 0; i < out_elems; i++) {
      double want = chk_round(c->type, chk_reduce_ref(c->type, c->op, n, first + i, 2));
      double got = chk_get(g->hbuf, c->type, i);
      if (!chk_equal(c->type, c->op, n, got, want)) {
        fprintf(stderr, "%s: element %zu is %g, expected %g\n", name, i, got, want);
        return 0;
      }
    }
    return 1;
  }
  switch (c->coll) {
    case G_BROADCAST:
      chk_fill(g->ref, c->type, ncclSum, c->root, 0, c->count);
      break;
    case G_ALLGATHER:
    case G_GATHER:
      for (int p = 0; p < n; p++) {
        chk_fill(g->ref + (size_t)p * c->count * es, c->type, ncclSum, p, 0, c->count);
      }
      break;
    case G_ALLTOALL:
      for (int p = 0; p < n; p++) {
        chk_fill(g->ref + (size_t)p * c->count * es, c->type, ncclSum, p, (size_t)r * c->count,
                 c->count);
      }
      break;
    case G_SCATTER:
      chk_fill(g->ref, c->type, ncclSum, c->root, (size_t)r * c->count, c->count);
      break;
  }
  if (out_elems > 0 && memcmp(g->hbuf, g->ref, out_elems * es) != 0) {
    fprintf(stderr, "%s: received bytes differ from the expected ones\n", name);
    return 0;
  }
  return 1;
}

/* The environment of a procs-style mode (see test_gpu.c), set in each
 * rank's process before its communicator exists. */
void gcase_mode_env(const char* mode) {
  if (strcmp(mode, "nop2p") == 0 || strncmp(mode, "net", 3) == 0) {
    setenv("NCCL_P2P_DISABLE", "1", 1);
  }
  if (strncmp(mode, "net", 3) == 0) {
    setenv("NCCL_SHM_DISABLE", "1", 1);
  }
  if (strcmp(mode, "ring") == 0) {
    setenv("TUTTI_DEVICE_DIRECT", "0", 1);
  }
  if (strcmp(mode, "ipc") == 0) {
    setenv("NCCL_CUMEM_ENABLE", "0", 1);
  }
  if (strcmp(mode, "rounds") == 0 || strcmp(mode, "simple") == 0) {
    setenv("TUTTI_DEVICE_DIRECT_BYTES", "2097152", 1);
    setenv("TUTTI_DEVICE_DIRECT_ROUND_BYTES", "2048", 1);
    setenv("TUTTI_DEVICE_DIRECT_LL_MAX_BYTES", "262144", 1);
    setenv("TUTTI_DEVICE_DIRECT_LL_BLOCK_BYTES", "65536", 1);
  }
  if (strcmp(mode, "ce") == 0) {
    setenv("TUTTI_DEVICE_CE_MIN_BYTES", "1", 1);
    setenv("TUTTI_DEVICE_CE_BYTES", "1048576", 1);
  }
  if (strcmp(mode, "simple") == 0) {
    setenv("TUTTI_DEVICE_DIRECT_LL_MAX_BYTES", "0", 1);
    setenv("TUTTI_DEVICE_DIRECT_LL128_MAX_BYTES", "0", 1);
  }
  if (strcmp(mode, "ll128") == 0) {
    /* Every size in LL128 lines, through small inboxes: many rounds per
     * lane, slots reused within a call. */
    setenv("NCCL_PROTO", "LL128", 1);
    setenv("TUTTI_DEVICE_DIRECT_MAX_BYTES", "1073741824", 1);
    setenv("TUTTI_DEVICE_DIRECT_LL128_BYTES", "4194304", 1);
    setenv("TUTTI_DEVICE_DIRECT_LL128_ROUND_BYTES", "1024", 1);
    setenv("TUTTI_DEVICE_DIRECT_LL128_BLOCK_BYTES", "16384", 1);
  }
}
