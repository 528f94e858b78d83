/* Run-time loading of the CUDA driver (see cuda.h). */
#include "util/cuda.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>

#include "util/check.h"
#include "util/param.h"

typedef int (*cu_init_fn)(unsigned);
typedef int (*cu_ptr_attr_fn)(void*, int, uintptr_t);
typedef int (*cu_stream_sync_fn)(void*);
typedef int (*cu_ctx_get_device_fn)(int*);

#define CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define CU_MEMORYTYPE_DEVICE 2

static TUTTI_PARAM(cuda_disable, "TUTTI_CUDA_DISABLE", 0);

static struct {
  int ok;
  cu_ptr_attr_fn ptr_attr;
  cu_stream_sync_fn stream_sync;
  cu_ctx_get_device_fn ctx_get_device;
} cu;

static pthread_once_t cu_once = PTHREAD_ONCE_INIT;

static void cuda_load(void) {
  if (tutti_param_cuda_disable()) {
    return;
  }
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    INFO(TUTTI_INIT, "no CUDA driver (libcuda.so.1): host buffers only");
    return;
  }
  cu_init_fn init = (cu_init_fn)dlsym(h, "cuInit");
  cu.ptr_attr = (cu_ptr_attr_fn)dlsym(h, "cuPointerGetAttribute");
  cu.stream_sync = (cu_stream_sync_fn)dlsym(h, "cuStreamSynchronize");
  cu.ctx_get_device = (cu_ctx_get_device_fn)dlsym(h, "cuCtxGetDevice");
  if (init == NULL || cu.ptr_attr == NULL || cu.stream_sync == NULL || cu.ctx_get_device == NULL ||
      init(0) != 0) {
    INFO(TUTTI_INIT, "the CUDA driver did not initialize: host buffers only");
    return;
  }
  cu.ok = 1;
}

int tutti_cuda_available(void) {
  pthread_once(&cu_once, cuda_load);
  return cu.ok;
}

int tutti_cuda_is_device_ptr(const void* p) {
  if (p == NULL || !tutti_cuda_available()) {
    return 0;
  }
  unsigned type = 0;
  if (cu.ptr_attr(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (uintptr_t)p) != 0) {
    return 0; /* unknown to CUDA: ordinary host memory */
  }
  return type == CU_MEMORYTYPE_DEVICE;
}

int tutti_cuda_current_device(void) {
  int dev = -1;
  if (tutti_cuda_available() && cu.ctx_get_device(&dev) != 0) {
    dev = -1;
  }
  return dev;
}

ncclResult_t tutti_cuda_stream_sync(cudaStream_t stream) {
  if (stream == NULL || !tutti_cuda_available()) {
    return ncclSuccess;
  }
  int r = cu.stream_sync(stream);
  if (r != 0) {
    return tutti_error(ncclUnhandledCudaError,
                       "waiting for the caller's CUDA stream failed (CUresult %d)", r);
  }
  return ncclSuccess;
}
