/* The device executor's kernel: each block runs one lane of one operation on
 * one channel, step by step, moving pieces of at most a slot through the
 * connection queues in peers' memory. A sender writes a slot into the
 * receiver's queue and then releases the queue's tail; a receiver acquires
 * the tail, reads and reduces the slot out of its own memory (where the
 * data already is, so the reduction runs at local bandwidth), then releases
 * the slot back through the sender's head. See work.h for the layout. */
#include <stdint.h>

#include "device/launch/ce.h"
#include "device/device.h"
#include "device/kernels/mapped.h"
#include "device/kernels/kernel.h"
#include "device/kernels/pass.cuh"
#include "device/kernels/sync.cuh"

#include "device/kernels/kernel_lane.cuh"

template <class W>
__global__ void __launch_bounds__(TD_MAX_THREADS, 1) td_kernel(const __grid_constant__ W w) {
  td_run_block(w.comm, w.ops, w.lanes, w.ctas, w.tickets, w.steps, w.ncta, w.nlanes, w.chunk_bytes,
               w.slot_bytes, w.flags, w.nch, w.tag);
}

extern "C" int td_kernel_launch(const void* work, int large, int nthreads, cudaStream_t stream) {
  cudaError_t err;
  if (large) {
    const td_work_large* w = static_cast<const td_work_large*>(work);
    td_kernel<td_work_large><<<w->ncta, nthreads, 0, stream>>>(*w);
  } else {
    const td_work_small* w = static_cast<const td_work_small*>(work);
    td_kernel<td_work_small><<<w->ncta, nthreads, 0, stream>>>(*w);
  }
  err = cudaGetLastError();
  return (int)err;
}

extern "C" int tutti_dev_kernel_frames(const char** names, size_t* bytes, int max) {
  static const char* const all[TUTTI_DEV_NKERNELS] = {"schedules (small)", "schedules (large)",
                                                      "mapped (simple)",   "mapped (LL)",
                                                      "mapped (LL128)",    "copy engine"};
  int i = 0;
  for (; i < max && i < TUTTI_DEV_NKERNELS; i++) {
    struct cudaFuncAttributes a;
    int e = i == 0   ? (int)cudaFuncGetAttributes(&a, td_kernel<td_work_small>)
            : i == 1 ? (int)cudaFuncGetAttributes(&a, td_kernel<td_work_large>)
            : i < 5  ? td_mapped_attributes(i - 2, &a)
                     : td_ce_attributes(&a);
    if (e != 0) {
      return -1;
    }
    names[i] = all[i];
    bytes[i] = a.localSizeBytes;
  }
  return i;
}

extern "C" cudaError_t td_occupancy(int nthreads, int* per_sm) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(per_sm, td_kernel<td_work_large>, nthreads,
                                                       0);
}
