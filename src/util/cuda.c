/* Run-time loading of the CUDA driver (see cuda.h). */
#include "util/cuda.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "util/check.h"
#include "util/param.h"

typedef int (*cu_init_fn)(unsigned);
typedef int (*cu_ptr_attr_fn)(void*, int, uintptr_t);
typedef int (*cu_ptr_attrs_fn)(unsigned, int*, void**, uintptr_t);
typedef int (*cu_stream_sync_fn)(void*);
typedef int (*cu_ctx_get_device_fn)(int*);
typedef int (*cu_stream_query_fn)(void*);
typedef int (*cu_device_get_fn)(int*, int);
typedef int (*cu_device_uuid_fn)(unsigned char*, int);
typedef int (*cu_device_mem_fn)(size_t*, int);
typedef int (*cu_device_pci_fn)(char*, int, int);
typedef int (*cu_event_record_fn)(void*, void*);

/* The driver API's values (cuda.h), which this file does not include. */
#define CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define CU_POINTER_ATTRIBUTE_DEVICE_POINTER 3
#define CU_POINTER_ATTRIBUTE_IS_MANAGED 8
#define CU_MEMORYTYPE_HOST 1
#define CU_MEMORYTYPE_DEVICE 2
#define CUDA_ERROR_NOT_READY 600

static TUTTI_PARAM(cuda_disable, "TUTTI_CUDA_DISABLE", 0,
                   "1: never load the CUDA driver (host buffers only)");

static struct {
  int ok;
  cu_ptr_attr_fn ptr_attr;
  cu_ptr_attrs_fn ptr_attrs;
  cu_stream_sync_fn stream_sync;
  cu_ctx_get_device_fn ctx_get_device;
  cu_stream_query_fn stream_query;
  cu_device_get_fn device_get;
  cu_device_uuid_fn device_uuid;
  cu_device_mem_fn device_mem;
  cu_device_pci_fn device_pci;
  cu_event_record_fn event_record;
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
  cu.stream_query = (cu_stream_query_fn)dlsym(h, "cuStreamQuery");
  cu.ptr_attrs = (cu_ptr_attrs_fn)dlsym(h, "cuPointerGetAttributes");
  cu.device_get = (cu_device_get_fn)dlsym(h, "cuDeviceGet");
  cu.device_uuid = (cu_device_uuid_fn)dlsym(h, "cuDeviceGetUuid_v2");
  cu.device_mem = (cu_device_mem_fn)dlsym(h, "cuDeviceTotalMem_v2");
  cu.device_pci = (cu_device_pci_fn)dlsym(h, "cuDeviceGetPCIBusId");
  cu.event_record = (cu_event_record_fn)dlsym(h, "cuEventRecord");
  if (cu.device_uuid == NULL) {
    cu.device_uuid = (cu_device_uuid_fn)dlsym(h, "cuDeviceGetUuid");
  }
  if (init == NULL || cu.ptr_attr == NULL || cu.stream_sync == NULL || cu.ctx_get_device == NULL ||
      cu.stream_query == NULL || cu.device_get == NULL || init(0) != 0) {
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
  return tutti_cuda_mem_kind(p) == TUTTI_MEM_DEVICE;
}

enum tutti_mem tutti_cuda_mem_kind(const void* p) {
  if (p == NULL || !tutti_cuda_available()) {
    return TUTTI_MEM_HOST;
  }
  /* One driver call for the three answers (it reports memory CUDA does not
   * know as type 0 instead of failing). */
  unsigned type = 0, managed = 0;
  uintptr_t dp = 0;
  if (cu.ptr_attrs != NULL) {
    int attrs[3] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                    CU_POINTER_ATTRIBUTE_DEVICE_POINTER};
    void* data[3] = {&type, &managed, &dp};
    if (cu.ptr_attrs(3, attrs, data, (uintptr_t)p) != 0) {
      return TUTTI_MEM_HOST;
    }
  } else if (cu.ptr_attr(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (uintptr_t)p) != 0) {
    return TUTTI_MEM_HOST; /* unknown to CUDA: ordinary host memory */
  } else {
    (void)cu.ptr_attr(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, (uintptr_t)p);
    (void)cu.ptr_attr(&dp, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, (uintptr_t)p);
  }
  /* Managed memory reports host or device by where its pages happen to be
   * (so it could differ between ranks of one call): asked for directly. */
  if (managed) {
    return TUTTI_MEM_MANAGED;
  }
  if (type == CU_MEMORYTYPE_DEVICE) {
    return TUTTI_MEM_DEVICE;
  }
  /* Pinned or registered host memory: kernels reach it at the same address
   * (unified addressing) unless the driver maps it elsewhere. */
  if (type == CU_MEMORYTYPE_HOST && dp == (uintptr_t)p) {
    return TUTTI_MEM_PINNED;
  }
  return TUTTI_MEM_HOST;
}

int tutti_cuda_current_device(void) {
  int dev = -1;
  if (tutti_cuda_available() && cu.ctx_get_device(&dev) != 0) {
    dev = -1;
  }
  return dev;
}

int tutti_cuda_device_uuid(int dev, unsigned char* uuid) {
  memset(uuid, 0, 16);
  int d = 0;
  if (dev < 0 || !tutti_cuda_available() || cu.device_uuid == NULL || cu.device_get(&d, dev) != 0 ||
      cu.device_uuid(uuid, d) != 0) {
    memset(uuid, 0, 16);
    return -1;
  }
  return 0;
}

int tutti_cuda_device_pci(int dev, char* busid, int len) {
  int d = 0;
  if (len > 0) {
    busid[0] = '\0';
  }
  if (dev < 0 || len <= 0 || !tutti_cuda_available() || cu.device_pci == NULL ||
      cu.device_get(&d, dev) != 0 || cu.device_pci(busid, len, d) != 0) {
    return -1;
  }
  return 0;
}

size_t tutti_cuda_device_mem(int dev) {
  int d = 0;
  size_t bytes = 0;
  if (dev < 0 || !tutti_cuda_available() || cu.device_mem == NULL || cu.device_get(&d, dev) != 0 ||
      cu.device_mem(&bytes, d) != 0) {
    return 0;
  }
  return bytes;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

ncclResult_t tutti_cuda_stream_wait(cudaStream_t stream, double limit_s,
                                    const volatile int* abort_flag) {
  if (stream == NULL || !tutti_cuda_available()) {
    return ncclSuccess;
  }
  const double t0 = now_s();
  for (int i = 0;; i++) {
    const int r = cu.stream_query(stream);
    if (r == 0) {
      return ncclSuccess;
    }
    if (r != CUDA_ERROR_NOT_READY) {
      return tutti_error(ncclUnhandledCudaError,
                         "waiting for the caller's CUDA stream failed (CUresult %d)", r);
    }
    if (abort_flag != NULL && *abort_flag) {
      return tutti_error(ncclInvalidUsage,
                         "the communicator was aborted while this call waited for its stream");
    }
    if (limit_s > 0 && now_s() - t0 > limit_s) {
      return tutti_error(ncclSystemError,
                         "the work on the caller's CUDA stream before this call did not finish "
                         "within %.0f s (TUTTI_TIMEOUT): a kernel on it never ends, or the "
                         "stream waits for an event that is never recorded",
                         limit_s);
    }
    if (i > 64) { /* spin briefly, then leave the CPU to whoever the stream waits for */
      struct timespec ts = {0, i < 1000 ? 20 * 1000 : 1000 * 1000};
      nanosleep(&ts, NULL);
    }
  }
}

ncclResult_t tutti_cuda_event_record(cudaEvent_t event, cudaStream_t stream) {
  if (!tutti_cuda_available() || cu.event_record == NULL) {
    return tutti_error(ncclInvalidUsage,
                       "a CUDA event (ncclCollConfig_t.launchCompletionEvent) cannot be recorded: "
                       "no CUDA driver is loaded in this process");
  }
  /* The runtime's events and streams are the driver's (cudaEvent_t is a
   * CUevent). */
  const int r = cu.event_record(event, stream);
  if (r != 0) {
    return tutti_error(ncclUnhandledCudaError,
                       "recording the launch completion event %p on stream %p failed "
                       "(CUresult %d)",
                       (void*)event, (void*)stream, r);
  }
  return ncclSuccess;
}
