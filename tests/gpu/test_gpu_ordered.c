/* Deterministic reductions on device buffers (TUTTI_DETERMINISTIC=1):
 * allreduce, reduce-scatter and reduce through every device path the
 * environment can force (the mapped kernel, its LL128 lines, the copy
 * engines, the schedules' kernel, the network proxy, ranks as hosts), with
 * 2 to 4 ranks sharing the GPUs there are, against the fold in rank order
 * bit for bit (tests/common/fold_ref.h), the same reference the host tests
 * use (coll.ordered.*): device and host buffers give the same bits. A
 * last placement runs the same cases on host buffers in this program.
 *   test_gpu_ordered [PLACEMENT]     (all by default)
 * Without a CUDA device it prints "SKIPPED: ..." and exits 77. */
#define _GNU_SOURCE
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fold_ref.h"
#include "gpu_probe.h"
#include "procs.h"

struct placement {
  const char* name;
  int nranks;
  int device;         /* 1: cudaMalloc buffers; 0: host buffers */
  const char* env[4]; /* NAME=VALUE, set in every rank before init */
  int hosts;          /* 1: every rank its own NCCL_HOSTID */
};

static const struct placement placements[] = {
    {"mapped", 2, 1, {NULL}, 0},
    {"mapped3", 3, 1, {NULL}, 0},
    {"mapped-ll128", 2, 1, {"NCCL_PROTO=LL128", "TUTTI_TUNE=all:0-1g:@mapped"}, 0},
    {"mapped-simple", 4, 1, {"NCCL_PROTO=Simple", "TUTTI_TUNE=all:0-1g:@mapped"}, 0},
    {"ce", 2, 1, {"TUTTI_TUNE=all:1-inf:@ce;ce.memory=1m"}, 0},
    {"ring", 3, 1, {"NCCL_ALGO=^Mapped,CE"}, 0},
    {"ring-ll", 4, 1, {"NCCL_ALGO=^Mapped,CE", "NCCL_PROTO=LL"}, 0},
    {"direct", 3, 1, {"NCCL_ALGO=Direct"}, 0},
    {"net", 2, 1, {"NCCL_P2P_DISABLE=1", "NCCL_SHM_DISABLE=1"}, 0},
    {"hosts", 3, 1, {NULL}, 1},
    {"host-buffers", 3, 0, {NULL}, 0},
};
#define NPLACEMENTS (sizeof placements / sizeof placements[0])

static const ncclDataType_t types[] = {ncclFloat32, ncclFloat64, ncclFloat16, ncclBfloat16,
                                       ncclFloat8e4m3};
#define NTYPES (sizeof types / sizeof types[0])
static const size_t counts[] = {1, 1000, 300007};
#define NCOUNTS (sizeof counts / sizeof counts[0])
enum { ALLREDUCE, REDUCESCATTER, REDUCE, NCOLLS };
static const char* const coll_names[NCOLLS] = {"allreduce", "reducescatter", "reduce"};
static const char* const op_names[FR_NOPS] = {"sum", "prod", "max", "min", "avg", "premulsum"};
#define PREMUL_SCALAR 0.75
#define MAX_BYTES ((size_t)310000 * 8)

struct rank_state {
  const struct placement* pl;
  int rank, n;
  ncclComm_t comm;
  cudaStream_t stream;
  char *send, *recv; /* device or host */
  char* host;        /* the host copy of inputs and outputs */
  long passed, failed;
};

static int copy(struct rank_state* s, void* dst, const void* src, size_t bytes, int to_dev) {
  if (!s->pl->device) {
    memcpy(dst, src, bytes);
    return 1;
  }
  return cudaMemcpy(dst, src, bytes, to_dev ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost) ==
         cudaSuccess;
}

static void one_case(struct rank_state* s, int coll, ncclDataType_t t, int op, size_t total,
                     int in_place) {
  const size_t es = tutti_type_size(t);
  const int n = s->n, rank = s->rank, root = n - 1;
  const size_t per = coll == REDUCESCATTER ? total / (size_t)n : total;
  for (size_t i = 0; i < total; i++) {
    fr_put(t, s->host, i, fr_input(t, op, rank, i));
  }
  char* out =
      in_place ? (coll == REDUCESCATTER ? s->send + (size_t)rank * per * es : s->send) : s->recv;
  if (!copy(s, s->send, s->host, total * es, 1)) {
    s->failed++;
    return;
  }
  ncclRedOp_t rop = (ncclRedOp_t)op;
  if (op == FR_PREMUL) {
    uint64_t sc = fr_enc_f(t, (float)PREMUL_SCALAR);
    if (t == ncclFloat64) {
      double d = PREMUL_SCALAR;
      memcpy(&sc, &d, 8);
    }
    if (ncclRedOpCreatePreMulSum(&rop, &sc, t, ncclScalarHostImmediate, s->comm) != ncclSuccess) {
      s->failed++;
      return;
    }
  }
  ncclResult_t res =
      coll == ALLREDUCE       ? ncclAllReduce(s->send, out, total, t, rop, s->comm, s->stream)
      : coll == REDUCESCATTER ? ncclReduceScatter(s->send, out, per, t, rop, s->comm, s->stream)
                              : ncclReduce(s->send, out, total, t, rop, root, s->comm, s->stream);
  if (res == ncclSuccess && s->pl->device && cudaStreamSynchronize(s->stream) != cudaSuccess) {
    res = ncclUnhandledCudaError;
  }
  if (op == FR_PREMUL) {
    ncclRedOpDestroy(rop, s->comm);
  }
  if (res != ncclSuccess) {
    fprintf(stderr, "FAIL %s rank %d: %s %s %s: %s\n", s->pl->name, rank, coll_names[coll],
            tutti_type_name(t), op_names[op], ncclGetLastError(s->comm));
    s->failed++;
    return;
  }
  if (coll == REDUCE && rank != root) {
    return;
  }
  if (!copy(s, s->host, out, per * es, 0)) {
    s->failed++;
    return;
  }
  const size_t first = coll == REDUCESCATTER ? (size_t)rank * per : 0;
  int ord[16];
  uint64_t xs[16];
  long bad = 0;
  for (int k = 0; k < n; k++) {
    ord[k] = k;
  }
  for (size_t j = 0; j < per; j++) {
    for (int r = 0; r < n; r++) {
      xs[r] = fr_input(t, op, r, first + j);
    }
    const uint64_t want = fr_fold(t, op, n, ord, xs, PREMUL_SCALAR);
    const uint64_t got = fr_get(t, s->host, j);
    if (!fr_same(t, op, got, want) && bad++ < 3) {
      fprintf(stderr,
              "FAIL %s rank %d/%d: %s %s %s count %zu%s: element %zu is 0x%llx, not 0x%llx\n",
              s->pl->name, rank, n, coll_names[coll], tutti_type_name(t), op_names[op], total,
              in_place ? " in place" : "", first + j, (unsigned long long)got,
              (unsigned long long)want);
    }
  }
  *(bad ? &s->failed : &s->passed) += 1;
}

static void rank_main(int rank, void* arg, long* passed, long* failed) {
  const struct placement* pl = arg;
  struct rank_state s = {.pl = pl, .rank = rank, .n = pl->nranks};
  char host[32];
  alarm(900); /* a hang becomes this rank's failure */
  setenv("TUTTI_DETERMINISTIC", "1", 1);
  for (int e = 0; e < 4 && pl->env[e] != NULL; e++) {
    putenv((char*)pl->env[e]);
  }
  if (pl->hosts) {
    snprintf(host, sizeof host, "ordered-gpu-host-%d", rank);
    setenv("NCCL_HOSTID", host, 1);
  }
  int ngpu = 0;
  if (pl->device &&
      (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu == 0 ||
       cudaSetDevice(rank % ngpu) != cudaSuccess || cudaStreamCreate(&s.stream) != cudaSuccess ||
       cudaMalloc((void**)&s.send, MAX_BYTES) != cudaSuccess ||
       cudaMalloc((void**)&s.recv, MAX_BYTES) != cudaSuccess)) {
    *failed = 1;
    return;
  }
  if (!pl->device) {
    s.send = malloc(MAX_BYTES);
    s.recv = malloc(MAX_BYTES);
  }
  s.host = malloc(MAX_BYTES);
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess ||
      ncclCommInitRank(&s.comm, s.n, id, rank) != ncclSuccess) {
    fprintf(stderr, "FAIL %s rank %d: init: %s\n", pl->name, rank, ncclGetLastError(NULL));
    *failed = 1;
    return;
  }
  for (int coll = 0; coll < NCOLLS; coll++) {
    for (size_t k = 0; k < NCOUNTS; k++) {
      const size_t total =
          coll == REDUCESCATTER ? (counts[k] / (size_t)s.n + 1) * (size_t)s.n : counts[k];
      for (size_t ti = 0; ti < NTYPES; ti++) {
        for (int op = 0; op < FR_NOPS; op++) {
          for (int ip = 0; ip < 2; ip++) {
            one_case(&s, coll, types[ti], op, total, ip);
          }
        }
      }
    }
  }
  ncclCommDestroy(s.comm);
  *passed = s.passed;
  *failed = s.failed;
}

int main(int argc, char** argv) {
  const char* only = argc > 1 ? argv[1] : "all";
  const int ngpu = gpu_probe();
  if (ngpu <= 0) {
    return gpu_probe_exit(ngpu, "no CUDA device here (host buffers are checked by coll.ordered.*)");
  }
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  long passed = 0, failed = 0;
  for (size_t p = 0; p < NPLACEMENTS; p++) {
    if (strcmp(only, "all") != 0 && strcmp(only, placements[p].name) != 0) {
      continue;
    }
    long p0 = passed, f0 = failed;
    if (procs_comm_id() != 0) {
      fprintf(stderr, "FAIL: no free port for NCCL_COMM_ID\n");
      return 1;
    }
    procs_run(placements[p].nranks, rank_main, (void*)&placements[p], &passed, &failed);
    printf("placement %-14s %d ranks: %ld passed, %ld failed\n", placements[p].name,
           placements[p].nranks, passed - p0, failed - f0);
    fflush(stdout);
  }
  printf("%ld passed, %ld failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
