/* The kernel's entry point as the host-side launcher sees it. */
#ifndef TUTTI_DEVICE_KERNELS_KERNEL_H
#define TUTTI_DEVICE_KERNELS_KERNEL_H

#include <cuda_runtime.h>

#include "device/work.h"

#define TD_MAX_THREADS 512
#define TD_CTA_TICKETS 64 /* connections one block may use */

/* Launches the kernel for `work` (a td_work_large when `large`, else a
 * td_work_small) with `nthreads` threads per block; returns the cudaError_t. */
extern "C" int td_kernel_launch(const void* work, int large, int nthreads, cudaStream_t stream);

/* Blocks of `nthreads` one multiprocessor holds at once. */
extern "C" cudaError_t td_occupancy(int nthreads, int* per_sm);

#endif
