/* Ordering and waiting between GPUs: release/acquire on counters in peers'
 * memory, a clock, and the bounded wait every kernel uses. */
#ifndef TUTTI_DEVICE_KERNELS_SYNC_CUH
#define TUTTI_DEVICE_KERNELS_SYNC_CUH

#include <stdint.h>

#include "device/work.h"

__device__ __forceinline__ uint64_t td_ld_acquire(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void td_st_release(uint64_t* p, uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ uint64_t td_now_ns(void) {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/* Called now and then by every spinning wait: 0 once the communicator is
 * aborted (the abort is the reason unless the host or a block already
 * recorded one) or the wait, started at *start, outlasts the timeout. A
 * timeout also raises the abort flag: every later wait of the
 * communicator, in this kernel or a later one, then ends at once instead of
 * timing out in turn, and the host refuses further launches. */
__device__ __forceinline__ int td_wait_ok(td_devcomm* dc, uint64_t* start) {
  volatile int* err = (volatile int*)dc->error;
  if (*dc->abort_flag) {
    __threadfence_system(); /* read the reason after the flag, as it was written before it */
    if (*err == 0) {
      *err = TD_STOP_ABORT;
    }
    return 0;
  }
  const uint64_t now = td_now_ns();
  if (*start == 0) {
    *start = now;
  } else if (now - *start > dc->timeout_ns) {
    *err = TD_STOP_TIMEOUT;
    __threadfence_system();
    *dc->abort_flag = 1;
    return 0;
  }
  return 1;
}

#define TD_WARP_ALL 0xffffffffu /* every lane of a warp, for its votes and shuffles */

/* How many looks at what a wait waits for come between two checks of the
 * abort flag and the clock (td_wait_ok): a queue counter, an LL line (every
 * thread its own), a warp's LL128 lines. Powers of two. */
#define TD_SPIN_COUNTER 1024u
#define TD_SPIN_LL (1u << 20)
#define TD_SPIN_LL128 (1u << 16)

/* One spinning wait: its looks since the last check, and when it began
 * (td_wait_ok sets it at the first check). */
struct td_spin {
  uint32_t looks;
  uint64_t start;
};

/* The spin every wait runs, once per look at what it waits for: every
 * EVERY looks it asks td_wait_ok whether it may go on. 0 once the wait must
 * end (aborted, or timed out), with the reason recorded. WARP: the whole
 * warp asks and ends together (a wait whose lanes meet in warp votes). */
template <uint32_t EVERY, bool WARP = false>
__device__ __forceinline__ int td_spin_ok(td_devcomm* dc, td_spin* sp) {
  if (++sp->looks == EVERY) {
    sp->looks = 0;
    if (WARP ? __any_sync(TD_WARP_ALL, !td_wait_ok(dc, &sp->start)) : !td_wait_ok(dc, &sp->start)) {
      return 0;
    }
  }
  return 1;
}

/* Spins until *p >= want. Returns 0 once the communicator is aborted or the
 * wait outlasts the timeout, after recording why in dc->error. */
static __device__ int td_wait_ge(const uint64_t* p, uint64_t want, td_devcomm* dc) {
  td_spin sp = {0, 0};
  while (td_ld_acquire(p) < want) {
    if (!td_spin_ok<TD_SPIN_COUNTER>(dc, &sp)) {
      return 0;
    }
  }
  return 1;
}

/* The part of a step's `bytes` that channel `ch` of `nch` moves: 16-byte
 * units split evenly, so every channel but the last starts aligned. */
__device__ __forceinline__ void td_chan_slice(uint64_t bytes, int nch, int ch, uint64_t* off,
                                              uint64_t* len) {
  uint64_t units = (bytes + 15) / 16;
  uint64_t b0 = units * (uint64_t)ch / (uint64_t)nch * 16;
  uint64_t b1 = units * (uint64_t)(ch + 1) / (uint64_t)nch * 16;
  b0 = b0 < bytes ? b0 : bytes;
  b1 = b1 < bytes ? b1 : bytes;
  *off = b0;
  *len = b1 - b0;
}

/* The counts of kernels started [0] and finished [1], kept in device memory
 * beside the count of finished blocks. */
__device__ __forceinline__ volatile uint32_t* td_kernel_counts(td_devcomm* dc) {
  return (volatile uint32_t*)(dc->priv + dc->lay.finished_off + 8);
}

/* The count of kernels started, mirrored to host memory by a posted store
 * (no read across PCIe, no system fence): it tells the host's watchdog and
 * proxy that work is in flight, and RAS which operation (`tag`). Block 0,
 * thread 0. */
__device__ __forceinline__ void td_kernel_started(td_devcomm* dc, uint64_t tag) {
  volatile uint32_t* kc = td_kernel_counts(dc);
  const uint32_t v = kc[0] + 1;
  kc[0] = v;
  /* Which call it runs, for RAS (read by the listener: no fence, a reader
   * may see the count a moment before the tag). */
  *(volatile unsigned long long*)(dc->kstate + (TD_FLAG_RUNNING - TD_FLAG_STARTED)) = tag;
  ((volatile int*)dc->kstate)[0] = (int)v;
}

/* The count of finished kernels, mirrored the same way. */
__device__ __forceinline__ void td_kernel_finished(td_devcomm* dc) {
  volatile uint32_t* kc = td_kernel_counts(dc);
  const uint32_t v = kc[1] + 1;
  kc[1] = v;
  ((volatile int*)dc->kstate)[1] = (int)v;
}

/* Thread 0 of each block, once its block is done: the last block of the
 * grid resets the count for the next kernel and counts this one finished. */
__device__ __forceinline__ void td_block_done(td_devcomm* dc) {
  unsigned long long* finished = (unsigned long long*)(dc->priv + dc->lay.finished_off);
  if (atomicAdd(finished, 1ull) + 1 == gridDim.x) {
    *(volatile unsigned long long*)finished = 0;
    td_kernel_finished(dc);
  }
}

#endif
