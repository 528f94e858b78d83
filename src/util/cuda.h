/* The CUDA driver, loaded at run time when present: the library must load
 * and run host collectives on machines without any CUDA. */
#ifndef TUTTI_UTIL_CUDA_H
#define TUTTI_UTIL_CUDA_H

#include <stddef.h>

#include "nccl.h"

/* Non-zero when libcuda.so.1 loaded and initialized. */
int tutti_cuda_available(void);
/* Non-zero when `p` is device memory (not host, not pinned host, not managed). */
int tutti_cuda_is_device_ptr(const void* p);
/* What `p` is to CUDA. */
enum tutti_mem {
  TUTTI_MEM_HOST,    /* unknown to CUDA: ordinary host memory */
  TUTTI_MEM_DEVICE,  /* device memory (cudaMalloc, ncclMemAlloc, cuMem/VMM, pools) */
  TUTTI_MEM_MANAGED, /* cudaMallocManaged: reachable from host and device */
  TUTTI_MEM_PINNED   /* cudaMallocHost / cudaHostRegister: host memory kernels reach */
};
enum tutti_mem tutti_cuda_mem_kind(const void* p);
/* The current context's device, or -1 without CUDA or context. */
int tutti_cuda_current_device(void);
/* The UUID of device ordinal `dev` of this process into `uuid` (16 bytes);
 * 0 when known, else -1 and zeros. */
int tutti_cuda_device_uuid(int dev, unsigned char* uuid);
/* The PCI address ("0000:3b:00.0") of device ordinal `dev` into `busid`; 0, or
 * -1 when unknown. */
int tutti_cuda_device_pci(int dev, char* busid, int len);
/* Bytes of memory of device ordinal `dev`; 0 when unknown. */
size_t tutti_cuda_device_mem(int dev);
/* Waits until the work on `stream` so far is done (no-op without CUDA or for
 * a NULL stream): polls, then sleeps, so the CPU goes to whoever the stream
 * waits for; gives up after `limit_s` seconds (0: never) or when *abort_flag
 * is set, with an error that says so. */
ncclResult_t tutti_cuda_stream_wait(cudaStream_t stream, double limit_s,
                                    const volatile int* abort_flag);
/* Records `event` on `stream` (cuEventRecord): ncclInvalidUsage with a
 * sentence when no CUDA driver is loaded. */
ncclResult_t tutti_cuda_event_record(cudaEvent_t event, cudaStream_t stream);

#endif
