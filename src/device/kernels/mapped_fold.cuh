/* The mapped kernel's combine: every rank's contribution folded in rank
 * order into the output, from 16-byte vectors (simple rounds) or LL lines. */
#ifndef TUTTI_DEVICE_KERNELS_MAPPED_FOLD_CUH
#define TUTTI_DEVICE_KERNELS_MAPPED_FOLD_CUH

#include "device/kernels/mapped.h"
#include "device/kernels/pass.cuh"

/* Every rank's contribution folded in rank order, written once. */
struct td_fold {
  const char* src[TD_MAPPED_MAX_RANKS];
  int nsrc;
  int scaled; /* the contribution multiplied by the PreMulSum scalar first, -1 none */
  int e_mid;  /* the operation between contributions */
  int e_last; /* ... and before the last one (SumPostDiv divides there) */
  char* dst;
  size_t len;
  int tid; /* this thread among the `nth` that share the fold */
  int nth;
};

/* Source q of the fold, from pointers held in registers: an array indexed
 * at run time would live in local memory, and every store to the (generic)
 * output pointer would make the loop reload it from there. */
struct td_fold_srcs {
  const uint4 *s0, *s1, *s2, *s3, *s4, *s5, *s6, *s7;
  __device__ __forceinline__ const uint4* at(int q) const {
    return q == 1 ? s1 : q == 2 ? s2 : q == 3 ? s3 : q == 4 ? s4 : q == 5 ? s5 : q == 6 ? s6 : s7;
  }
};

template <class R, int EOP>
__device__ __forceinline__ void td_run_fold(const td_op* op, uint64_t scalar, const td_fold* fp) {
  typedef typename R::T T;
  const int U = td_unroll<R>::value;
  const R r = R::make(scalar, op->divisor);
  const int nsrc = fp->nsrc, scaled = fp->scaled, e_mid = fp->e_mid, e_last = fp->e_last;
  const int nth = fp->nth, tid = fp->tid;
  const size_t len = fp->len;
  char* const dst = fp->dst;
  td_fold_srcs s;
  s.s0 = reinterpret_cast<const uint4*>(fp->src[0]);
  s.s1 = reinterpret_cast<const uint4*>(nsrc > 1 ? fp->src[1] : NULL);
  s.s2 = reinterpret_cast<const uint4*>(nsrc > 2 ? fp->src[2] : NULL);
  s.s3 = reinterpret_cast<const uint4*>(nsrc > 3 ? fp->src[3] : NULL);
  s.s4 = reinterpret_cast<const uint4*>(nsrc > 4 ? fp->src[4] : NULL);
  s.s5 = reinterpret_cast<const uint4*>(nsrc > 5 ? fp->src[5] : NULL);
  s.s6 = reinterpret_cast<const uint4*>(nsrc > 6 ? fp->src[6] : NULL);
  s.s7 = reinterpret_cast<const uint4*>(nsrc > 7 ? fp->src[7] : NULL);
  uintptr_t mis = (uintptr_t)dst | (uintptr_t)s.s0;
  for (int q = 1; q < nsrc; q++) {
    mis |= (uintptr_t)s.at(q);
  }
  const size_t nvec = (mis & 15) == 0 ? len / 16 : 0;
  const size_t stride = (size_t)nth;
  uint4* d4 = reinterpret_cast<uint4*>(dst);
  for (size_t i = (size_t)tid; i < nvec; i += stride * U) {
    uint4 x[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
      const size_t k = i + (size_t)u * stride;
      if (k < nvec) {
        x[u] = __ldcg(s.s0 + k);
        if (scaled == 0) {
          x[u] = td_vop<R, uint4>(r, TD_SCALE, x[u], x[u]);
        }
      }
    }
    for (int q = 1; q < nsrc; q++) {
      const int e = EOP != TD_ANY ? EOP : q == nsrc - 1 ? e_last : e_mid;
      const uint4* sq = s.at(q);
      uint4 y[U];
#pragma unroll
      for (int u = 0; u < U; u++) {
        const size_t k = i + (size_t)u * stride;
        if (k < nvec) {
          y[u] = __ldcg(sq + k);
        }
      }
#pragma unroll
      for (int u = 0; u < U; u++) {
        if (i + (size_t)u * stride < nvec) {
          if (q == scaled) {
            y[u] = td_vop<R, uint4>(r, TD_SCALE, y[u], y[u]);
          }
          x[u] = td_vop<R, uint4>(r, e, x[u], y[u]);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      const size_t k = i + (size_t)u * stride;
      if (k < nvec) {
        d4[k] = x[u];
      }
    }
  }
  /* The rest (or everything, when a pointer is not 16-byte aligned). */
  const size_t n = len / sizeof(T);
  for (size_t i = nvec * 16 / sizeof(T) + (size_t)tid; i < n; i += stride) {
    T v = reinterpret_cast<const T*>(s.s0)[i];
    v = scaled == 0 ? r.apply(TD_SCALE, v, v) : v;
    for (int q = 1; q < nsrc; q++) {
      T y = reinterpret_cast<const T*>(s.at(q))[i];
      y = q == scaled ? r.apply(TD_SCALE, y, y) : y;
      v = r.apply(q == nsrc - 1 ? e_last : e_mid, v, y);
    }
    reinterpret_cast<T*>(dst)[i] = v;
  }
}

/* The same through LL lines: the peers' contributions are read (and waited
 * for) line by line; `self` is this rank's own, at index `self_idx`. */
struct td_llfold {
  const uint4* lines[TD_MAPPED_MAX_RANKS];
  const char* self;
  int self_idx;
  int scaled; /* multiply `self` by the PreMulSum scalar first */
  int nsrc;
  uint32_t flag;
  int e_mid, e_last;
  char* dst;
  size_t len;
  td_devcomm* dc;
};

template <class R>
__device__ __noinline__ void td_run_llfold(const td_op* op, uint64_t scalar, const td_llfold* fp) {
  const R r = R::make(scalar, op->divisor);
  const td_llfold f = *fp;
  const size_t nlines = (f.len + 7) / 8;
  for (size_t l = threadIdx.x; l < nlines; l += blockDim.x) {
    const size_t nb = f.len - l * 8 < 8 ? f.len - l * 8 : 8;
    uint64_t v = 0;
    for (int q = 0; q < f.nsrc; q++) {
      uint64_t y;
      if (q == f.self_idx) {
        y = td_ld8(f.self + l * 8, nb);
        y = f.scaled ? td_vop<R, uint64_t>(r, TD_SCALE, y, y) : y;
      } else {
        y = td_ll_read(f.lines[q] + l, f.flag, f.dc);
      }
      v = q == 0 ? y : td_vop<R, uint64_t>(r, q == f.nsrc - 1 ? f.e_last : f.e_mid, v, y);
    }
    td_st8(f.dst + l * 8, v, nb);
  }
}

/* The rare operations (all but sum): one loop per type taking the
 * operation at run time, inlined like the sums (as calls they cost the
 * kernel's frame the registers saved around them). */
static __device__ __forceinline__ void td_fold_any_typed(const td_op* op, uint64_t scalar,
                                                         const td_fold* f) {
  td_by_type(op->type,
             [&](auto tag) { td_run_fold<typename decltype(tag)::type, TD_ANY>(op, scalar, f); });
}

static __device__ __forceinline__ void td_fold_typed(const td_op* op, uint64_t scalar,
                                                     const td_fold* f) {
  if (f->e_mid != TD_SUM || f->e_last != TD_SUM) {
    td_fold_any_typed(op, scalar, f);
    return;
  }
  td_by_type(op->type,
             [&](auto tag) { td_run_fold<typename decltype(tag)::type, TD_SUM>(op, scalar, f); });
}

static __device__ __noinline__ void td_llfold_typed(const td_op* op, uint64_t scalar,
                                                    const td_llfold* f) {
  td_by_type(op->type,
             [&](auto tag) { td_run_llfold<typename decltype(tag)::type>(op, scalar, f); });
}

#endif
