/* The registration cache's driver (device/peer/regcache.h) over CUDA: which
 * allocation holds a pointer (cuPointerGetAttributes: buffer id, range,
 * memory type, handle types), whether peers can import it, and mapping a
 * peer's allocation through the regions' import calls (peer/region.h).
 * Only NCCL_LOCAL_REGISTER=1 makes a cache over it; no kernel reads what
 * it maps yet. */
#include <cuda.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device/dev_comm.h"
#include "device/peer/region.h"

extern "C" {
#include "device/peer/regcache.h"
#include "util/log.h"
}

static struct {
  int ok;
  CUresult (*attrs)(unsigned, CUpointer_attribute*, void**, CUdeviceptr);
  CUresult (*retain)(CUmemGenericAllocationHandle*, void*);
  CUresult (*release)(CUmemGenericAllocationHandle);
  CUresult (*export_fd)(void*, CUmemGenericAllocationHandle, CUmemAllocationHandleType,
                        unsigned long long);
} drv;
static pthread_once_t drv_once = PTHREAD_ONCE_INIT;

static void drv_load(void) {
  const struct td_driver_sym syms[] = {
      {"cuPointerGetAttributes", (void**)&drv.attrs},
      {"cuMemRetainAllocationHandle", (void**)&drv.retain},
      {"cuMemRelease", (void**)&drv.release},
      {"cuMemExportToShareableHandle", (void**)&drv.export_fd},
  };
  drv.ok = td_driver_load(syms, sizeof syms / sizeof syms[0]);
}

/* What an export holds: the kind and, for cudaMalloc, the IPC handle. A
 * cuMem export holds no descriptor: an open one would keep the memory
 * alive after its owner frees it, so one is made for each handoff. */
struct td_reg_export {
  int kind;
  cudaIpcMemHandle_t ipc;
};

/* What an import holds, for unmap. */
struct td_reg_import {
  struct td_region r;
};

static int rd_query(void* ctx, const void* ptr, struct tutti_reg_alloc* out) {
  (void)ctx;
  pthread_once(&drv_once, drv_load);
  memset(out, 0, sizeof *out);
  if (!drv.ok) {
    return -1;
  }
  unsigned mem_type = 0, managed = 0, legacy_ipc = 0;
  unsigned long long buffer_id = 0, handle_types = 0;
  CUdeviceptr start = 0;
  size_t size = 0;
  CUpointer_attribute at[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                              CU_POINTER_ATTRIBUTE_IS_MANAGED,
                              CU_POINTER_ATTRIBUTE_BUFFER_ID,
                              CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                              CU_POINTER_ATTRIBUTE_RANGE_SIZE,
                              CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES,
                              CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE};
  void* val[] = {&mem_type, &managed, &buffer_id, &start, &size, &handle_types, &legacy_ipc};
  /* Memory CUDA does not know is success with every value zero. */
  if (drv.attrs(sizeof at / sizeof at[0], at, val, (CUdeviceptr)(uintptr_t)ptr) != CUDA_SUCCESS) {
    return -1;
  }
  out->id.buffer_id = buffer_id;
  out->id.base = (uintptr_t)start;
  out->id.size = size;
  if (managed) {
    out->kind = TUTTI_REG_KIND_MANAGED;
  } else if (mem_type == CU_MEMORYTYPE_HOST) {
    out->kind = TUTTI_REG_KIND_HOST_PINNED;
  } else if (mem_type != CU_MEMORYTYPE_DEVICE) {
    out->kind = TUTTI_REG_KIND_HOST;
  } else if (handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
    out->kind = TUTTI_REG_KIND_CUMEM;
  } else if (legacy_ipc) {
    out->kind = TUTTI_REG_KIND_MALLOC;
  } else {
    out->kind = TUTTI_REG_KIND_UNMAPPABLE; /* cuMem without a shareable handle type */
  }
  return 0;
}

/* A descriptor for a cuMem allocation at `base`, or -1. */
static int cumem_fd(uintptr_t base) {
  CUmemGenericAllocationHandle h;
  if (drv.retain(&h, (void*)base) != CUDA_SUCCESS) {
    return -1;
  }
  int fd = -1;
  if (drv.export_fd(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) != CUDA_SUCCESS) {
    fd = -1;
  }
  drv.release(h);
  return fd;
}

static int rd_export(void* ctx, const struct tutti_reg_alloc* a, void** handle) {
  (void)ctx;
  struct td_reg_export* x = (struct td_reg_export*)calloc(1, sizeof *x);
  if (x == NULL) {
    return -1;
  }
  x->kind = a->kind;
  int ok = 0;
  if (a->kind == TUTTI_REG_KIND_CUMEM) {
    const int fd = cumem_fd(a->id.base); /* proves it can be exported */
    ok = fd >= 0;
    if (ok) {
      close(fd);
    }
  } else if (a->kind == TUTTI_REG_KIND_MALLOC) {
    ok = cudaIpcGetMemHandle(&x->ipc, (void*)a->id.base) == cudaSuccess;
    (void)cudaGetLastError();
  }
  if (!ok) {
    free(x);
    return -1;
  }
  *handle = x;
  return 0;
}

static void rd_unexport(void* ctx, void* handle) {
  (void)ctx;
  free(handle);
}

/* `blob`: the peer's descriptor (an int, received over its box) for cuMem,
 * its cudaIpcMemHandle_t for cudaMalloc. */
static int rd_import(void* ctx, int peer, const struct tutti_reg_alloc* a, const void* blob,
                     size_t blob_len, void** mapped, void** token) {
  (void)peer;
  const int dev = (int)(intptr_t)ctx;
  struct td_reg_import* im = (struct td_reg_import*)calloc(1, sizeof *im);
  if (im == NULL) {
    return -1;
  }
  ncclResult_t res = ncclInvalidArgument;
  if (a->kind == TUTTI_REG_KIND_CUMEM && blob_len == sizeof(int)) {
    int fd;
    memcpy(&fd, blob, sizeof fd);
    res = td_region_import(&im->r, dev, fd, a->id.size);
  } else if (a->kind == TUTTI_REG_KIND_MALLOC && blob_len == sizeof(cudaIpcMemHandle_t)) {
    cudaIpcMemHandle_t h;
    memcpy(&h, blob, sizeof h);
    res = td_region_open_ipc(&im->r, &h);
  }
  if (res != ncclSuccess) {
    free(im);
    return -1;
  }
  *mapped = im->r.ptr;
  *token = im;
  return 0;
}

static void rd_unmap(void* ctx, int peer, void* token) {
  (void)ctx;
  (void)peer;
  struct td_reg_import* im = (struct td_reg_import*)token;
  td_region_free(&im->r);
  free(im);
}

extern "C" int tutti_dev_regcache_driver(struct tutti_dev_comm* dc,
                                         struct tutti_regcache_driver* out) {
  if (dc == NULL) {
    return 0;
  }
  pthread_once(&drv_once, drv_load);
  if (!drv.ok) {
    INFO(TUTTI_INIT | TUTTI_REG,
         "NCCL_LOCAL_REGISTER=1, but this CUDA driver lacks the pointer or cuMem calls the "
         "registration cache needs: every buffer is staged");
    return 0;
  }
  out->ctx = (void*)(intptr_t)dc->dev;
  out->query = rd_query;
  out->export_alloc = rd_export;
  out->unexport = rd_unexport;
  out->import_alloc = rd_import;
  out->unmap = rd_unmap;
  return 1;
}
