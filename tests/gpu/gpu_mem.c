/* Buffers of every kind a CUDA program hands in: managed, pinned and
 * registered host memory, ncclMemAlloc, cuMem (VMM) mappings, and calls
 * mixing kinds. Each must be classified alike on every rank and run on the
 * device executor, exactly. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#include "gpu_streams.h"

static const size_t mem_counts[] = {1, 1031, 300007, 4194301};

/* Reductions (sum, avg), gathers and broadcasts of a few types and counts
 * on `g`, whose buffers are of the kinds under test. */
static void mem_cases(struct grank* g, int n) {
  static const int colls[] = {G_ALLREDUCE, G_REDUCE, G_REDUCESCATTER, G_ALLGATHER, G_BROADCAST};
  static const ncclDataType_t types[] = {ncclFloat32, ncclBfloat16, ncclInt8};
  int k = 0;
  for (size_t ci = 0; ci < sizeof colls / sizeof colls[0]; ci++) {
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
      const int nops = gcase_reduces(colls[ci]) ? 2 : 1;
      for (int o = 0; o < nops; o++) {
        for (size_t c = 0; c < sizeof mem_counts / sizeof mem_counts[0]; c++) {
          for (int ip = 0; ip < 2 && failed == 0; ip++) {
            if (mem_counts[c] * (size_t)n * 4 + 64 > g->cap) {
              continue;
            }
            struct gcase cs = {
                colls[ci], types[t],      o == 0 ? ncclSum : ncclAvg, mem_counts[c], ip, (k++) % n,
                0,         (size_t)k * 13};
            run_case(&cs, g, 1, 0);
          }
        }
      }
    }
  }
}

void run_memkinds(struct grank* base, int n) {
  /* Each kind for both buffers, then mixed pairs (out of place only sees both). */
  static const int pairs[][2] = {{G_MEM_MANAGED, G_MEM_MANAGED},
                                 {G_MEM_PINNED, G_MEM_PINNED},
                                 {G_MEM_REGISTERED, G_MEM_REGISTERED},
                                 {G_MEM_NCCL, G_MEM_NCCL},
                                 {G_MEM_VMM, G_MEM_VMM},
                                 {G_MEM_DEVICE, G_MEM_PINNED},
                                 {G_MEM_MANAGED, G_MEM_DEVICE},
                                 {G_MEM_PINNED, G_MEM_MANAGED}};
  const size_t cap = mem_counts[3] * (size_t)n * 4 + 4096;
  for (size_t p = 0; p < sizeof pairs / sizeof pairs[0] && failed == 0; p++) {
    struct grank g;
    memset(&g, 0, sizeof g);
    g.comm = base->comm;
    g.stream = base->stream;
    g.rank = base->rank;
    g.nranks = base->nranks;
    g.dev = base->dev;
    long f0 = failed, p0 = passed;
    if (!grank_alloc_kinds(&g, cap, pairs[p][0], pairs[p][1])) {
      FAILF("rank %d: allocating %s / %s buffers failed", g.rank, g_mem_name[pairs[p][0]],
            g_mem_name[pairs[p][1]]);
    } else {
      mem_cases(&g, n);
    }
    if (g.rank == 0) {
      printf("memkinds: send %-12s recv %-12s %ld passed, %ld failed\n", g_mem_name[pairs[p][0]],
             g_mem_name[pairs[p][1]], passed - p0, failed - f0);
      fflush(stdout);
    }
    grank_free(&g);
  }
}
