/* The CUDA driver, loaded at run time when present: the library must load
 * and run host collectives on machines without any CUDA. */
#ifndef TUTTI_UTIL_CUDA_H
#define TUTTI_UTIL_CUDA_H

#include "nccl.h"

/* Non-zero when libcuda.so.1 loaded and initialized. */
int tutti_cuda_available(void);
/* Non-zero when `p` is device memory (not host, not pinned host). */
int tutti_cuda_is_device_ptr(const void* p);
/* The current context's device, or -1 without CUDA or context. */
int tutti_cuda_current_device(void);
/* Waits for `stream` (no-op without CUDA or for a NULL stream). */
ncclResult_t tutti_cuda_stream_sync(cudaStream_t stream);

#endif
