/* The GPU suite: every collective x datatype x reduction x in-place /
 * out-of-place x count on device buffers, checked bit for bit, in each mode:
 *   procs       N processes, rank r on GPU r % #GPUs (regions shared as cuMem
 *               file descriptors between processes)
 *   ipc         as procs, with NCCL_CUMEM_ENABLE=0: regions shared as CUDA
 *               IPC handles
 *   shared      N processes on GPU 0 (ranks sharing one GPU)
 *   single      one process driving every GPU (ncclCommInitAll)
 *   graph       each collective captured in a CUDA graph, replayed three times
 *   concurrent  two communicators per rank, used at once on two streams
 *   p2p         grouped ncclSend / ncclRecv (an all-to-all of N sends and receives)
 *   big         counts beyond a queue per channel (hundreds of MB)
 *   nop2p       as procs, with NCCL_P2P_DISABLE=1: queues in host memory
 *   net         as procs, with NCCL_P2P_DISABLE=1 and NCCL_SHM_DISABLE=1: every
 *               peer treated as remote, device data through the proxy over TCP
 *   huge        counts of several GB (64-bit sizes): allreduce and broadcast
 *   hidden      as procs, each process seeing only its own GPU
 *               (CUDA_VISIBLE_DEVICES): no peer access, queues in host memory
 *   ring        as procs, with the mapped kernel left out (NCCL_ALGO=^Mapped):
 *               every collective through the schedules' kernel
 *   rounds      as procs, with inboxes of 16 KB per lane in rounds of 2 KB
 *               and low-latency rounds up to 256 KB: the mapped kernel in
 *               many rounds, each inbox slot used many times per call
 *   simple      as rounds, every size in simple rounds (no LL lines)
 *   ce          as procs, every size on the copy-engine path, in pieces of
 *               inboxes of 512 KB (two ranks)
 *   samegpu     one process, N ranks on GPU 0 (one thread per ncclCommInitRank),
 *               driven as a group, with counts of hundreds of MB: kernels
 *               that run at the same time on one GPU must fit it together
 *   frames      no communicator: every kernel's per-thread stack frame fits the
 *               stack every context has (1 KB), so launching reserves no more
 *               device memory (docs/design.md, "A kernel's stack ...")
 *   netkill     as net; rank 1 exits without a word after a few allreduces:
 *               rank 0's pending allreduce must fail with ncclRemoteError
 *               naming rank 1 within 5 s (the proxy sees the connection close)
 *   hosts       as procs, each rank its own host by NCCL_HOSTID: ranks on one
 *               machine (or one GPU) meet through the network proxy
 *   streams     one communicator driven from three streams per rank (each
 *               rank choosing its own): 40 x {AR 12 MB on A, AR 1 MB on B},
 *               a group naming two streams, random batches (a gate holding
 *               the first operation's stream, other work and cross-stream
 *               waits in front of some, pairs in groups), then ZeRO-style
 *               steps (grouped in-place reduce-scatters and all-gathers on a
 *               communication stream, scalars on the compute stream, one in
 *               managed memory); streams-ring, -ce, -ll128, -nop2p, -net and
 *               -hosts do the same on each forced path
 *   memkinds    every collective on managed, pinned, registered, ncclMemAlloc
 *               and cuMem (VMM) buffers, and on mixed pairs of kinds
 *   stall       rank 1 stays alive but stops calling (TUTTI_TIMEOUT=4): rank 0's
 *               allreduce must fail naming the timeout within the bound, later
 *               calls must fail at once, and destroy must return
 *   mismatch    2 ranks, device buffers, rank 0 sums where rank 1 takes the max:
 *               both fail within 5 s naming both calls, later calls at once;
 *               mismatch-hosts the same with each rank its own host
 *   config      the matrix through the nccl<Coll>Config calls, cycling
 *               through their fields (gpu_config.c)
 *   shapes      2 ranks, rank 1 started with another NCCL_BUFFSIZE: both
 *               ranks' init must fail with ncclInvalidUsage naming the
 *               variables, never lay out their queues differently
 *   mps         N processes on GPU 0 under an MPS server this mode starts
 *               (their kernels share the SMs at once): a reduce-scatter of
 *               128 MB per rank, the streams cases, then the same with each
 *               rank its own host (NCCL_HOSTID); skipped, loudly, without
 *               nvidia-cuda-mps-control
 * Usage: test_gpu MODE|all|quick|full [nranks]. all: the core mode (procs)
 * with the whole matrix, the other modes with a lean one, no soak; quick:
 * procs with the whole matrix, every other mode but the soak one pass
 * (TUTTI_GPU_MATRIX=pass); full: every mode with the whole matrix. Without a CUDA device it prints
 * "SKIPPED: ..." and exits 77. Ends with "N passed, N failed". */
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "device/device.h"
#include "gpu_case.h"
#include "gpu_probe.h"
#include "gpu_run.h"
#include "gpu_streams.h"
#include "procs.h"
#include "reduce/reduce.h"

static size_t cap_for(const char* mode, int n) {
  return strcmp(mode, "huge") == 0      ? (((size_t)640 << 20) * 4 + 4096) * (size_t)n
         : strcmp(mode, "big") == 0     ? ((size_t)64 << 20) * 4 * (size_t)n + 64
         : strncmp(mode, "mps", 3) == 0 ? ((size_t)32 << 20) * 4 * (size_t)n + 64
                                        : (size_t)n * 1000003 * 4 + 64;
}

static int starts(const char* s, const char* prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* A reduce-scatter of 128 MB per rank: two ranks sharing a GPU under MPS
 * once hung here (their grids did not fit the GPU together). */
static void run_rs128(struct grank* g) {
  struct gcase c = {G_REDUCESCATTER, ncclFloat32, ncclSum, (size_t)32 << 20, 0, 0, 0, 5};
  run_case(&c, g, 1, 0);
}

/* One rank of a multi-process mode. */
static void proc_rank(const char* mode, int n, int r, int dev, const ncclUniqueId* ids) {
  if (!cuda_ok(cudaSetDevice(dev), "cudaSetDevice")) {
    return;
  }
  ncclComm_t comm;
  if (strcmp(mode, "shapes") == 0) {
    run_shapes(ids, r, n);
    return;
  }
  if (ncclCommInitRank(&comm, n, ids[0], r) != ncclSuccess) {
    FAILF("rank %d/%d: init: %s", r, n, ncclGetLastError(NULL));
    return;
  }
  struct grank g;
  if (!rank_setup(&g, comm, r, n, dev, cap_for(mode, n))) {
    FAILF("rank %d: allocating buffers failed", r);
    return;
  }
  if (strcmp(mode, "concurrent") == 0) {
    ncclComm_t comm2;
    struct grank g2;
    if (ncclCommInitRank(&comm2, n, ids[1], r) != ncclSuccess ||
        !rank_setup(&g2, comm2, r, n, dev, cap_for(mode, n))) {
      FAILF("rank %d/%d: second communicator: %s", r, n, ncclGetLastError(NULL));
      return;
    }
    for (int it = 0; it < 20 && failed == 0; it++) {
      struct gcase a = {G_ALLREDUCE, ncclFloat32, ncclSum, 250007 + (size_t)it, it & 1, 0, 0};
      struct gcase b = {G_ALLGATHER, ncclBfloat16, ncclSum, 100003 + (size_t)it, it & 1, 0, 0};
      if (!gcase_prepare(&a, &g) || !gcase_prepare(&b, &g2) || gcase_issue(&a, &g) != ncclSuccess ||
          gcase_issue(&b, &g2) != ncclSuccess) {
        FAILF("rank %d: concurrent issue failed: %s", r, ncclGetLastError(comm));
        break;
      }
      int ok = gcase_verify(&a, &g) & gcase_verify(&b, &g2);
      ok ? passed++ : failed++;
    }
    grank_free(&g2);
    ncclCommDestroy(comm2);
  } else if (starts(mode, "streams")) {
    run_streams(&g, 1, n, 12);
    if (failed == 0) {
      run_zero(&g, 1, n, 3);
    }
  } else if (starts(mode, "mps")) {
    run_rs128(&g);
    if (failed == 0) {
      run_streams(&g, 1, n, 6);
    }
    if (failed == 0) {
      run_zero(&g, 1, n, 2);
    }
  } else if (strcmp(mode, "memkinds") == 0) {
    run_memkinds(&g, n);
  } else if (strcmp(mode, "p2p") == 0) {
    run_p2p(&g);
  } else if (strcmp(mode, "big") == 0) {
    run_big(&g, 1, n);
  } else if (strcmp(mode, "huge") == 0) {
    run_huge(&g, n);
  } else if (starts(mode, "mismatch")) {
    run_mismatch(&g);
    if (g.comm == NULL) {
      grank_free(&g);
      return;
    }
  } else if (strcmp(mode, "stall") == 0) {
    run_stall(&g);
    if (g.comm == NULL) {
      grank_free(&g);
      return;
    }
  } else if (strcmp(mode, "netkill") == 0) {
    run_netkill(&g);
    if (r == 1) {
      return; /* vanishes: no destroy, no goodbye */
    }
    if (g.comm == NULL) {
      grank_free(&g);
      return;
    }
  } else {
    run_matrix(&g, 1, n, strcmp(mode, "graph") == 0);
    if (failed == 0) {
      run_p2p(&g);
    }
  }
  grank_free(&g);
  ncclCommDestroy(comm);
}

struct procs_job {
  const char* mode;
  int n;
  int ngpu;
  ncclUniqueId ids[2];
};

static void proc_child(int r, void* arg, long* p, long* f) {
  const struct procs_job* j = arg;
  passed = failed = 0; /* this rank's own counts */
  /* No rank outlives its bound: a hang becomes a failure of this rank. */
  const char* lim = getenv("TUTTI_GPU_TEST_LIMIT");
  alarm(lim != NULL ? (unsigned)atoi(lim) : 900);
  /* streams-ring runs the streams cases under ring's settings, and so on. */
  const char* path = strchr(j->mode, '-') != NULL ? strchr(j->mode, '-') + 1 : j->mode;
  gcase_mode_env(path);
  if (strcmp(path, "hosts") == 0) {
    char id[64];
    snprintf(id, sizeof id, "tutti-test-host-%d", r);
    setenv("NCCL_HOSTID", id, 1);
  }
  int dev = strcmp(j->mode, "shared") == 0 || starts(j->mode, "mps") ? 0 : r % j->ngpu;
  if (strcmp(j->mode, "hidden") == 0) {
    char v[16];
    snprintf(v, sizeof v, "%d", dev);
    setenv("CUDA_VISIBLE_DEVICES", v, 1);
    dev = 0;
  }
  proc_rank(j->mode, j->n, r, dev, j->ids);
  if (failed == 0) {
    gcase_assert_path(j->mode); /* the streams-* modes' grouped calls take no single-call path */
  }
  *p = passed;
  *f = failed;
}

static void run_procs(const char* mode, int n, int ngpu) {
  struct procs_job j = {mode, n, ngpu, {{{0}}, {{0}}}};
  if (ncclGetUniqueId(&j.ids[0]) != ncclSuccess || ncclGetUniqueId(&j.ids[1]) != ncclSuccess) {
    FAILF("ncclGetUniqueId: %s", ncclGetLastError(NULL));
    return;
  }
  procs_run(n, proc_child, &j, &passed, &failed);
}

/* One process, one thread, every GPU a rank (ncclCommInitAll). */
static void run_single(int ngpu) {
  ncclComm_t comms[8];
  struct grank gs[8];
  int n = ngpu > 8 ? 8 : ngpu;
  if (ncclCommInitAll(comms, n, NULL) != ncclSuccess) {
    FAILF("ncclCommInitAll(%d): %s", n, ncclGetLastError(NULL));
    return;
  }
  for (int i = 0; i < n; i++) {
    cudaSetDevice(i);
    if (!rank_setup(&gs[i], comms[i], i, n, i, cap_for("single", n))) {
      FAILF("GPU %d: allocating buffers failed", i);
      return;
    }
  }
  run_matrix(gs, n, n, 0);
  for (int i = 0; i < n; i++) {
    cudaSetDevice(i);
    grank_free(&gs[i]);
    ncclCommDestroy(comms[i]);
  }
}

/* One process, N ranks on GPU 0, each created by a thread of its own
 * (ncclCommInitRank; ncclCommInitAll refuses a device listed twice), then
 * driven as a group from one thread: their kernels run at the same time,
 * so together they must fit the GPU, or a launch that fills it waits
 * forever for its peers'. */
struct samegpu_rank {
  ncclUniqueId id;
  int n, r;
  ncclComm_t comm;
  ncclResult_t res;
};

static void* samegpu_init(void* arg) {
  struct samegpu_rank* sr = arg;
  sr->res = cudaSetDevice(0) == cudaSuccess ? ncclCommInitRank(&sr->comm, sr->n, sr->id, sr->r)
                                            : ncclUnhandledCudaError;
  return NULL;
}

static void run_samegpu(int n) {
  struct samegpu_rank sr[8];
  struct grank gs[8];
  pthread_t th[8];
  ncclUniqueId id;
  n = n > 8 ? 8 : n;
  if (ncclGetUniqueId(&id) != ncclSuccess) {
    FAILF("ncclGetUniqueId: %s", ncclGetLastError(NULL));
    return;
  }
  int started = 0;
  for (; started < n; started++) {
    sr[started] = (struct samegpu_rank){id, n, started, NULL, ncclInternalError};
    if (pthread_create(&th[started], NULL, samegpu_init, &sr[started]) != 0) {
      break;
    }
  }
  int ready = 0, ok = started == n;
  for (int i = 0; i < started; i++) {
    pthread_join(th[i], NULL);
    if (sr[i].res != ncclSuccess) {
      FAILF("rank %d of %d on GPU 0: ncclCommInitRank: %s", i, n, ncclGetLastError(NULL));
      ok = 0;
    }
  }
  cudaSetDevice(0);
  while (ok && ready < n &&
         rank_setup(&gs[ready], sr[ready].comm, ready, n, 0, cap_for("big", n))) {
    ready++;
  }
  if (ok && ready == n) {
    run_matrix(gs, n, n, 0);
    run_big(gs, n, n);
    if (failed == 0) {
      run_streams(gs, n, n, 4);
    }
    if (failed == 0) {
      run_zero(gs, n, n, 2);
    }
  } else if (ok) {
    FAILF("rank %d: allocating buffers failed", ready);
  }
  for (int i = 0; i < started; i++) {
    if (i < ready) {
      grank_free(&gs[i]);
    }
    if (sr[i].res == ncclSuccess) {
      ncclCommDestroy(sr[i].comm);
    }
  }
}

static void samegpu_child(int r, void* arg, long* p, long* f) {
  (void)r;
  passed = failed = 0;
  run_samegpu(*(const int*)arg);
  *p = passed;
  *f = failed;
}

static void single_child(int r, void* arg, long* p, long* f) {
  (void)r;
  passed = failed = 0;
  run_single(*(const int*)arg);
  *p = passed;
  *f = failed;
}

/* Every kernel's frame within the stack a context starts with: a larger
 * one makes the driver reserve (frame - limit) for every thread the GPU
 * holds (264 MiB per KB on an H200), for the context's life. */
static void frames_child(int r, void* arg, long* p, long* f) {
  (void)r;
  (void)arg;
  passed = failed = 0;
  size_t limit = 0;
  const char* names[TUTTI_DEV_NKERNELS];
  size_t bytes[TUTTI_DEV_NKERNELS];
  if (!cuda_ok(cudaFree(NULL), "cudaFree") ||
      !cuda_ok(cudaDeviceGetLimit(&limit, cudaLimitStackSize), "cudaDeviceGetLimit")) {
    *p = passed;
    *f = failed;
    return;
  }
  const int k = tutti_dev_kernel_frames(names, bytes, TUTTI_DEV_NKERNELS);
  if (k != TUTTI_DEV_NKERNELS) {
    FAILF("tutti_dev_kernel_frames returned %d", k);
  }
  for (int i = 0; i < k; i++) {
    printf("kernel %-18s %5zu bytes of stack per thread (the context has %zu)\n", names[i],
           bytes[i], limit);
    if (bytes[i] <= limit) {
      passed++;
    } else {
      FAILF(
          "kernel %s needs %zu bytes of stack per thread, more than the %zu every context "
          "has: the driver would reserve %zu MiB more of an H200 for it",
          names[i], bytes[i], limit, (bytes[i] - limit) * 2048 * 132 >> 20);
    }
  }
  *p = passed;
  *f = failed;
}

/* The mps mode: an MPS control daemon of its own (a private pipe
 * directory), the mps cases on one host and as two hosts, then the daemon
 * told to quit. */
static void run_mps(int n, int ngpu) {
  char dir[] = "/tmp/tutti-mps-XXXXXX";
  if (system("command -v nvidia-cuda-mps-control >/dev/null 2>&1") != 0 || mkdtemp(dir) == NULL) {
    printf("SKIPPED: mode mps: nvidia-cuda-mps-control is not installed here\n");
    return;
  }
  setenv("CUDA_MPS_PIPE_DIRECTORY", dir, 1);
  setenv("CUDA_MPS_LOG_DIRECTORY", dir, 1);
  if (system("nvidia-cuda-mps-control -d") != 0) {
    FAILF("mps: nvidia-cuda-mps-control -d failed");
    return;
  }
  run_procs("mps", n, ngpu);
  long f0 = failed;
  run_procs("mps-hosts", n, ngpu);
  printf("mode mps-hosts (under MPS): %s\n", failed == f0 ? "passed" : "failed");
  if (system("echo quit | nvidia-cuda-mps-control") != 0) {
    FAILF("mps: the MPS daemon did not quit");
  }
  unsetenv("CUDA_MPS_PIPE_DIRECTORY");
  unsetenv("CUDA_MPS_LOG_DIRECTORY");
}

/* A mode whose every process, the parent that makes the unique ids (and
 * so the bootstrap root, which reads TUTTI_TIMEOUT once) included, needs
 * its own environment runs as a program of its own. */
static void run_fresh(const char* mode) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    execl("/proc/self/exe", "test_gpu", mode, (char*)NULL);
    _exit(127);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
    passed++;
  } else {
    FAILF("mode %s failed in its own process", mode);
  }
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "all";
  /* "full": every mode with the whole matrix, the soaks included. */
  const int full = strcmp(mode, "full") == 0;
  /* "quick": the core matrix, then one pass through every other mode. */
  const int quick = strcmp(mode, "quick") == 0;
  mode = full || quick ? "all" : mode;
  const char* matrix = getenv("TUTTI_GPU_MATRIX"); /* the caller's choice wins */
  if (strcmp(mode, "stall") == 0) {
    setenv("TUTTI_TIMEOUT", "4", 1); /* before anything reads it */
  }
  int ngpu = gpu_probe();
  if (ngpu <= 0) {
    return gpu_probe_exit(ngpu,
                          "no CUDA device here (the GPU suite needs one; host collectives are "
                          "tested by the other tests)");
  }
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  int n = argc > 2 ? atoi(argv[2]) : (ngpu >= 2 ? ngpu : 2);
  const char* all[] = {"procs",       "shared",        "single",
                       "graph",       "concurrent",    "p2p",
                       "big",         "nop2p",         "net",
                       "huge",        "netkill",       "hidden",
                       "ring",        "rounds",        "simple",
                       "ce",          "ll128",         "ipc",
                       "frames",      "samegpu",       "hosts",
                       "memkinds",    "streams",       "streams-ring",
                       "streams-ce",  "streams-ll128", "streams-nop2p",
                       "streams-net", "streams-hosts", "mps",
                       "stall",       "mismatch",      "mismatch-hosts",
                       "shapes",      "config"};
  int known = strcmp(mode, "all") == 0;
  for (size_t m = 0; m < sizeof all / sizeof all[0]; m++) {
    known |= strcmp(mode, all[m]) == 0;
  }
  if (!known) {
    fprintf(stderr, "test_gpu: unknown mode %s\n", mode);
    printf("0 passed, 1 failed\n");
    return 1;
  }
  for (size_t m = 0; m < sizeof all / sizeof all[0]; m++) {
    if (strcmp(mode, "all") != 0 && strcmp(mode, all[m]) != 0) {
      continue;
    }
    /* A whole run: the core mode (procs) takes the whole matrix, the path
     * modes the lean one (gpu_run.c), and the soak (huge) runs only in the
     * full run or by name. A mode named alone: the whole matrix. */
    const int whole_run = strcmp(mode, "all") == 0 && !full;
    if (whole_run && strcmp(all[m], "huge") == 0) {
      printf(
          "mode huge: a soak (sizes past 2^31), run by \"test_gpu huge\" or \"test_gpu full\"\n");
      continue;
    }
    setenv("TUTTI_GPU_MATRIX",
           matrix != NULL                              ? matrix
           : whole_run && strcmp(all[m], "procs") != 0 ? (quick ? "pass" : "lean")
                                                       : "full",
           1);
    long p0 = passed, f0 = failed;
    if (strcmp(all[m], "single") == 0) {
      /* In a child: this process stays free of CUDA for the modes that fork. */
      procs_run(1, single_child, &ngpu, &passed, &failed);
    } else if (strcmp(all[m], "samegpu") == 0) {
      procs_run(1, samegpu_child, &n, &passed, &failed);
    } else if (strcmp(all[m], "frames") == 0) {
      procs_run(1, frames_child, NULL, &passed, &failed);
    } else if (strcmp(all[m], "mps") == 0) {
      run_mps(n, ngpu);
    } else if (strcmp(all[m], "stall") == 0 && strcmp(mode, "all") == 0) {
      run_fresh("stall");
    } else {
      run_procs(all[m],
                strcmp(all[m], "netkill") == 0 || strcmp(all[m], "stall") == 0 ||
                        starts(all[m], "mismatch") || strcmp(all[m], "shapes") == 0
                    ? 2
                    : n,
                ngpu);
    }
    printf("mode %-10s nranks %d on %d GPU(s): %ld passed, %ld failed\n", all[m],
           strcmp(all[m], "frames") == 0    ? 0
           : strcmp(all[m], "single") == 0  ? ngpu
           : strcmp(all[m], "netkill") == 0 ? 2
                                            : n,
           ngpu, passed - p0, failed - f0);
    fflush(stdout);
  }
  printf("%ld passed, %ld failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
