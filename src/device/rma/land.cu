/* The landing's memory (land.h): mapped pinned chunks, the control words
 * and the reader's cursor. The producer's logic is land.c's. */
#include <string.h>

#include "device/rma/land.h"

extern "C" {
#include "util/check.h"
}

static int land_fail(cudaError_t e, const char* what) {
  (void)cudaGetLastError();
  tutti_error(ncclUnhandledCudaError, "%s failed: %s (%s)", what, cudaGetErrorString(e),
              cudaGetErrorName(e));
  return -1;
}

/* At setup only (land.h says why). */
static int chunk_alloc(uint64_t bytes, char** host, char** dev) {
  *host = NULL;
  cudaError_t e = cudaHostAlloc((void**)host, bytes, cudaHostAllocMapped | cudaHostAllocPortable);
  if (e == cudaSuccess) {
    e = cudaHostGetDevicePointer((void**)dev, *host, 0);
  }
  if (e != cudaSuccess) {
    if (*host != NULL) {
      cudaFreeHost(*host);
    }
    return land_fail(e, "cudaHostAlloc of a one-sided landing chunk");
  }
  return 0;
}

static void chunk_release(char* host) {
  cudaFreeHost(host);
}

extern "C" ncclResult_t td_land_init(struct td_land* l, uint64_t limit, size_t max_payload,
                                     struct td_land_cursor* cursor, const int* abort_flag,
                                     double timeout_s, int rank, const char** what) {
  memset(l, 0, sizeof *l);
  l->cursor = cursor;
  l->alloc = chunk_alloc;
  l->release = chunk_release;
  l->abort_flag = abort_flag;
  l->timeout_s = timeout_s;
  l->rank = rank;
  l->limit = limit;
  *what = "cudaHostAlloc of the one-sided landing's control words";
  cudaError_t e =
      cudaHostAlloc((void**)&l->ctl, sizeof *l->ctl, cudaHostAllocMapped | cudaHostAllocPortable);
  if (e == cudaSuccess) {
    memset(l->ctl, 0, sizeof *l->ctl);
    e = cudaHostGetDevicePointer((void**)&l->ctl_dev, l->ctl, 0);
  }
  if (e != cudaSuccess) {
    land_fail(e, *what);
    return ncclUnhandledCudaError;
  }
  *what = "the one-sided landing's chunks";
  NCCLCHECK(td_land_start(l, max_payload));
  struct td_land_cursor c0 = {0, (uint64_t)(uintptr_t)l->chunks[0].dev};
  *what = "writing the one-sided landing's cursor";
  e = cudaMemcpy(l->cursor, &c0, sizeof c0, cudaMemcpyHostToDevice);
  if (e != cudaSuccess) {
    land_fail(e, *what);
    return ncclUnhandledCudaError;
  }
  return ncclSuccess;
}

extern "C" void td_land_free(struct td_land* l) {
  if (l->chunks != NULL) {
    td_land_stop(l);
  }
  if (l->ctl != NULL) {
    cudaFreeHost(l->ctl);
  }
  memset(l, 0, sizeof *l);
}
