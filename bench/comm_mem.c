/* GPU memory per communicator, for any NCCL loaded by path (tutti's
 * libnccl.so.2 or NVIDIA's): ranks as processes (rank r on GPU r % #GPUs,
 * several per GPU where GPUs are fewer), K communicators per rank, the
 * first by ncclCommInitRank, the others by ncclCommSplit of it. Each one,
 * once made, runs calls of every path's sizes (allreduce of 8 B, 1 MB and
 * 64 MB, reduce-scatter of 64 MB, all-gather of 1 MB per rank, all checked
 * bit for bit); then every rank measures cudaMemGetInfo at the same point.
 * A warm-up communicator is made and destroyed first, so that what the
 * library loads once per process (kernels, its own state) is not counted.
 * Per rank: the first communicator, each further one, all K, what
 * ncclCommMemStats says (where the library has it) and what destroy leaves.
 *
 *   comm_mem LIBRARY [procs|hosts] [NRANKS] [K] [--check FIRST_MIB EACH_MIB]
 *   procs: one host (default); hosts: each rank its own host (NCCL_HOSTID)
 *   --check: the GPU suite's gpu.comm_mem (tests/gpu/tests.cmake): fails
 *   unless the first communicator takes at most FIRST_MIB per rank, each
 *   further one at most EACH_MIB, MemStats' total is within 1 MiB per rank
 *   of the measured figure, destroy leaves at most 1 MiB per rank, and
 *   every result is exact.
 *
 * Exits 77 without a CUDA device. */
#define _GNU_SOURCE
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gpu_probe.h"
#include "memjob.h"
#include "nccl.h"

#define MAXR 16
#define MAXK 32
#define MIB (1024.0 * 1024.0)
#define BIG ((size_t)1 << 24) /* floats: 64 MB */

static struct {
  ncclResult_t (*get_unique_id)(ncclUniqueId*);
  ncclResult_t (*init_rank)(ncclComm_t*, int, ncclUniqueId, int);
  ncclResult_t (*split)(ncclComm_t, int, int, ncclComm_t*, ncclConfig_t*);
  ncclResult_t (*all_reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                             cudaStream_t);
  ncclResult_t (*reduce_scatter)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t,
                                 ncclComm_t, cudaStream_t);
  ncclResult_t (*all_gather)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*destroy)(ncclComm_t);
  ncclResult_t (*version)(int*);
  const char* (*last_error)(ncclComm_t);
  ncclResult_t (*mem_stats)(ncclComm_t, ncclCommMemStat_t, uint64_t*); /* NULL: absent */
} nc;

static int load(const char* path) {
  const struct memjob_sym syms[] = {
      {"ncclGetUniqueId", (void**)&nc.get_unique_id, 0},
      {"ncclCommInitRank", (void**)&nc.init_rank, 0},
      {"ncclCommSplit", (void**)&nc.split, 0},
      {"ncclAllReduce", (void**)&nc.all_reduce, 0},
      {"ncclReduceScatter", (void**)&nc.reduce_scatter, 0},
      {"ncclAllGather", (void**)&nc.all_gather, 0},
      {"ncclCommDestroy", (void**)&nc.destroy, 0},
      {"ncclGetVersion", (void**)&nc.version, 0},
      {"ncclGetLastError", (void**)&nc.last_error, 0},
      {"ncclCommMemStats", (void**)&nc.mem_stats, 1},
  };
  return memjob_load(path, syms, sizeof syms / sizeof syms[0]);
}

/* Points where every rank measures: before, after communicator c (1..K),
 * after destroying them all. */
#define NAT (MAXK + 2)

struct shared {
  struct memjob_sync sync;
  int dev[MAXR];
  int64_t free_b[NAT][MAXR];
  uint64_t stat[MAXK][MAXR]; /* ncclStatGpuMemTotal per communicator */
};

struct job {
  const char* mode;
  int n, k, ngpu, check;
  double first_mib, each_mib;
  ncclUniqueId ids[2];
  struct shared* sh;
};

/* Every rank here, or 0 after two minutes (a rank that died). */
static int barrier(struct shared* s) {
  return memjob_barrier(&s->sync, 120);
}

static void measure(struct job* j, int r, int at) {
  barrier(j->sh);
  size_t fr = 0, tot = 0;
  if (cudaMemGetInfo(&fr, &tot) != cudaSuccess) {
    FAILF("rank %d: cudaMemGetInfo failed", r);
  }
  j->sh->free_b[at][r] = (int64_t)fr;
  barrier(j->sh);
}

struct bufs {
  float *in, *out, *h;
  cudaStream_t stream;
};

/* Small integers: every sum exact in any order. */
static float value(int rank, size_t i) {
  return (float)((rank + 1) * (int)((i * 7 + 3) % 61));
}

/* out[0..count) against want(i), bit for bit. */
static int outputs_are(struct bufs* b, size_t count, int n, int gathered) {
  if (cudaStreamSynchronize(b->stream) != cudaSuccess ||
      cudaMemcpy(b->h, b->out, count * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess) {
    return 0;
  }
  const float k = (float)(n * (n + 1) / 2);
  for (size_t i = 0; i < count; i++) {
    const size_t per = count / (size_t)n;
    const float want = gathered ? value((int)(i / per), i % per) : k * value(0, i);
    if (memcmp(&b->h[i], &want, sizeof want) != 0) {
      return 0;
    }
  }
  return 1;
}

/* The calls every path's sizes take, checked; the input holds value(r, i). */
static void calls(struct job* j, struct bufs* b, ncclComm_t c, int r, int which) {
  const int n = j->n;
  static const size_t ar[] = {2, (size_t)1 << 18, BIG};
  for (int s = 0; s < 3; s++) {
    cudaMemset(b->out, 0xff, ar[s] * sizeof(float));
    ncclResult_t res = nc.all_reduce(b->in, b->out, ar[s], ncclFloat32, ncclSum, c, b->stream);
    EXPECT(res == ncclSuccess && outputs_are(b, ar[s], n, 0),
           "rank %d, communicator %d: allreduce of %zu floats: %s", r, which, ar[s],
           res != ncclSuccess ? nc.last_error(c) : "wrong result");
  }
  /* Reduce-scatter of 64 MB: rank r's part of the sum. */
  const size_t part = BIG / (size_t)n;
  ncclResult_t res = nc.reduce_scatter(b->in, b->out, part, ncclFloat32, ncclSum, c, b->stream);
  int ok = res == ncclSuccess && cudaStreamSynchronize(b->stream) == cudaSuccess &&
           cudaMemcpy(b->h, b->out, part * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess;
  const float k = (float)(n * (n + 1) / 2);
  for (size_t i = 0; ok && i < part; i++) {
    const float want = k * value(0, (size_t)r * part + i);
    ok = memcmp(&b->h[i], &want, sizeof want) == 0;
  }
  EXPECT(ok, "rank %d, communicator %d: reduce-scatter: %s", r, which,
         res != ncclSuccess ? nc.last_error(c) : "wrong result");
  /* All-gather of 1 MB per rank: slot q holds value(q, i). */
  const size_t each = (size_t)1 << 18;
  res = nc.all_gather(b->in, b->out, each, ncclFloat32, c, b->stream);
  EXPECT(res == ncclSuccess && outputs_are(b, each * (size_t)n, n, 1),
         "rank %d, communicator %d: all-gather: %s", r, which,
         res != ncclSuccess ? nc.last_error(c) : "wrong result");
}

static void rank_body(struct job* j, struct bufs* b, int r) {
  ncclComm_t warm = NULL;
  if (nc.init_rank(&warm, j->n, j->ids[0], r) != ncclSuccess) {
    FAILF("rank %d: ncclCommInitRank (warm-up): %s", r, nc.last_error(NULL));
  } else {
    calls(j, b, warm, r, 0);
    nc.destroy(warm);
  }
  measure(j, r, 0);
  ncclComm_t comms[MAXK] = {0};
  for (int c = 0; c < j->k; c++) {
    ncclResult_t res = c == 0 ? nc.init_rank(&comms[0], j->n, j->ids[1], r)
                              : nc.split(comms[0], 0, r, &comms[c], NULL);
    EXPECT(res == ncclSuccess && comms[c] != NULL, "rank %d: making communicator %d: %s", r, c,
           nc.last_error(c == 0 ? NULL : comms[0]));
    if (res == ncclSuccess && comms[c] != NULL) {
      calls(j, b, comms[c], r, c + 1);
      uint64_t v = 0;
      if (nc.mem_stats != NULL && nc.mem_stats(comms[c], ncclStatGpuMemTotal, &v) == ncclSuccess) {
        j->sh->stat[c][r] = v;
      }
    }
    measure(j, r, c + 1);
  }
  for (int c = j->k - 1; c >= 0; c--) {
    if (comms[c] != NULL) {
      EXPECT(nc.destroy(comms[c]) == ncclSuccess, "rank %d: destroying communicator %d", r, c);
    }
  }
  measure(j, r, j->k + 1);
}

static void rank_main(struct job* j, int r) {
  if (strcmp(j->mode, "hosts") == 0) {
    memjob_as_host("comm-mem-host", r);
  }
  const int dev = r % j->ngpu;
  j->sh->dev[r] = dev;
  struct bufs b = {0};
  if (cudaSetDevice(dev) != cudaSuccess || cudaStreamCreate(&b.stream) != cudaSuccess ||
      cudaMalloc((void**)&b.in, BIG * 4) != cudaSuccess ||
      cudaMalloc((void**)&b.out, BIG * 4) != cudaSuccess || (b.h = malloc(BIG * 4)) == NULL) {
    FAILF("rank %d: setting up GPU %d failed", r, dev);
    return;
  }
  for (size_t i = 0; i < BIG; i++) {
    b.h[i] = value(r, i);
  }
  if (cudaMemcpy(b.in, b.h, BIG * 4, cudaMemcpyHostToDevice) != cudaSuccess) {
    FAILF("rank %d: filling the input failed", r);
  }
  rank_body(j, &b, r);
}

/* One GPU's figures, per rank on it (printed by its first rank). */
static void report(struct job* j, int dev) {
  struct shared* s = j->sh;
  int on = 0, first = -1;
  for (int r = 0; r < j->n; r++) {
    if (s->dev[r] == dev) {
      first = first < 0 ? r : first;
      on++;
    }
  }
  if (first < 0) {
    return;
  }
  double per[NAT];
  for (int a = 1; a < j->k + 2; a++) {
    per[a] = (double)(s->free_b[a - 1][first] - s->free_b[a][first]) / on / MIB;
  }
  const double all = (double)(s->free_b[0][first] - s->free_b[j->k][first]) / on / MIB;
  const double left = (double)(s->free_b[0][first] - s->free_b[j->k + 1][first]) / on / MIB;
  printf("mode %s, GPU %d, %d rank(s) of %d, %d communicator(s), MiB per rank:\n", j->mode, dev, on,
         j->n, j->k);
  printf("  first communicator  %8.1f", per[1]);
  if (nc.mem_stats != NULL) {
    printf("  (MemStats %.1f)", (double)s->stat[0][first] / MIB);
  }
  printf("\n");
  for (int c = 1; c < j->k; c++) {
    printf("  communicator %-2d     %8.1f", c + 1, per[c + 1]);
    if (nc.mem_stats != NULL) {
      printf("  (MemStats %.1f)", (double)s->stat[c][first] / MIB);
    }
    printf("\n");
  }
  printf("  all %-2d              %8.1f\n", j->k, all);
  printf("  left after destroy  %8.1f\n", left);
  fflush(stdout);
  if (!j->check) {
    return;
  }
  EXPECT(per[1] <= j->first_mib,
         "%s, GPU %d: the first communicator takes %.1f MiB per rank (> %.0f)", j->mode, dev,
         per[1], j->first_mib);
  for (int c = 1; c < j->k; c++) {
    EXPECT(per[c + 1] <= j->each_mib,
           "%s, GPU %d: communicator %d takes %.1f MiB per rank (> %.0f)", j->mode, dev, c + 1,
           per[c + 1], j->each_mib);
  }
  EXPECT(left <= 1.0, "%s, GPU %d: %.1f MiB per rank left after destroy", j->mode, dev, left);
  if (nc.mem_stats != NULL) {
    for (int c = 0; c < j->k; c++) {
      uint64_t tot = 0;
      for (int r = 0; r < j->n; r++) {
        tot += s->dev[r] == dev ? s->stat[c][r] : 0;
      }
      const double m = (double)tot / on / MIB;
      EXPECT(m >= per[c + 1] - 1.0 && m <= per[c + 1] + 1.0,
             "%s, GPU %d: communicator %d: MemStats says %.1f MiB per rank, measured %.1f", j->mode,
             dev, c + 1, m, per[c + 1]);
    }
  }
}

/* One rank's process: its calls, then (a GPU's first rank) its GPU's figures. */
static void rank_process(void* arg, int r) {
  struct job* j = arg;
  rank_main(j, r);
  if (r < j->ngpu) {
    report(j, r); /* rank r is GPU r's first */
  }
}

static void run_job(struct job* j) {
  j->sh = mmap(NULL, sizeof *j->sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (j->sh == MAP_FAILED || nc.get_unique_id(&j->ids[0]) != ncclSuccess ||
      nc.get_unique_id(&j->ids[1]) != ncclSuccess) {
    FAILF("%s: setting up the job failed", j->mode);
    return;
  }
  memset(j->sh, 0, sizeof *j->sh);
  j->sh->sync.n = j->n;
  memjob_fork(j->n, rank_process, j);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s LIBRARY [procs|hosts] [NRANKS] [K] [--check FIRST_MIB EACH_MIB]\n",
            argv[0]);
    return 2;
  }
  struct job j = {"procs", 2, 1, 0, 0, 0, 0, {{{0}}, {{0}}}, NULL};
  int pos = 0;
  for (int i = 2; i < argc; i++) {
    if (strcmp(argv[i], "--check") == 0 && i + 2 < argc) {
      j.check = 1;
      j.first_mib = atof(argv[i + 1]);
      j.each_mib = atof(argv[i + 2]);
      i += 2;
    } else if (pos == 0 && (strcmp(argv[i], "procs") == 0 || strcmp(argv[i], "hosts") == 0)) {
      j.mode = argv[i];
      pos = 1;
    } else if (pos <= 1) {
      j.n = atoi(argv[i]);
      pos = 2;
    } else {
      j.k = atoi(argv[i]);
    }
  }
  j.n = j.n < 2 ? 2 : j.n > MAXR ? MAXR : j.n;
  j.k = j.k < 1 ? 1 : j.k > MAXK ? MAXK : j.k;
  const int ngpu = gpu_probe(); /* tests/gpu/gpu_probe.c */
  if (ngpu <= 0) {
    return gpu_probe_exit(ngpu, "no CUDA device here");
  }
  if (!load(argv[1])) {
    return 2;
  }
  j.ngpu = ngpu;
  int v = 0;
  nc.version(&v);
  printf("%s: NCCL version code %d; %d rank(s) on %d GPU(s), %s\n", argv[1], v, j.n, ngpu, j.mode);
  run_job(&j);
  printf("%ld passed, %ld failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
