/* GPU memory shared with the other processes of this host (see region.h).
 * The driver's virtual memory calls are looked up at run time through the
 * runtime (cudaGetDriverEntryPointByVersion): the library links no libcuda. */
#include <cuda.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device/device.h"
#include "device/peer/region.h"

extern "C" {
#include "util/check.h"
#include "util/fdpass.h"
#include "util/socket.h"
}

static struct {
  int ok;
  CUresult (*create)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                     unsigned long long);
  CUresult (*release)(CUmemGenericAllocationHandle);
  CUresult (*reserve)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long);
  CUresult (*addr_free)(CUdeviceptr, size_t);
  CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
  CUresult (*unmap)(CUdeviceptr, size_t);
  CUresult (*set_access)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t);
  CUresult (*granularity)(size_t*, const CUmemAllocationProp*, CUmemAllocationGranularity_flags);
  CUresult (*export_fd)(void*, CUmemGenericAllocationHandle, CUmemAllocationHandleType,
                        unsigned long long);
  CUresult (*import_fd)(CUmemGenericAllocationHandle*, void*, CUmemAllocationHandleType);
  CUresult (*dev_attr)(int*, CUdevice_attribute, CUdevice);
  CUresult (*dev_get)(CUdevice*, int);
  CUresult (*err_name)(CUresult, const char**);
  CUresult (*addr_range)(CUdeviceptr*, size_t*, CUdeviceptr);
} cu;
static pthread_once_t cu_once = PTHREAD_ONCE_INIT;

int td_driver_load(const struct td_driver_sym* syms, size_t n) {
  int ok = 1;
  for (size_t i = 0; i < n; i++) {
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    ok &= cudaGetDriverEntryPointByVersion(syms[i].name, syms[i].fn, 12000, cudaEnableDefault,
                                           &q) == cudaSuccess &&
          q == cudaDriverEntryPointSuccess;
  }
  (void)cudaGetLastError();
  return ok;
}

static void cu_load(void) {
  const struct td_driver_sym syms[] = {
      {"cuMemCreate", (void**)&cu.create},
      {"cuMemRelease", (void**)&cu.release},
      {"cuMemAddressReserve", (void**)&cu.reserve},
      {"cuMemAddressFree", (void**)&cu.addr_free},
      {"cuMemMap", (void**)&cu.map},
      {"cuMemUnmap", (void**)&cu.unmap},
      {"cuMemSetAccess", (void**)&cu.set_access},
      {"cuMemGetAllocationGranularity", (void**)&cu.granularity},
      {"cuMemExportToShareableHandle", (void**)&cu.export_fd},
      {"cuMemImportFromShareableHandle", (void**)&cu.import_fd},
      {"cuDeviceGetAttribute", (void**)&cu.dev_attr},
      {"cuDeviceGet", (void**)&cu.dev_get},
      {"cuGetErrorName", (void**)&cu.err_name},
      {"cuMemGetAddressRange", (void**)&cu.addr_range},
  };
  cu.ok = td_driver_load(syms, sizeof syms / sizeof syms[0]);
}

static ncclResult_t cu_fail(CUresult r, const char* what, int dev) {
  const char* name = "unknown";
  if (cu.err_name != NULL) {
    cu.err_name(r, &name);
  }
  return tutti_error(ncclUnhandledCudaError,
                     "%s failed on GPU %d: %s (set NCCL_CUMEM_ENABLE=0 to share GPU memory "
                     "through CUDA IPC handles instead)",
                     what, dev, name);
}

#define CUCHECK(call, what, dev)     \
  do {                               \
    CUresult r_ = (call);            \
    if (r_ != CUDA_SUCCESS) {        \
      return cu_fail(r_, what, dev); \
    }                                \
  } while (0)

/* Non-zero when GPU `dev` takes cuMem allocations exported as POSIX fds
 * and tune asks for them (`cumem`: NCCL_CUMEM_ENABLE). */
static int cumem_usable(int dev, int cumem) {
  if (!cumem) {
    return 0;
  }
  pthread_once(&cu_once, cu_load);
  CUdevice d;
  int vmm = 0, fd = 0;
  return cu.ok && cu.dev_get(&d, dev) == CUDA_SUCCESS &&
         cu.dev_attr(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, d) ==
             CUDA_SUCCESS &&
         cu.dev_attr(&fd, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, d) ==
             CUDA_SUCCESS &&
         vmm && fd;
}

static CUmemAllocationProp region_prop(int dev) {
  CUmemAllocationProp p;
  memset(&p, 0, sizeof p);
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = dev;
  p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return p;
}

/* Read and write access for GPU `dev`. */
static CUmemAccessDesc rw_access(int dev) {
  CUmemAccessDesc a;
  memset(&a, 0, sizeof a);
  a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  a.location.id = dev;
  a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return a;
}

/* Reserves addresses for `h` (of `size` bytes), maps it and lets `dev` read
 * and write it. */
static ncclResult_t map_handle(struct td_region* r, CUmemGenericAllocationHandle h, size_t size,
                               int dev) {
  CUdeviceptr va = 0;
  const CUmemAccessDesc a = rw_access(dev);
  CUresult e = cu.reserve(&va, size, 0, 0, 0);
  if (e != CUDA_SUCCESS) {
    return cu_fail(e, "cuMemAddressReserve", dev);
  }
  if ((e = cu.map(va, size, 0, h, 0)) != CUDA_SUCCESS) {
    cu.addr_free(va, size);
    return cu_fail(e, "cuMemMap", dev);
  }
  if ((e = cu.set_access(va, size, &a, 1)) != CUDA_SUCCESS) {
    cu.unmap(va, size);
    cu.addr_free(va, size);
    return cu_fail(e, "cuMemSetAccess", dev);
  }
  r->ptr = (char*)(uintptr_t)va;
  r->size = size;
  r->handle = (uint64_t)h;
  r->kind = TD_REGION_CUMEM;
  return ncclSuccess;
}

ncclResult_t td_region_alloc(struct td_region* r, int dev, size_t bytes, cudaStream_t zero_on,
                             int cumem) {
  memset(r, 0, sizeof *r);
  if (!cumem_usable(dev, cumem)) {
    cudaError_t e = cudaMalloc((void**)&r->ptr, bytes);
    if (e == cudaSuccess) {
      e = cudaMemsetAsync(r->ptr, 0, bytes, zero_on);
    }
    if (e != cudaSuccess) {
      return tutti_error(ncclUnhandledCudaError, "cudaMalloc of %zu bytes of queues failed: %s",
                         bytes, cudaGetErrorString(e));
    }
    r->size = bytes;
    r->kind = TD_REGION_MALLOC;
    return ncclSuccess;
  }
  CUmemAllocationProp p = region_prop(dev);
  size_t gran = 0;
  CUCHECK(cu.granularity(&gran, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
          "cuMemGetAllocationGranularity", dev);
  const size_t size = (bytes + gran - 1) / gran * gran;
  CUmemGenericAllocationHandle h;
  CUCHECK(cu.create(&h, size, &p, 0), "cuMemCreate of the queues", dev);
  ncclResult_t res = map_handle(r, h, size, dev);
  if (res != ncclSuccess) {
    cu.release(h);
    return res;
  }
  cudaError_t e = cudaMemsetAsync(r->ptr, 0, size, zero_on);
  if (e != cudaSuccess) {
    td_region_free(r);
    return tutti_error(ncclUnhandledCudaError, "cudaMemset of the queues failed: %s",
                       cudaGetErrorString(e));
  }
  return ncclSuccess;
}

ncclResult_t td_region_export(const struct td_region* r, int* fd) {
  *fd = -1;
  if (r->kind != TD_REGION_CUMEM) {
    return tutti_error(ncclInternalError, "only cuMem regions are exported as descriptors");
  }
  int out = -1;
  CUCHECK(cu.export_fd(&out, (CUmemGenericAllocationHandle)r->handle,
                       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
          "cuMemExportToShareableHandle", -1);
  *fd = out;
  return ncclSuccess;
}

ncclResult_t td_region_import(struct td_region* r, int dev, int fd, size_t size) {
  memset(r, 0, sizeof *r);
  pthread_once(&cu_once, cu_load);
  if (fd < 0) {
    return tutti_error(ncclInternalError, "no descriptor arrived for a peer's GPU memory");
  }
  if (!cu.ok) {
    return tutti_error(ncclUnhandledCudaError,
                       "a peer shared cuMem memory, but this process's CUDA driver has no "
                       "virtual memory calls: set NCCL_CUMEM_ENABLE=0 on every rank");
  }
  CUmemGenericAllocationHandle h;
  CUCHECK(cu.import_fd(&h, (void*)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
          "cuMemImportFromShareableHandle", dev);
  ncclResult_t res = map_handle(r, h, size, dev);
  if (res != ncclSuccess) {
    cu.release(h);
  }
  return res;
}

ncclResult_t td_region_open_ipc(struct td_region* r, const cudaIpcMemHandle_t* h) {
  memset(r, 0, sizeof *r);
  void* ptr = NULL;
  cudaError_t e = cudaIpcOpenMemHandle(&ptr, *h, cudaIpcMemLazyEnablePeerAccess);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return tutti_error(ncclUnhandledCudaError, "cudaIpcOpenMemHandle failed: %s",
                       cudaGetErrorString(e));
  }
  r->ptr = (char*)ptr;
  r->kind = TD_REGION_IPC;
  return ncclSuccess;
}

int td_region_base(const void* p, char** base) {
  pthread_once(&cu_once, cu_load);
  CUdeviceptr b = 0;
  size_t len = 0;
  if (!cu.ok || cu.addr_range(&b, &len, (CUdeviceptr)(uintptr_t)p) != CUDA_SUCCESS) {
    return 0;
  }
  *base = (char*)(uintptr_t)b;
  return 1;
}

ncclResult_t td_region_grant(char* ptr, size_t size, int dev) {
  pthread_once(&cu_once, cu_load);
  const CUmemAccessDesc a = rw_access(dev);
  CUCHECK(
      cu.ok ? cu.set_access((CUdeviceptr)(uintptr_t)ptr, size, &a, 1) : CUDA_ERROR_NOT_SUPPORTED,
      "cuMemSetAccess for a peer GPU", dev);
  return ncclSuccess;
}

ncclResult_t td_region_reopen_ipc(struct td_region* r, const cudaIpcMemHandle_t* h) {
  if (r->kind != TD_REGION_IPC || !r->released) {
    return tutti_error(ncclInternalError, "a peer's IPC region was opened again while open");
  }
  return td_region_open_ipc(r, h);
}

void td_region_free(struct td_region* r) {
  if (r->released && r->kind != TD_REGION_CUMEM) {
    memset(r, 0, sizeof *r); /* nothing behind it any more */
    return;
  }
  switch (r->kind) {
    case TD_REGION_CUMEM:
      if (!r->released) {
        cu.unmap((CUdeviceptr)(uintptr_t)r->ptr, r->size);
      }
      cu.addr_free((CUdeviceptr)(uintptr_t)r->ptr, r->size);
      if (!r->released) {
        cu.release((CUmemGenericAllocationHandle)r->handle);
      }
      break;
    case TD_REGION_IPC:
      cudaIpcCloseMemHandle(r->ptr);
      break;
    case TD_REGION_MALLOC:
      cudaFree(r->ptr);
      break;
    default:
      break;
  }
  memset(r, 0, sizeof *r);
}

int td_region_release(struct td_region* r) {
  if (r->released || r->kind == TD_REGION_NONE) {
    return r->released;
  }
  if (r->kind == TD_REGION_MALLOC || r->kind == TD_REGION_IPC) {
    /* The memory goes, and its addresses with it: td_region_restore and
     * td_region_reopen_ipc give new ones. */
    if (r->kind == TD_REGION_MALLOC) {
      cudaFree(r->ptr);
    } else {
      cudaIpcCloseMemHandle(r->ptr);
    }
    (void)cudaGetLastError();
    r->ptr = NULL;
    r->released = 1;
    return 1;
  }
  /* The handle goes with the mapping: once every process that imported it
   * did the same, the driver frees the memory. */
  cu.unmap((CUdeviceptr)(uintptr_t)r->ptr, r->size);
  cu.release((CUmemGenericAllocationHandle)r->handle);
  r->handle = 0;
  r->released = 1;
  return 1;
}

/* Maps `h` at the region's reserved addresses for GPU `dev`. */
static ncclResult_t map_at(struct td_region* r, CUmemGenericAllocationHandle h, int dev) {
  const CUdeviceptr va = (CUdeviceptr)(uintptr_t)r->ptr;
  const CUmemAccessDesc a = rw_access(dev);
  CUresult e = cu.map(va, r->size, 0, h, 0);
  if (e != CUDA_SUCCESS) {
    return cu_fail(e, "cuMemMap at a suspended region's addresses", dev);
  }
  if ((e = cu.set_access(va, r->size, &a, 1)) != CUDA_SUCCESS) {
    cu.unmap(va, r->size);
    return cu_fail(e, "cuMemSetAccess", dev);
  }
  r->handle = (uint64_t)h;
  r->released = 0;
  return ncclSuccess;
}

ncclResult_t td_region_restore(struct td_region* r, int dev) {
  if (r->kind == TD_REGION_MALLOC && r->released) {
    cudaError_t e = cudaMalloc((void**)&r->ptr, r->size);
    if (e != cudaSuccess) {
      r->ptr = NULL;
      (void)cudaGetLastError();
      return tutti_error(ncclUnhandledCudaError,
                         "cudaMalloc of %zu bytes of queues on GPU %d at resume failed: %s",
                         r->size, dev, cudaGetErrorString(e));
    }
    r->released = 0;
    return ncclSuccess;
  }
  if (r->kind != TD_REGION_CUMEM || !r->released) {
    return ncclSuccess;
  }
  CUmemAllocationProp p = region_prop(dev);
  CUmemGenericAllocationHandle h;
  CUCHECK(cu.create(&h, r->size, &p, 0), "cuMemCreate of a resumed region", dev);
  ncclResult_t res = map_at(r, h, dev);
  if (res != ncclSuccess) {
    cu.release(h);
  }
  return res;
}

ncclResult_t td_region_reimport(struct td_region* r, int dev, int fd) {
  if (r->kind != TD_REGION_CUMEM || !r->released) {
    return tutti_error(ncclInternalError, "a peer's region was imported again while mapped");
  }
  if (fd < 0) {
    return tutti_error(ncclInternalError, "no descriptor arrived for a peer's resumed GPU memory");
  }
  CUmemGenericAllocationHandle h;
  CUCHECK(cu.import_fd(&h, (void*)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
          "cuMemImportFromShareableHandle", dev);
  ncclResult_t res = map_at(r, h, dev);
  if (res != ncclSuccess) {
    cu.release(h);
  }
  return res;
}

void td_region_box_name(char* out, size_t len, const struct tutti_dev_setup* s, int rank) {
  const unsigned char* k = s->secret;
  snprintf(out, len, "tutti-fd-%02x%02x%02x%02x%02x%02x-%016llx-%d", k[0], k[1], k[2], k[3], k[4],
           k[5], (unsigned long long)s->comm_hash, rank);
}

/* A message's tag: the sender's rank under bits of the secret that no name
 * shows, so that a stranger's descriptor is told apart and dropped. */
static uint64_t tag_base(const struct tutti_dev_setup* s) {
  uint64_t b = 0;
  memcpy(&b, s->secret + 8, sizeof b);
  return b << 24;
}

static ncclResult_t swap_loop(struct tutti_fdbox* box, const struct tutti_dev_setup* s,
                              const unsigned char* sends, const unsigned char* gets, int myfd,
                              int* fds, unsigned char* sent) {
  const int n = s->nranks, me = s->rank;
  const uint64_t base = tag_base(s);
  int left_send = 0, left_get = 0;
  for (int p = 0; p < n; p++) {
    left_send += sends[p] != 0;
    left_get += gets[p] != 0;
  }
  const double deadline = tutti_socket_now() + s->timeout_s;
  while (left_send > 0 || left_get > 0) {
    for (int p = 0; p < n && left_send > 0; p++) {
      if (!sends[p] || sent[p]) {
        continue;
      }
      char name[104];
      td_region_box_name(name, sizeof name, s, p);
      int err = tutti_fdbox_send(box, name, myfd, base | (uint64_t)me);
      if (err == 0) {
        sent[p] = 1;
        left_send--;
      } else if (err != EAGAIN) {
        return tutti_error(ncclSystemError,
                           "rank %d could not hand its GPU memory to rank %d (pid %d) over a unix "
                           "socket: %s (processes in different network namespaces cannot; set "
                           "NCCL_CUMEM_ENABLE=0 to use CUDA IPC handles)",
                           me, p, (int)s->peers[p].pid, strerror(err));
      }
    }
    if (left_get > 0) {
      int fd = -1;
      uint64_t tag = 0;
      int err = tutti_fdbox_recv(box, &fd, &tag, left_send > 0 ? 1 : 100);
      const uint64_t from = tag & 0xffffff;
      if (err == 0 && (tag & ~(uint64_t)0xffffff) == base && from < (uint64_t)n && gets[from] &&
          fds[from] < 0) {
        fds[from] = fd;
        left_get--;
      } else if (err == 0) {
        close(fd); /* not from a peer of this communicator, or twice */
      } else if (err != ETIMEDOUT && err != EPROTO) {
        return tutti_error(ncclSystemError, "rank %d: receiving a peer's GPU memory failed: %s", me,
                           strerror(err));
      }
    } else if (left_send > 0) {
      usleep(1000); /* a receiver's queue is full */
    }
    if ((left_send > 0 || left_get > 0) && tutti_socket_now() > deadline) {
      int p = 0;
      while (p < n && !(gets[p] && fds[p] < 0) && !(sends[p] && !sent[p])) {
        p++;
      }
      return tutti_error(ncclRemoteError,
                         "rank %d waited %.0f s (TUTTI_TIMEOUT) to swap GPU memory with rank %d "
                         "(pid %d): it stopped during init",
                         me, s->timeout_s, p, p < n ? (int)s->peers[p].pid : -1);
    }
  }
  return ncclSuccess;
}

ncclResult_t td_region_swap(struct tutti_fdbox* box, const struct tutti_dev_setup* s,
                            const unsigned char* sends, const unsigned char* gets, int myfd,
                            int* fds) {
  for (int p = 0; p < s->nranks; p++) {
    fds[p] = -1;
  }
  unsigned char* sent = (unsigned char*)calloc((unsigned)s->nranks, 1);
  if (sent == NULL) {
    return tutti_error(ncclSystemError, "out of host memory");
  }
  ncclResult_t res = swap_loop(box, s, sends, gets, myfd, fds, sent);
  free(sent);
  for (int p = 0; res != ncclSuccess && p < s->nranks; p++) {
    if (fds[p] >= 0) {
      close(fds[p]);
      fds[p] = -1;
    }
  }
  return res;
}
