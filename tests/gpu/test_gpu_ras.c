/* tutti-ras on device buffers: two ranks as processes on the GPUs, four
 * allreduces of device buffers together; then rank 1 stops before call 5
 * (it sleeps) while rank 0 launches it, so rank 0's kernel waits. Asked
 * meanwhile, tutti-ras (argv[1]) must show rank 0 "waiting" in call 5 for
 * rank 1 and its verdict name rank 1 as the rank behind the call rank 0
 * waits in. Then rank 1 launches call 5 too and both finish, checked.
 * Without a CUDA device it prints "SKIPPED: ..." and exits 77. Prints
 * "N passed, N failed". */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu_probe.h"
#include "nccl.h"
#include "procs.h"

static int ngpu;
static const char* tool;

#define CHECK(cond, ...)                         \
  do {                                           \
    if (cond) {                                  \
      (*P)++;                                    \
    } else {                                     \
      (*F)++;                                    \
      fprintf(stderr, "rank %d: FAILED ", rank); \
      fprintf(stderr, __VA_ARGS__);              \
      fputc('\n', stderr);                       \
      return;                                    \
    }                                            \
  } while (0)

/* What tutti-ras printed (its verdicts and every rank's line), in `out`. */
static int ask(char* out, size_t len) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "%s 2>&1", tool);
  FILE* p = popen(cmd, "r");
  if (p == NULL) {
    return -1;
  }
  size_t n = fread(out, 1, len - 1, p);
  out[n] = '\0';
  return pclose(p);
}

static void body(int rank, void* arg, long* P, long* F) {
  const int n = *(int*)arg;
  const size_t count = 65536;
  ncclComm_t comm = NULL;
  cudaStream_t s;
  float* buf = NULL;
  CHECK(cudaSetDevice(rank % ngpu) == cudaSuccess && cudaStreamCreate(&s) == cudaSuccess &&
            cudaMalloc((void**)&buf, count * sizeof(float)) == cudaSuccess,
        "a stream and a buffer on GPU %d", rank % ngpu);
  ncclUniqueId id;
  CHECK(ncclGetUniqueId(&id) == ncclSuccess && ncclCommInitRank(&comm, n, id, rank) == ncclSuccess,
        "init");
  float* host = malloc(count * sizeof(float));
  for (int call = 1; call <= 5; call++) {
    for (size_t i = 0; i < count; i++) {
      host[i] = (float)(rank + call);
    }
    cudaMemcpy(buf, host, count * sizeof(float), cudaMemcpyHostToDevice);
    if (call == 5 && rank == 1) {
      sleep(8); /* call 5 comes late: rank 0's kernel waits for it meanwhile */
    }
    CHECK(ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, comm, s) == ncclSuccess,
          "allreduce %d", call);
    if (call == 5 && rank == 0) {
      sleep(3);
      static char out[1 << 16];
      const int rc = ask(out, sizeof out);
      printf("rank 0 asked tutti-ras (status %d):\n%s\n", rc, out);
      CHECK(rc == 0, "tutti-ras answered");
      CHECK(strstr(out, "waiting") != NULL, "rank 0 shows as waiting");
      CHECK(strstr(out, "waits in call 5") != NULL,
            "the verdict: rank 0 waits in call 5 (its kernel, launched and left)");
      CHECK(strstr(out, "rank 1 (host") != NULL && strstr(out, "entered 4 calls") != NULL,
            "the verdict names rank 1, which entered 4 calls");
    }
    CHECK(cudaStreamSynchronize(s) == cudaSuccess, "synchronize after call %d", call);
    cudaMemcpy(host, buf, count * sizeof(float), cudaMemcpyDeviceToHost);
    const float want = (float)(n * call + n * (n - 1) / 2);
    int ok = 1;
    for (size_t i = 0; i < count && ok; i++) {
      ok = host[i] == want;
    }
    CHECK(ok, "call %d's sum", call);
  }
  free(host);
  CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
  cudaFree(buf);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test_gpu_ras PATH_OF_TUTTI_RAS\n");
    return 2;
  }
  tool = argv[1];
  ngpu = gpu_probe();
  if (ngpu <= 0) {
    return gpu_probe_exit(ngpu, "no CUDA device here (RAS on host buffers: ras.* tests)");
  }
  /* The job's private socket in a directory of this test's own. */
  char dir[] = "/tmp/tutti-gpu-ras-XXXXXX";
  if (mkdtemp(dir) == NULL || procs_comm_id() != 0) {
    printf("no private directory or port\n0 passed, 1 failed\n");
    return 1;
  }
  setenv("XDG_RUNTIME_DIR", dir, 1);
  unsetenv("NCCL_RAS_ADDR");
  setenv("NCCL_RAS_ENABLE", "1", 1);
  long passed = 0, failed = 0;
  int n = 2;
  procs_run(n, body, &n, &passed, &failed);
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) {
    fprintf(stderr, "could not remove %s\n", dir);
  }
  printf("%ld passed, %ld failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
