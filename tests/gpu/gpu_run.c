/* The GPU suite's case runners: one case on the ranks this thread drives
 * (a group when several, optionally captured in a CUDA graph), the matrix
 * of all cases, the large counts, grouped send/receive. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_run.h"
#include "nccl.h"

long passed, failed;
static const size_t counts[] = {0, 1, 7, 1031, 20011, 300007};

/* TUTTI_GPU_MATRIX=lean (test_gpu.c sets it for the path modes of a whole
 * run): every collective, datatype and operation, at three counts (one
 * element, an odd one, one past a queue), in place or not alternately, and
 * the large counts at one size; anything else: the whole matrix. */
static int lean(void) {
  const char* m = getenv("TUTTI_GPU_MATRIX");
  return m != NULL && (strcmp(m, "lean") == 0 || strcmp(m, "pass") == 0);
}

/* TUTTI_GPU_MATRIX=pass (the quick run's path modes): one pass through the
 * path, every collective twice (an odd count and one past a queue), each at
 * a datatype and an operation of its own, so that the passes of all
 * collectives together touch every datatype. */
static int pass_only(void) {
  const char* m = getenv("TUTTI_GPU_MATRIX");
  return m != NULL && strcmp(m, "pass") == 0;
}

int cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    FAILF("%s: %s", what, cudaGetErrorString(e));
  }
  return e == cudaSuccess;
}

/* One case on `nl` ranks driven by this thread (a group when more than one). */
void run_case(const struct gcase* c, struct grank* gs, int nl, int graph) {
  char name[200];
  for (int i = 0; i < nl; i++) {
    if (!gcase_prepare(c, &gs[i])) {
      FAILF("%s: prepare failed", gcase_name(c, &gs[i], name, sizeof name));
      return;
    }
  }
  cudaGraph_t g[8];
  cudaGraphExec_t ge[8];
  const int warm = graph && c->coll == G_ALLTOALL && c->inplace;
  if (warm) {
    /* In-place all-to-all needs device scratch, allocated by a first call
     * outside capture (as any warm-up before capturing does). */
    if (nl > 1) {
      ncclGroupStart();
    }
    for (int i = 0; i < nl; i++) {
      gcase_issue(c, &gs[i]);
    }
    if (nl > 1) {
      ncclGroupEnd();
    }
    for (int i = 0; i < nl; i++) {
      cudaStreamSynchronize(gs[i].stream);
    }
  }
  if (graph) {
    for (int i = 0; i < nl; i++) {
      if (!cuda_ok(cudaStreamBeginCapture(gs[i].stream, cudaStreamCaptureModeThreadLocal),
                   "cudaStreamBeginCapture")) {
        return;
      }
    }
  }
  ncclResult_t res = ncclSuccess;
  if (getenv("TUTTI_GPU_TEST_TRACE") != NULL) { /* which case a hang is in */
    fprintf(stderr, "case %s\n", gcase_name(c, &gs[0], name, sizeof name));
  }
  if (nl > 1) {
    ncclGroupStart();
  }
  for (int i = 0; i < nl && res == ncclSuccess; i++) {
    res = gcase_issue(c, &gs[i]);
  }
  if (nl > 1) {
    ncclResult_t gr = ncclGroupEnd();
    res = res != ncclSuccess ? res : gr;
  }
  if (res != ncclSuccess) {
    FAILF("%s: returned %d: %s", gcase_name(c, &gs[0], name, sizeof name), (int)res,
          ncclGetLastError(gs[0].comm));
  }
  if (graph) {
    for (int i = 0; i < nl; i++) {
      if (!cuda_ok(cudaStreamEndCapture(gs[i].stream, &g[i]), "cudaStreamEndCapture") ||
          !cuda_ok(cudaGraphInstantiate(&ge[i], g[i], 0), "cudaGraphInstantiate")) {
        return;
      }
    }
    if (res != ncclSuccess) {
      return;
    }
    /* Replays: fresh poison and input each time, so each replay must do the work. */
    for (int rep = 0; rep < 3; rep++) {
      for (int i = 0; i < nl; i++) {
        if ((rep > 0 || warm) && !gcase_prepare(c, &gs[i])) { /* warm-up changed the input */
          FAILF("%s: preparing replay %d failed", gcase_name(c, &gs[i], name, sizeof name), rep);
          return;
        }
        cuda_ok(cudaGraphLaunch(ge[i], gs[i].stream), "cudaGraphLaunch");
      }
      int ok = 1;
      for (int i = 0; i < nl; i++) {
        struct gcase keep = *c;
        keep.op = c->op; /* PreMulSum ops are not used in graph mode */
        ok &= gcase_verify(&keep, &gs[i]);
      }
      if (ok) {
        passed++;
      } else {
        failed++;
      }
    }
    for (int i = 0; i < nl; i++) {
      cudaGraphExecDestroy(ge[i]);
      cudaGraphDestroy(g[i]);
    }
    return;
  }
  if (res != ncclSuccess) {
    return;
  }
  int ok = 1;
  for (int i = 0; i < nl; i++) {
    ok &= gcase_verify(c, &gs[i]);
  }
  if (ok) {
    passed++;
  } else {
    failed++;
  }
}

static int graph_type(int t) {
  return t == ncclFloat32 || t == ncclBfloat16 || t == ncclInt32 || t == ncclFloat8e4m3;
}

void run_matrix(struct grank* gs, int nl, int n, int graph) {
  int k = 0;
  for (int coll = 0; coll < G_NCOLL; coll++) {
    for (int t = 0; t < ncclNumTypes; t++) {
      if (graph && !graph_type(t)) {
        continue;
      }
      if (pass_only() && t != (coll * 5 + 3) % ncclNumTypes && !(graph && graph_type(t))) {
        continue;
      }
      int nops = gcase_reduces(coll) ? (graph ? ncclAvg + 1 : ncclNumOps + 1) : 1;
      for (int op = 0; op < nops; op++) {
        if (graph && op != ncclSum && op != ncclAvg) {
          continue;
        }
        if (pass_only() && op != (coll + t) % nops) {
          continue;
        }
        for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
          if (lean() && counts[ci] != 1 && counts[ci] != 1031 && counts[ci] != 300007) {
            continue;
          }
          if (pass_only() && counts[ci] == 1) {
            continue;
          }
          for (int ip = 0; ip < 2; ip++) {
            if (lean() && ip != (int)((coll + t + op + ci) & 1)) {
              continue;
            }
            if (failed > 0) {
              return; /* after a failure the communicator may be unusable */
            }
            struct gcase c = {coll, (ncclDataType_t)t, op, counts[ci], ip, (k++) % n, k & 1};
            run_case(&c, gs, nl, graph);
          }
        }
      }
    }
  }
}

void run_big(struct grank* gs, int nl, int n) {
  const size_t cnt[] = {64u << 20, (48u << 20) + 3};
  const ncclDataType_t types[] = {ncclFloat32, ncclBfloat16, ncclInt8};
  for (size_t i = 0; i < (lean() ? 1u : 2u); i++) {
    for (size_t t = 0; t < (pass_only() ? 1u : lean() ? 2u : 3u); t++) {
      for (int coll = 0; coll < G_NCOLL && failed == 0; coll++) {
        if (coll == G_ALLTOALL || coll == G_GATHER || coll == G_SCATTER ||
            coll == G_REDUCESCATTER || coll == G_ALLGATHER) {
          struct gcase c = {coll, types[t], ncclSum, cnt[i] / (size_t)n, (int)i, 0, 0};
          run_case(&c, gs, nl, 0);
        } else {
          struct gcase c = {coll, types[t], ncclSum, cnt[i], (int)i, n - 1, 0};
          run_case(&c, gs, nl, 0);
        }
      }
    }
  }
}

/* Several GB in one call: sizes past 2^31 bytes and elements. */
void run_huge(struct grank* g, int n) {
  struct gcase a = {G_ALLREDUCE, ncclFloat32, ncclSum, ((size_t)640 << 20) + 7, 0, 0, 0};
  run_case(&a, g, 1, 0);
  struct gcase b = {G_BROADCAST, ncclInt8, ncclSum, ((size_t)2 << 30) + 5, 1, n - 1, 0};
  run_case(&b, g, 1, 0);
}

/* N sends and N receives (self included) in one group, on device buffers. */
void run_p2p(struct grank* g) {
  const int n = g->nranks, r = g->rank;
  const size_t count = 1000003;
  int32_t* h = calloc((size_t)n * count, 4);
  if (h == NULL) {
    FAILF("out of host memory");
    return;
  }
  for (size_t i = 0; i < (size_t)n * count; i++) {
    h[i] = (int32_t)(r * 1000000 + (int)i);
  }
  cudaMemcpy(g->dsend, h, (size_t)n * count * 4, cudaMemcpyHostToDevice);
  cudaMemset(g->drecv, 0x5a, (size_t)n * count * 4);
  ncclGroupStart();
  for (int p = 0; p < n; p++) {
    ncclSend(g->dsend + (size_t)p * count * 4, count, ncclInt32, p, g->comm, g->stream);
    ncclRecv(g->drecv + (size_t)p * count * 4, count, ncclInt32, p, g->comm, g->stream);
  }
  ncclResult_t res = ncclGroupEnd();
  cudaStreamSynchronize(g->stream);
  cudaMemcpy(h, g->drecv, (size_t)n * count * 4, cudaMemcpyDeviceToHost);
  int ok = res == ncclSuccess;
  for (int p = 0; p < n && ok; p++) {
    for (size_t i = 0; i < count && ok; i++) {
      ok = h[(size_t)p * count + i] == (int32_t)(p * 1000000 + (int)((size_t)r * count + i));
    }
  }
  if (ok) {
    passed++;
  } else {
    FAILF("rank %d/%d: send/recv group on device buffers: %d %s", r, n, (int)res,
          ncclGetLastError(g->comm));
  }
  free(h);
}

int rank_setup(struct grank* g, ncclComm_t comm, int r, int n, int dev, size_t cap) {
  memset(g, 0, sizeof *g);
  g->comm = comm;
  g->rank = r;
  g->nranks = n;
  g->dev = dev;
  return cuda_ok(cudaStreamCreate(&g->stream), "cudaStreamCreate") && grank_alloc(g, cap);
}
