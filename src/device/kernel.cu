/* The device executor's kernel: each block runs one lane of one operation on
 * one channel, step by step, moving pieces of at most a slot through the
 * connection queues in peers' memory. A sender writes a slot into the
 * receiver's queue and then releases the queue's tail; a receiver acquires
 * the tail, reads and reduces the slot out of its own memory (where the
 * data already is, so the reduction runs at local bandwidth), then releases
 * the slot back through the sender's head. See work.h for the layout. */
#include <stdint.h>

#include "device/kernel.h"
#include "device/reduce.cuh"

extern "C" {
#include "algo/algo.h"
#include "reduce/reduce.h"
}

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

/* One pass of an element-wise operation over [0, len) bytes: w1 (and w2 when
 * set) = a OP b, or a transformed when b is NULL. */
struct td_pass {
  const char* a;
  const char* b;
  char* w1;
  char* w2;
  size_t len;
};

template <class R, int EOP>
__device__ __forceinline__ uint4 td_vop(const R& r, uint4 x, uint4 y) {
  typedef typename R::T T;
  T* px = reinterpret_cast<T*>(&x);
  const T* py = reinterpret_cast<const T*>(&y);
#pragma unroll
  for (int i = 0; i < (int)(16 / sizeof(T)); i++) {
    px[i] = r.apply(EOP, px[i], EOP == TD_SCALE || EOP == TD_DIV ? px[i] : py[i]);
  }
  return x;
}

/* Vectors unrolled per thread: several loads in flight for the wide types;
 * one for the 8-bit floats, whose conversions are long enough to hide latency. */
template <class R>
struct td_unroll {
  static const int value = sizeof(typename R::T) >= 2 ? 4 : 2;
};

template <class R, int EOP>
__device__ __noinline__ void td_run_pass(const td_op* op, uint64_t scalar, const td_pass* pp) {
  typedef typename R::T T;
  const int U = td_unroll<R>::value;
  const R r = R::make(scalar, op->divisor);
  const td_pass p = *pp;
  const int binary = EOP != TD_SCALE && EOP != TD_DIV && EOP != TD_COPY;
  const uintptr_t mis = (uintptr_t)p.a | (uintptr_t)p.w1 | (binary ? (uintptr_t)p.b : 0) |
                        (p.w2 ? (uintptr_t)p.w2 : 0);
  size_t nvec = (mis & 15) == 0 ? p.len / 16 : 0;
  const size_t stride = (size_t)blockDim.x;
  const uint4* a4 = reinterpret_cast<const uint4*>(p.a);
  const uint4* b4 = reinterpret_cast<const uint4*>(p.b);
  uint4* w14 = reinterpret_cast<uint4*>(p.w1);
  uint4* w24 = reinterpret_cast<uint4*>(p.w2);
  for (size_t i = threadIdx.x; i < nvec; i += stride * U) {
    uint4 x[U], y[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
      size_t k = i + (size_t)u * stride;
      if (k < nvec) {
        x[u] = __ldcg(a4 + k);
        if (binary) {
          y[u] = __ldcg(b4 + k);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      size_t k = i + (size_t)u * stride;
      if (k < nvec) {
        uint4 v = EOP == TD_COPY ? x[u] : td_vop<R, EOP>(r, x[u], binary ? y[u] : x[u]);
        w14[k] = v;
        if (p.w2 != NULL) {
          w24[k] = v;
        }
      }
    }
  }
  /* The rest (or everything, when a pointer is not 16-byte aligned), element by element. */
  const size_t n = p.len / sizeof(T);
  const T* a = reinterpret_cast<const T*>(p.a);
  const T* b = reinterpret_cast<const T*>(p.b);
  T* w1 = reinterpret_cast<T*>(p.w1);
  T* w2 = reinterpret_cast<T*>(p.w2);
  for (size_t i = nvec * 16 / sizeof(T) + threadIdx.x; i < n; i += stride) {
    T x = a[i];
    T v = EOP == TD_COPY ? x : r.apply(EOP, x, binary ? b[i] : x);
    w1[i] = v;
    if (w2 != NULL) {
      w2[i] = v;
    }
  }
}

template <class R>
__device__ __forceinline__ void td_pass_eop(const td_op* op, uint64_t scalar, int eop,
                                            const td_pass* p) {
  switch (eop) {
    case TD_SUM:
      return td_run_pass<R, TD_SUM>(op, scalar, p);
    case TD_PROD:
      return td_run_pass<R, TD_PROD>(op, scalar, p);
    case TD_MAX:
      return td_run_pass<R, TD_MAX>(op, scalar, p);
    case TD_MIN:
      return td_run_pass<R, TD_MIN>(op, scalar, p);
    case TD_SUMSCALE:
      return td_run_pass<R, TD_SUMSCALE>(op, scalar, p);
    case TD_SUMDIV:
      return td_run_pass<R, TD_SUMDIV>(op, scalar, p);
    case TD_SCALE:
      return td_run_pass<R, TD_SCALE>(op, scalar, p);
    case TD_DIV:
      return td_run_pass<R, TD_DIV>(op, scalar, p);
    default:
      return td_run_pass<R, TD_COPY>(op, scalar, p);
  }
}

/* One pass of `eop` for the operation's type; `scalar` holds the PreMulSum scalar's bits. */
__device__ __noinline__ void td_pass_typed(const td_op* op, uint64_t scalar, int eop,
                                           const td_pass* p) {
  if (eop == TD_COPY) {
    /* Type-free: the widest element that keeps the pointers aligned. */
    const uintptr_t mis =
        (uintptr_t)p->a | (uintptr_t)p->w1 | (p->w2 ? (uintptr_t)p->w2 : 0) | p->len;
    if ((mis & 3) == 0) {
      return td_run_pass<td_int<uint32_t, uint32_t>, TD_COPY>(op, scalar, p);
    }
    return td_run_pass<td_int<uint8_t, uint8_t>, TD_COPY>(op, scalar, p);
  }
  switch (op->type) {
    case ncclInt8:
      return td_pass_eop<td_int<int8_t, uint8_t> >(op, scalar, eop, p);
    case ncclUint8:
      return td_pass_eop<td_int<uint8_t, uint8_t> >(op, scalar, eop, p);
    case ncclInt32:
      return td_pass_eop<td_int<int32_t, uint32_t> >(op, scalar, eop, p);
    case ncclUint32:
      return td_pass_eop<td_int<uint32_t, uint32_t> >(op, scalar, eop, p);
    case ncclInt64:
      return td_pass_eop<td_int<int64_t, uint64_t> >(op, scalar, eop, p);
    case ncclUint64:
      return td_pass_eop<td_int<uint64_t, uint64_t> >(op, scalar, eop, p);
    case ncclFloat32:
      return td_pass_eop<td_f32>(op, scalar, eop, p);
    case ncclFloat64:
      return td_pass_eop<td_f64>(op, scalar, eop, p);
    case ncclFloat16:
      return td_pass_eop<td_narrow<td_half> >(op, scalar, eop, p);
    case ncclBfloat16:
      return td_pass_eop<td_narrow<td_bf16> >(op, scalar, eop, p);
    case ncclFloat8e4m3:
      return td_pass_eop<td_narrow<td_e4m3> >(op, scalar, eop, p);
    case ncclFloat8e5m2:
      return td_pass_eop<td_narrow<td_e5m2> >(op, scalar, eop, p);
    default:
      return;
  }
}

/* The host's rules (exec/step.c): reading the send buffer applies the
 * PreMulSum scaling; a final step applies the SumPostDiv division. */
__device__ __forceinline__ int td_binary_eop(const td_op& op, int scale, int final) {
  switch (op.kind) {
    case TUTTI_RED_PROD:
      return TD_PROD;
    case TUTTI_RED_MAX:
      return TD_MAX;
    case TUTTI_RED_MIN:
      return TD_MIN;
    case TUTTI_RED_PREMULSUM:
      return scale ? TD_SUMSCALE : TD_SUM;
    case TUTTI_RED_SUMPOSTDIV:
      return final ? TD_SUMDIV : TD_SUM;
    default:
      return TD_SUM;
  }
}

__device__ __forceinline__ int td_unary_eop(const td_op& op, int scale, int final) {
  if (op.kind == TUTTI_RED_PREMULSUM && scale) {
    return TD_SCALE;
  }
  if (op.kind == TUTTI_RED_SUMPOSTDIV && final) {
    return TD_DIV;
  }
  return TD_COPY;
}

#include "device/kernel_lane.cuh"

template <class W>
__global__ void __launch_bounds__(TD_MAX_THREADS) td_kernel(const __grid_constant__ W w) {
  td_run_block(w.comm, w.ops, w.lanes, w.ctas, w.tickets, w.steps, w.ncta, w.nlanes,
               w.chunk_bytes, w.slot_bytes);
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

extern "C" cudaError_t td_occupancy(int nthreads, int* per_sm) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(per_sm, td_kernel<td_work_large>, nthreads,
                                                       0);
}
