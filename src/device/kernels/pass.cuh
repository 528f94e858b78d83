/* Element-wise passes of the kernels: copy, transform or combine bytes with
 * 16-byte vectors (the simple protocol), or through low-latency lines that
 * carry their own flag (the LL protocol); and which operation a step of a
 * reduction applies. */
#ifndef TUTTI_DEVICE_KERNELS_PASS_CUH
#define TUTTI_DEVICE_KERNELS_PASS_CUH

#include <stdint.h>

#include "device/kernels/reduce.cuh"
#include "device/kernels/sync.cuh"
#include "device/work.h"

extern "C" {
#include "algo/algo.h"
#include "reduce/reduce.h"
}

/* One pass of an element-wise operation over [0, len) bytes: w1 (and w2 when
 * set) = a OP b, or a transformed when b is NULL. */
struct td_pass {
  const char* a;
  const char* b;
  char* w1;
  char* w2;
  size_t len;
  int tid; /* this thread among the `nth` that share the pass; nth 0: the whole block */
  int nth;
};

/* `e` applied element by element to the words x and y (16 bytes in simple
 * passes, the 8 data bytes of an LL line). */
template <class R, class V>
__device__ __forceinline__ V td_vop(const R& r, int e, V x, V y) {
  typedef typename R::T T;
  T* px = reinterpret_cast<T*>(&x);
  const T* py = reinterpret_cast<const T*>(&y);
#pragma unroll
  for (int i = 0; i < (int)(sizeof(V) / sizeof(T)); i++) {
    px[i] = r.apply(e, px[i], e == TD_SCALE || e == TD_DIV ? px[i] : py[i]);
  }
  return x;
}

/* Vectors in flight per thread: many for plain types, whose loops are
 * latency-bound; fewer for the narrow floats, whose conversions are long
 * enough to hide latency (and would multiply the code). */
template <class R>
struct td_unroll {
  static const int value = 4;
};
template <class N>
struct td_unroll<td_narrow<N>> {
  static const int value = sizeof(typename N::T) == 2 ? 4 : 2;
};

/* EOP is the operation when known at compile time (the hot ones: copy and
 * sum), or TD_ANY to take `eop` at run time (one loop for the rare ones). */
#define TD_ANY (-1)

template <class R, int EOP>
__device__ __forceinline__ void td_run_pass(const td_op* op, uint64_t scalar, int eop,
                                            const td_pass* pp) {
  typedef typename R::T T;
  const int U = EOP == TD_ANY ? 1 : EOP == TD_COPY ? 8 : td_unroll<R>::value;
  const R r = R::make(scalar, op->divisor);
  const td_pass p = *pp;
  const int e = EOP != TD_ANY ? EOP : eop;
  const int binary = e != TD_SCALE && e != TD_DIV && e != TD_COPY;
  const uintptr_t mis = (uintptr_t)p.a | (uintptr_t)p.w1 | (binary ? (uintptr_t)p.b : 0) |
                        (p.w2 ? (uintptr_t)p.w2 : 0);
  size_t nvec = (mis & 15) == 0 ? p.len / 16 : 0;
  const size_t stride = p.nth ? (size_t)p.nth : (size_t)blockDim.x;
  const size_t t0 = p.nth ? (size_t)p.tid : (size_t)threadIdx.x;
  const uint4* a4 = reinterpret_cast<const uint4*>(p.a);
  const uint4* b4 = reinterpret_cast<const uint4*>(p.b);
  uint4* w14 = reinterpret_cast<uint4*>(p.w1);
  uint4* w24 = reinterpret_cast<uint4*>(p.w2);
  for (size_t i = t0; i < nvec; i += stride * U) {
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
        uint4 v = e == TD_COPY ? x[u] : td_vop<R, uint4>(r, e, x[u], binary ? y[u] : x[u]);
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
  for (size_t i = nvec * 16 / sizeof(T) + t0; i < n; i += stride) {
    T x = a[i];
    T v = e == TD_COPY ? x : r.apply(e, x, binary ? b[i] : x);
    w1[i] = v;
    if (w2 != NULL) {
      w2[i] = v;
    }
  }
}

template <class R>
__device__ __forceinline__ void td_pass_eop(const td_op* op, uint64_t scalar, int eop,
                                            const td_pass* p) {
  if (eop == TD_SUM) {
    return td_run_pass<R, TD_SUM>(op, scalar, eop, p);
  }
  return td_run_pass<R, TD_ANY>(op, scalar, eop, p);
}

template <class R>
struct td_tag {
  typedef R type;
};

/* Calls fn(td_tag<R>()) with R the arithmetic of ncclDataType_t `type`. */
template <class F>
__device__ __forceinline__ void td_by_type(int type, F fn) {
  switch (type) {
    case ncclInt8:
      return fn(td_tag<td_int<int8_t, uint8_t>>());
    case ncclUint8:
      return fn(td_tag<td_int<uint8_t, uint8_t>>());
    case ncclInt32:
      return fn(td_tag<td_int<int32_t, uint32_t>>());
    case ncclUint32:
      return fn(td_tag<td_int<uint32_t, uint32_t>>());
    case ncclInt64:
      return fn(td_tag<td_int<int64_t, uint64_t>>());
    case ncclUint64:
      return fn(td_tag<td_int<uint64_t, uint64_t>>());
    case ncclFloat32:
      return fn(td_tag<td_f32>());
    case ncclFloat64:
      return fn(td_tag<td_f64>());
    case ncclFloat16:
      return fn(td_tag<td_narrow<td_half>>());
    case ncclBfloat16:
      return fn(td_tag<td_narrow<td_bf16>>());
    case ncclFloat8e4m3:
      return fn(td_tag<td_narrow<td_e4m3>>());
    case ncclFloat8e5m2:
      return fn(td_tag<td_narrow<td_e5m2>>());
    default:
      return;
  }
}

/* A copy, type-free: the widest element that keeps the pointers aligned. */
static __device__ __forceinline__ void td_copy_pass(const td_op* op, const td_pass* p) {
  const uintptr_t mis =
      (uintptr_t)p->a | (uintptr_t)p->w1 | (p->w2 ? (uintptr_t)p->w2 : 0) | p->len;
  if ((mis & 3) == 0) {
    return td_run_pass<td_int<uint32_t, uint32_t>, TD_COPY>(op, 0, TD_COPY, p);
  }
  return td_run_pass<td_int<uint8_t, uint8_t>, TD_COPY>(op, 0, TD_COPY, p);
}

/* One pass of `eop` for the operation's type; `scalar` holds the PreMulSum
 * scalar's bits. Inlined into its one caller, the schedules' kernel: as a
 * call (even one holding every type's loop) it cost that kernel a 2 KB
 * stack frame of register saves, which the driver reserves for every
 * thread the GPU can hold (bench/RESULTS.md, "Device memory"); a chain of calls passing
 * structs through each thread's stack made a two-source sum take 3x its
 * inlined time (bench/pass_bw.cu). */
static __device__ __forceinline__ void td_pass_typed(const td_op* op, uint64_t scalar, int eop,
                                                     const td_pass* p) {
  if (eop == TD_COPY) {
    return td_copy_pass(op, p);
  }
  td_by_type(op->type,
             [&](auto tag) { td_pass_eop<typename decltype(tag)::type>(op, scalar, eop, p); });
}

/* The PreMulSum scalar's bits: read on the device when it lives there. */
__device__ __forceinline__ uint64_t td_scalar(const void* dev, int elem_size, uint64_t bits) {
  if (dev == NULL) {
    return bits;
  }
  uint64_t sc = 0;
  for (int i = 0; i < elem_size; i++) {
    sc |= (uint64_t)((const uint8_t*)dev)[i] << (8 * i);
  }
  return sc;
}

/* ---- The low-latency protocol (see work.h): 8 data bytes per 16-byte line. */

struct td_llpass {
  const uint4* in; /* LL lines to read, or NULL */
  uint32_t in_flag;
  uint32_t out_flag;
  const char* src; /* the user's (or scratch) bytes to combine, or NULL */
  char* dst;       /* local bytes to write, or NULL */
  uint4* out;      /* LL lines to write in the peer's memory, or NULL */
  size_t len;
  td_devcomm* dc;
  int swap; /* binary: src OP lines (the accumulator on the left), not lines OP src */
};

__device__ __forceinline__ uint64_t td_ll_read(const uint4* line, uint32_t flag, td_devcomm* dc) {
  uint32_t a, f1, b, f2;
  td_spin sp = {0, 0};
  do {
    asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(a), "=r"(f1), "=r"(b), "=r"(f2)
                 : "l"(line)
                 : "memory");
    if (!td_spin_ok<TD_SPIN_LL>(dc, &sp)) {
      return 0; /* the block finds the abort at its next wait */
    }
  } while (f1 != flag || f2 != flag);
  return (uint64_t)a | ((uint64_t)b << 32);
}

__device__ __forceinline__ void td_ll_write(uint4* line, uint64_t v, uint32_t flag) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(line), "r"((uint32_t)v),
               "r"(flag), "r"((uint32_t)(v >> 32)), "r"(flag)
               : "memory");
}

/* Up to 8 bytes of ordinary memory, any alignment. */
__device__ __forceinline__ uint64_t td_ld8(const char* p, size_t nb) {
  if (nb == 8 && ((uintptr_t)p & 7) == 0) {
    return __ldcg(reinterpret_cast<const unsigned long long*>(p));
  }
  uint64_t v = 0;
  for (size_t i = 0; i < nb; i++) {
    v |= (uint64_t)(uint8_t)p[i] << (8 * i);
  }
  return v;
}

__device__ __forceinline__ void td_st8(char* p, uint64_t v, size_t nb) {
  if (nb == 8 && ((uintptr_t)p & 7) == 0) {
    *reinterpret_cast<unsigned long long*>(p) = v;
    return;
  }
  for (size_t i = 0; i < nb; i++) {
    p[i] = (char)(v >> (8 * i));
  }
}

/* One LL piece: x = the lines (or src); v = x OP src (src OP x when swap),
 * or x transformed;
 * v goes to dst and/or the peer's lines. */
template <class R>
__device__ __noinline__ void td_ll_pass(const td_op* op, uint64_t scalar, int e,
                                        const td_llpass* pp) {
  const R r = R::make(scalar, op->divisor);
  const td_llpass p = *pp;
  const int binary = e != TD_SCALE && e != TD_DIV && e != TD_COPY;
  const size_t nlines = (p.len + 7) / 8;
  for (size_t l = threadIdx.x; l < nlines; l += blockDim.x) {
    const size_t nb = p.len - l * 8 < 8 ? p.len - l * 8 : 8;
    uint64_t x = p.in ? td_ll_read(p.in + l, p.in_flag, p.dc) : td_ld8(p.src + l * 8, nb);
    uint64_t v = x;
    if (e != TD_COPY) {
      const uint64_t y = binary ? td_ld8(p.src + l * 8, nb) : x;
      v = p.swap ? td_vop<R, uint64_t>(r, e, y, x) : td_vop<R, uint64_t>(r, e, x, y);
    }
    if (p.dst != NULL) {
      td_st8(p.dst + l * 8, v, nb);
    }
    if (p.out != NULL) {
      td_ll_write(p.out + l, v, p.out_flag);
    }
  }
}

static __device__ __noinline__ void td_ll_typed(const td_op* op, uint64_t scalar, int eop,
                                                const td_llpass* p) {
  if (eop == TD_COPY) {
    return td_ll_pass<td_int<uint64_t, uint64_t>>(op, scalar, eop, p);
  }
  td_by_type(op->type,
             [&](auto tag) { td_ll_pass<typename decltype(tag)::type>(op, scalar, eop, p); });
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

#endif
