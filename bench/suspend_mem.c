/* What ncclCommSuspend gives back, for any NCCL loaded by path (tutti's
 * libnccl.so.2 or NVIDIA's), ranks as processes (rank r on GPU r % #GPUs,
 * several per GPU where GPUs are fewer). Per GPU, from cudaMemGetInfo with
 * every rank at the same point: the communicators' memory (after init and
 * an allreduce of 1 MB and of 64 MB; a warm-up communicator made and
 * destroyed first, so that loading the library's kernels is not counted),
 * the sum of what ncclCommMemStats reports, what a suspend gives back and
 * a resume takes again, and what is left after destroy; the host's memory
 * in use (MemTotal - MemAvailable) beside it. After the resume, the
 * allreduces and a CUDA graph captured before the suspend must be exact
 * again (twice: two cycles). A library without ncclCommSuspend (NCCL
 * before 2.29.7) prints "n/a" for it.
 *
 *   suspend_mem LIBRARY [MODE|all] [NRANKS] [--check]
 *   MODE: procs (default; GPU memory shared between processes), hosts
 *   (each rank its own host by NCCL_HOSTID: the network path), nop2p
 *   (NCCL_P2P_DISABLE=1), ipc (NCCL_CUMEM_ENABLE=0)
 *   --check: the GPU suite's gpu.suspend (tests/gpu/tests.cmake): fails
 *   unless, per GPU, MemStats' total is within 1 MiB per rank of the
 *   measured memory, the suspend gives back at least 99 % of it in every
 *   mode and all of what MemStats calls suspendable, the resume takes back as much, destroy leaves
 * nothing, calls on a suspended communicator are refused, and every result is exact.
 *
 * Build: cc -O2 -o suspend_mem bench/suspend_mem.c -Iinclude -I/usr/local/cuda/include \
 *          -L/usr/local/cuda/lib64 -lcudart -ldl
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
#define MIB (1024.0 * 1024.0)
#define SMALL ((size_t)1 << 18) /* floats: 1 MB */
#define LARGE ((size_t)1 << 24) /* floats: 64 MB */

static struct {
  ncclResult_t (*get_unique_id)(ncclUniqueId*);
  ncclResult_t (*init_rank)(ncclComm_t*, int, ncclUniqueId, int);
  ncclResult_t (*all_reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                             cudaStream_t);
  ncclResult_t (*destroy)(ncclComm_t);
  ncclResult_t (*version)(int*);
  const char* (*last_error)(ncclComm_t);
  ncclResult_t (*suspend)(ncclComm_t, int); /* NULL before 2.29.7 */
  ncclResult_t (*resume)(ncclComm_t);
  ncclResult_t (*mem_stats)(ncclComm_t, ncclCommMemStat_t, uint64_t*);
} nc;

static int load(const char* path) {
  const struct memjob_sym syms[] = {
      {"ncclGetUniqueId", (void**)&nc.get_unique_id, 0},
      {"ncclCommInitRank", (void**)&nc.init_rank, 0},
      {"ncclAllReduce", (void**)&nc.all_reduce, 0},
      {"ncclCommDestroy", (void**)&nc.destroy, 0},
      {"ncclGetVersion", (void**)&nc.version, 0},
      {"ncclGetLastError", (void**)&nc.last_error, 0},
      {"ncclCommSuspend", (void**)&nc.suspend, 1},
      {"ncclCommResume", (void**)&nc.resume, 1},
      {"ncclCommMemStats", (void**)&nc.mem_stats, 1},
  };
  if (!memjob_load(path, syms, sizeof syms / sizeof syms[0])) {
    return 0;
  }
  if (nc.suspend == NULL || nc.resume == NULL || nc.mem_stats == NULL) {
    nc.suspend = NULL;
  }
  return 1;
}

/* The points where every rank measures, in order. */
enum { AT_BEFORE, AT_INIT, AT_GRAPH, AT_SUSPENDED, AT_RESUMED, AT_DESTROYED, NAT };

/* Shared by the ranks (mapped before fork): a barrier and the figures. */
struct shared {
  struct memjob_sync sync;
  int dev[MAXR];
  int64_t free_b[NAT][MAXR];
  int64_t host_b[NAT][MAXR];
  uint64_t stat[4][MAXR]; /* ncclCommMemStat_t after init */
  double t_suspend[MAXR], t_resume[MAXR];
};

struct job {
  const char* mode;
  int n, ngpu, check;
  ncclUniqueId ids[2];
  struct shared* sh;
};

/* Every rank here, or 0 after two minutes (a rank that died). */
static int barrier(struct shared* s) {
  return memjob_barrier(&s->sync, 120);
}

/* MemTotal - MemAvailable of /proc/meminfo, in bytes. */
static int64_t host_used(void) {
  FILE* f = fopen("/proc/meminfo", "r");
  long long total = 0, avail = 0, v;
  char key[64];
  while (f != NULL && fscanf(f, "%63s %lld kB", key, &v) == 2) {
    total = strcmp(key, "MemTotal:") == 0 ? v : total;
    avail = strcmp(key, "MemAvailable:") == 0 ? v : avail;
  }
  if (f != NULL) {
    fclose(f);
  }
  return (int64_t)(total - avail) * 1024;
}

/* Every rank at point `at`: all arrive, each measures, all go on. */
static void measure(struct job* j, int r, int at) {
  barrier(j->sh);
  size_t fr = 0, tot = 0;
  if (cudaMemGetInfo(&fr, &tot) != cudaSuccess) {
    FAILF("rank %d: cudaMemGetInfo failed", r);
  }
  j->sh->free_b[at][r] = (int64_t)fr;
  j->sh->host_b[at][r] = host_used();
  barrier(j->sh);
}

struct bufs {
  float *s1, *r1, *s2, *r2; /* device: 1 MB and 64 MB */
  float* h;                 /* host, 64 MB */
  cudaStream_t stream;
};

static float value(int rank, size_t i, int salt) {
  return (float)((rank + 1) * (int)((i * 7 + (size_t)salt) % 61));
}

static int fill(struct bufs* b, int r, int salt) {
  for (size_t i = 0; i < LARGE; i++) {
    b->h[i] = value(r, i, salt);
  }
  return cudaMemcpy(b->s1, b->h, SMALL * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess &&
         cudaMemcpy(b->s2, b->h, LARGE * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess &&
         cudaMemset(b->r1, 0xff, SMALL * sizeof(float)) == cudaSuccess &&
         cudaMemset(b->r2, 0xff, LARGE * sizeof(float)) == cudaSuccess;
}

/* Both outputs bit for bit: the sum over ranks of value(). */
static int verify(struct bufs* b, int n, int salt) {
  const float k = (float)(n * (n + 1) / 2);
  int ok = cudaStreamSynchronize(b->stream) == cudaSuccess;
  float* outs[2] = {b->r1, b->r2};
  const size_t counts[2] = {SMALL, LARGE};
  for (int o = 0; o < 2 && ok; o++) {
    ok =
        cudaMemcpy(b->h, outs[o], counts[o] * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess;
    for (size_t i = 0; ok && i < counts[o]; i++) {
      const float want = k * (float)(int)((i * 7 + (size_t)salt) % 61);
      ok = memcmp(&b->h[i], &want, sizeof want) == 0;
    }
  }
  return ok;
}

static ncclResult_t issue(struct bufs* b, ncclComm_t comm) {
  ncclResult_t res = nc.all_reduce(b->s1, b->r1, SMALL, ncclFloat32, ncclSum, comm, b->stream);
  return res != ncclSuccess
             ? res
             : nc.all_reduce(b->s2, b->r2, LARGE, ncclFloat32, ncclSum, comm, b->stream);
}

/* The two allreduces, or their graph, on fresh inputs, checked. */
static void run_checked(struct bufs* b, ncclComm_t comm, cudaGraphExec_t ge, int r, int n, int salt,
                        const char* when) {
  ncclResult_t res = ncclSuccess;
  int ok = fill(b, r, salt);
  if (ok && ge != NULL) {
    ok = cudaGraphLaunch(ge, b->stream) == cudaSuccess;
  } else if (ok) {
    res = issue(b, comm);
    ok = res == ncclSuccess;
  }
  ok = ok && verify(b, n, salt);
  EXPECT(ok, "rank %d: %s %s: %s", r, ge != NULL ? "graph" : "allreduces", when,
         res != ncclSuccess ? nc.last_error(comm) : "wrong result or CUDA error");
}

static ncclComm_t init(const ncclUniqueId* id, int n, int r) {
  ncclComm_t comm = NULL;
  if (nc.init_rank(&comm, n, *id, r) != ncclSuccess) {
    FAILF("rank %d: ncclCommInitRank: %s", r, nc.last_error(NULL));
    return NULL;
  }
  return comm;
}

/* Memory the library loads once per process (kernels, its own state)
 * comes with a first communicator: made and destroyed before measuring. */
static void warm_up(struct job* j, struct bufs* b, int r) {
  ncclComm_t c = init(&j->ids[0], j->n, r);
  if (c == NULL) {
    return;
  }
  run_checked(b, c, NULL, r, j->n, 0, "in the warm-up");
  cudaGraph_t g;
  cudaGraphExec_t ge;
  if (cudaStreamBeginCapture(b->stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess) {
    issue(b, c);
    if (cudaStreamEndCapture(b->stream, &g) == cudaSuccess) {
      if (cudaGraphInstantiate(&ge, g, 0) == cudaSuccess) {
        run_checked(b, c, ge, r, j->n, 1, "in the warm-up");
        cudaGraphExecDestroy(ge);
      }
      cudaGraphDestroy(g);
    }
  }
  cudaStreamSynchronize(b->stream);
  nc.destroy(c);
}

static void stats(ncclComm_t comm, int r, uint64_t* v) {
  for (int s = 0; s < 4; s++) {
    v[s] = 0;
    if (nc.mem_stats(comm, (ncclCommMemStat_t)s, &v[s]) != ncclSuccess) {
      FAILF("rank %d: ncclCommMemStats(%d): %s", r, s, nc.last_error(comm));
    }
  }
}

/* Suspend, the checks while suspended, resume; the figures at both points. */
static void cycle(struct job* j, struct bufs* b, ncclComm_t comm, cudaGraphExec_t ge, int r,
                  int first) {
  double t0 = memjob_now();
  ncclResult_t res = nc.suspend(comm, NCCL_SUSPEND_MEM);
  const double ts = memjob_now() - t0;
  EXPECT(res == ncclSuccess, "rank %d: ncclCommSuspend: %s", r, nc.last_error(comm));
  if (j->check) {
    uint64_t v[4];
    stats(comm, r, v);
    EXPECT(v[ncclStatGpuMemSuspended] == 1, "rank %d: Suspended is %llu while suspended", r,
           (unsigned long long)v[ncclStatGpuMemSuspended]);
    EXPECT(v[ncclStatGpuMemTotal] == j->sh->stat[ncclStatGpuMemTotal][r] &&
               v[ncclStatGpuMemSuspend] == j->sh->stat[ncclStatGpuMemSuspend][r],
           "rank %d: byte counts changed by the suspend", r);
    /* tutti refuses calls on a suspended communicator (NCCL leaves them undefined). */
    EXPECT(issue(b, comm) == ncclInvalidUsage, "rank %d: an allreduce on a suspended comm ran", r);
    EXPECT(nc.suspend(comm, NCCL_SUSPEND_MEM) == ncclInvalidUsage,
           "rank %d: a second suspend was not refused", r);
  }
  if (first) {
    measure(j, r, AT_SUSPENDED);
  }
  t0 = memjob_now();
  res = nc.resume(comm);
  const double tr = memjob_now() - t0;
  EXPECT(res == ncclSuccess, "rank %d: ncclCommResume: %s", r, nc.last_error(comm));
  if (first) {
    j->sh->t_suspend[r] = ts;
    j->sh->t_resume[r] = tr;
    measure(j, r, AT_RESUMED);
  }
  run_checked(b, comm, NULL, r, j->n, first ? 3 : 5, "after a resume");
  run_checked(b, comm, ge, r, j->n, first ? 4 : 6, "captured before the suspend, after a resume");
}

static void rank_body(struct job* j, struct bufs* b, int r) {
  warm_up(j, b, r);
  measure(j, r, AT_BEFORE);
  ncclComm_t comm = init(&j->ids[1], j->n, r);
  if (comm != NULL) {
    run_checked(b, comm, NULL, r, j->n, 2, "after init");
  }
  measure(j, r, AT_INIT);
  if (comm != NULL && nc.suspend != NULL) {
    uint64_t v[4];
    stats(comm, r, v);
    if (j->check) {
      EXPECT(v[ncclStatGpuMemSuspended] == 0 &&
                 v[ncclStatGpuMemTotal] == v[ncclStatGpuMemSuspend] + v[ncclStatGpuMemPersist],
             "rank %d: MemStats after init: suspended %llu, total %llu, suspend %llu, persist "
             "%llu",
             r, (unsigned long long)v[1], (unsigned long long)v[3], (unsigned long long)v[0],
             (unsigned long long)v[2]);
    }
    for (int s = 0; s < 4; s++) {
      j->sh->stat[s][r] = v[s];
    }
  }
  cudaGraph_t g = NULL;
  cudaGraphExec_t ge = NULL;
  if (comm != NULL &&
      (cudaStreamBeginCapture(b->stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess ||
       issue(b, comm) != ncclSuccess || cudaStreamEndCapture(b->stream, &g) != cudaSuccess ||
       cudaGraphInstantiate(&ge, g, 0) != cudaSuccess)) {
    FAILF("rank %d: capturing the allreduces failed: %s", r, nc.last_error(comm));
    ge = NULL;
  }
  if (ge != NULL) {
    run_checked(b, comm, ge, r, j->n, 7, "before the suspend");
  }
  measure(j, r, AT_GRAPH);
  if (comm != NULL && nc.suspend != NULL) {
    cycle(j, b, comm, ge, r, 1);
    cycle(j, b, comm, ge, r, 0);
  } else {
    measure(j, r, AT_SUSPENDED);
    measure(j, r, AT_RESUMED);
  }
  if (ge != NULL) {
    cudaGraphExecDestroy(ge);
  }
  if (g != NULL) {
    cudaGraphDestroy(g);
  }
  if (comm != NULL && nc.suspend != NULL) {
    EXPECT(nc.suspend(comm, NCCL_SUSPEND_MEM) == ncclSuccess, "rank %d: suspend: %s", r,
           nc.last_error(comm));
  }
  if (comm != NULL) {
    EXPECT(nc.destroy(comm) == ncclSuccess, "rank %d: destroy %s", r,
           nc.suspend != NULL ? "while suspended" : "");
  }
  measure(j, r, AT_DESTROYED);
}

static void set_mode_env(const char* mode, int r) {
  if (strcmp(mode, "hosts") == 0) {
    memjob_as_host("suspend-mem-host", r);
  } else if (strcmp(mode, "nop2p") == 0) {
    setenv("NCCL_P2P_DISABLE", "1", 1);
  } else if (strcmp(mode, "ipc") == 0) {
    setenv("NCCL_CUMEM_ENABLE", "0", 1);
  }
}

static void rank_main(struct job* j, int r) {
  set_mode_env(j->mode, r);
  const int dev = r % j->ngpu;
  j->sh->dev[r] = dev;
  struct bufs b = {0};
  if (cudaSetDevice(dev) != cudaSuccess || cudaStreamCreate(&b.stream) != cudaSuccess ||
      cudaMalloc((void**)&b.s1, SMALL * 4) != cudaSuccess ||
      cudaMalloc((void**)&b.r1, SMALL * 4) != cudaSuccess ||
      cudaMalloc((void**)&b.s2, LARGE * 4) != cudaSuccess ||
      cudaMalloc((void**)&b.r2, LARGE * 4) != cudaSuccess || (b.h = malloc(LARGE * 4)) == NULL) {
    FAILF("rank %d: setting up GPU %d failed", r, dev);
  }
  rank_body(j, &b, r);
}

/* One GPU's figures (printed by its first rank) and, with --check, the checks. */
static void report(struct job* j, int dev) {
  struct shared* s = j->sh;
  int k = 0, first = -1;
  uint64_t tot = 0, per = 0, sus = 0;
  double ts = 0, tr = 0;
  for (int r = 0; r < j->n; r++) {
    if (s->dev[r] == dev) {
      first = first < 0 ? r : first;
      k++;
      tot += s->stat[ncclStatGpuMemTotal][r];
      per += s->stat[ncclStatGpuMemPersist][r];
      sus += s->stat[ncclStatGpuMemSuspend][r];
      ts = s->t_suspend[r] > ts ? s->t_suspend[r] : ts;
      tr = s->t_resume[r] > tr ? s->t_resume[r] : tr;
    }
  }
  if (first < 0) {
    return;
  }
  int64_t fb[NAT], hb[NAT];
  for (int a = 0; a < NAT; a++) {
    fb[a] = s->free_b[a][first];
    hb[a] = s->host_b[a][first];
  }
  const double held = (double)(fb[AT_BEFORE] - fb[AT_INIT]);
  const double graph = (double)(fb[AT_INIT] - fb[AT_GRAPH]);
  const double back = (double)(fb[AT_SUSPENDED] - fb[AT_GRAPH]);
  const double again = (double)(fb[AT_SUSPENDED] - fb[AT_RESUMED]);
  const double left = (double)(fb[AT_BEFORE] - fb[AT_DESTROYED]);
  const double hheld = (double)(hb[AT_INIT] - hb[AT_BEFORE]);
  const double hback = (double)(hb[AT_GRAPH] - hb[AT_SUSPENDED]);
  printf("mode %s, GPU %d, %d rank(s) of %d:\n", j->mode, dev, k, j->n);
  printf("  communicators' GPU memory (measured)  %10.1f MiB\n", held / MIB);
  printf("  graph of the two allreduces           %10.1f MiB (the caller's)\n", graph / MIB);
  if (nc.suspend == NULL) {
    printf("  ncclCommMemStats total / persist       n/a\n");
    printf("  given back by ncclCommSuspend          n/a\n");
    printf("  taken again by ncclCommResume          n/a\n");
  } else {
    printf("  ncclCommMemStats total / persist      %10.1f / %.1f MiB (suspendable %.1f)\n",
           (double)tot / MIB, (double)per / MIB, (double)sus / MIB);
    printf("  given back by ncclCommSuspend         %10.1f MiB (%.1f %%), in %.3f s\n", back / MIB,
           held > 0 ? 100.0 * back / held : 0.0, ts);
    printf("  taken again by ncclCommResume         %10.1f MiB, in %.3f s\n", again / MIB, tr);
  }
  printf("  left after destroy                    %10.1f MiB\n", left / MIB);
  printf("  host memory in use: init %+.1f MiB, suspend %+.1f MiB (whole host, MemAvailable)\n",
         hheld / MIB, nc.suspend == NULL ? 0.0 : -hback / MIB);
  fflush(stdout);
  if (!j->check) {
    return;
  }
  EXPECT(nc.suspend != NULL && nc.resume != NULL && nc.mem_stats != NULL,
         "%s: the library has no ncclCommSuspend/ncclCommResume/ncclCommMemStats", j->mode);
  if (nc.suspend == NULL) {
    return;
  }
  const double tol = k * MIB;
  EXPECT(held - tol <= (double)tot && (double)tot <= held + tol,
         "%s, GPU %d: MemStats' total %.2f MiB is not within %d MiB of the measured %.2f MiB",
         j->mode, dev, (double)tot / MIB, k, held / MIB);
  EXPECT(back >= (double)sus - tol && back <= (double)sus + tol,
         "%s, GPU %d: the suspend gave back %.2f MiB, MemStats said %.2f MiB", j->mode, dev,
         back / MIB, (double)sus / MIB);
  EXPECT(back >= 0.99 * held, "%s, GPU %d: the suspend gave back %.2f of %.2f MiB (< 99 %%)",
         j->mode, dev, back / MIB, held / MIB);
  EXPECT(again >= back - tol && again <= back + tol,
         "%s, GPU %d: the resume took %.2f MiB, the suspend gave back %.2f MiB", j->mode, dev,
         again / MIB, back / MIB);
  EXPECT(left <= tol, "%s, GPU %d: %.2f MiB left after destroy", j->mode, dev, left / MIB);
}

/* One rank's process: its cycle, then (a GPU's first rank) its GPU's figures. */
static void rank_process(void* arg, int r) {
  struct job* j = arg;
  rank_main(j, r);
  if (r < j->ngpu) {
    report(j, r); /* rank r is GPU r's first */
  }
}

static void run_mode(const char* mode, int n, int ngpu, int check) {
  struct job j = {mode, n, ngpu, check, {{{0}}, {{0}}}, NULL};
  j.sh = mmap(NULL, sizeof *j.sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (j.sh == MAP_FAILED || nc.get_unique_id(&j.ids[0]) != ncclSuccess ||
      nc.get_unique_id(&j.ids[1]) != ncclSuccess) {
    FAILF("%s: setting up the job failed", mode);
    return;
  }
  memset(j.sh, 0, sizeof *j.sh);
  j.sh->sync.n = n;
  memjob_fork(n, rank_process, &j);
  munmap(j.sh, sizeof *j.sh);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s LIBRARY [procs|hosts|nop2p|ipc|all] [NRANKS] [--check]\n", argv[0]);
    return 2;
  }
  const char* mode = argc > 2 && argv[2][0] != '-' ? argv[2] : "procs";
  int n = argc > 3 && argv[3][0] != '-' ? atoi(argv[3]) : 2;
  int check = strcmp(argv[argc - 1], "--check") == 0;
  n = n < 2 ? 2 : n > MAXR ? MAXR : n;
  const int ngpu = gpu_probe(); /* tests/gpu/gpu_probe.c */
  if (ngpu <= 0) {
    return gpu_probe_exit(ngpu, "no CUDA device here");
  }
  if (!load(argv[1])) {
    return 2;
  }
  int v = 0;
  nc.version(&v);
  printf("%s: NCCL version code %d, ncclCommSuspend %s; %d rank(s) on %d GPU(s)\n", argv[1], v,
         nc.suspend != NULL ? "present" : "absent (n/a)", n, ngpu);
  static const char* const modes[] = {"procs", "hosts", "nop2p", "ipc"};
  for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
    if (strcmp(mode, "all") == 0 || strcmp(mode, modes[m]) == 0) {
      run_mode(modes[m], n, ngpu, check);
    }
  }
  printf("%ld passed, %ld failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
