/* LL128 lines for the mapped kernel: a 128-byte line holds 120 data bytes and
 * an 8-byte flag (the round), stored by the eight threads of a warp that
 * own it in one 16-byte-per-thread store instruction and loaded the same
 * way. NVLink moves such a line as one transaction, so a line whose flag
 * reads the round also holds that round's data (the property NCCL's LL128
 * protocol rests on): no fence and no separate flag, as LL, but 94% of the
 * link's bytes carry data instead of 50%.
 *
 * Thread k (0-7) of a line's eight carries data bytes [16k, 16k + 16) of
 * the line's 120; thread 7 carries [112, 120) and the flag. A warp moves
 * four lines (512 bytes) per instruction. A line is only written or read
 * with all eight of its threads active, which the loops below keep: their
 * bounds are the same for the eight. */
#ifndef TUTTI_DEVICE_KERNELS_MAPPED_LL128_CUH
#define TUTTI_DEVICE_KERNELS_MAPPED_LL128_CUH

#include "device/kernels/mapped.h"
#include "device/kernels/pass.cuh"
#include "device/kernels/sync.cuh"

/* Lines per thread in flight: four for copies and sums; one for the other
 * operations and for scaled pushes, whose code per line (fp8 max, say)
 * unrolled four times made the kernels too large to compile in reasonable
 * time and memory. */
#define TD_LL128_U 4

__device__ __forceinline__ void td_ll128_st(uint64_t* p, uint64_t a, uint64_t b) {
  asm volatile("st.volatile.global.v2.u64 [%0], {%1,%2};" ::"l"(p), "l"(a), "l"(b) : "memory");
}

__device__ __forceinline__ void td_ll128_ld(const uint64_t* p, unsigned long long* a,
                                            unsigned long long* b) {
  asm volatile("ld.volatile.global.v2.u64 {%0,%1}, [%2];" : "=l"(*a), "=l"(*b) : "l"(p) : "memory");
}

/* Where this thread stands: its line among the warp's four, its place in
 * the line, and the data bytes of line l that it carries. */
struct td_ll128_at {
  int k;         /* place in the line, 0-7 */
  int warp, nw;  /* this warp, warps in the block */
  int flag_src;  /* the warp position of this line's thread 7 */
  size_t first;  /* this thread's first line */
  size_t step_u; /* lines between one unrolled line and the next */
  size_t step;   /* lines per iteration of the block */
  __device__ __forceinline__ void init(int unroll) {
    const int wl = threadIdx.x & 31;
    k = wl & 7;
    warp = threadIdx.x >> 5;
    nw = blockDim.x >> 5;
    flag_src = wl | 7;
    first = (size_t)warp * 4 + (size_t)(wl >> 3);
    step_u = (size_t)nw * 4;
    step = step_u * unroll;
  }
  /* Bytes this thread carries in line l of a piece of `len` bytes, as
   * (offset, bytes of word 0, bytes of word 1). */
  __device__ __forceinline__ size_t off(size_t l) const {
    return l * TD_LL128_DATA + 16 * (size_t)k;
  }
  __device__ __forceinline__ size_t nb0(size_t l, size_t len) const {
    const size_t o = off(l);
    return o >= len ? 0 : len - o < 8 ? len - o : 8;
  }
  __device__ __forceinline__ size_t nb1(size_t l, size_t len) const {
    const size_t o = off(l) + 8;
    return k == 7 || o >= len ? 0 : len - o < 8 ? len - o : 8;
  }
};

/* Waits for lines first + u * step_u (u < U, those below nlines) of `box`
 * to carry `flag`, and loads this thread's 16 bytes of each. Returns 0
 * (after recording why in dc->error) on abort or timeout. */
template <int U>
__device__ __forceinline__ int td_ll128_wait(const uint64_t* box, size_t base, size_t nlines,
                                             uint64_t flag, const td_ll128_at& at, ulonglong2* y,
                                             td_devcomm* dc) {
  td_spin sp = {0, 0};
#pragma unroll
  for (int u = 0; u < U; u++) {
    y[u] = make_ulonglong2(0, 0);
  }
  for (;;) {
    int ok = 1;
#pragma unroll
    for (int u = 0; u < U; u++) {
      const size_t l = base + at.first + (size_t)u * at.step_u;
      if (l < nlines) {
        td_ll128_ld(box + l * 16 + 2 * at.k, &y[u].x, &y[u].y);
      }
      const uint64_t f = __shfl_sync(TD_WARP_ALL, y[u].y, at.flag_src);
      ok &= l >= nlines || f == flag;
    }
    if (__all_sync(TD_WARP_ALL, ok)) {
      return 1;
    }
    /* Asked by the warp as one: its threads meet in the votes above, so they
     * must stop together. */
    if (!td_spin_ok<TD_SPIN_LL128, true>(dc, &sp)) {
      return 0;
    }
  }
}

/* This thread's own bytes of line l (the sender's data or the rank's own
 * contribution), zero beyond len. */
__device__ __forceinline__ ulonglong2 td_ll128_own(const char* src, size_t l, size_t len,
                                                   const td_ll128_at& at) {
  const size_t o = at.off(l);
  ulonglong2 x;
  x.x = td_ld8(src + o, at.nb0(l, len));
  x.y = td_ld8(src + o + 8, at.nb1(l, len));
  return x;
}

__device__ __forceinline__ void td_ll128_put(char* dst, size_t l, size_t len, const td_ll128_at& at,
                                             ulonglong2 v) {
  const size_t o = at.off(l);
  const size_t n0 = at.nb0(l, len), n1 = at.nb1(l, len);
  if (n0 > 0) {
    td_st8(dst + o, v.x, n0);
  }
  if (n1 > 0) {
    td_st8(dst + o + 8, v.y, n1);
  }
}

/* Pushes `len` bytes of src as lines of round `flag` into box (a peer's
 * inbox), each scaled by the PreMulSum scalar first when SCALE. */
template <class R, bool SCALE>
__device__ __forceinline__ void td_ll128_push(uint64_t scalar, uint64_t divisor, const char* src,
                                              uint64_t* box, size_t len, uint64_t flag) {
  constexpr int U = SCALE ? 1 : TD_LL128_U;
  const R r = R::make(scalar, divisor);
  td_ll128_at at;
  at.init(U);
  const size_t nlines = (len + TD_LL128_DATA - 1) / TD_LL128_DATA;
  for (size_t base = 0; base < nlines; base += at.step) {
    ulonglong2 x[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
      const size_t l = base + at.first + (size_t)u * at.step_u;
      if (l < nlines) {
        x[u] = td_ll128_own(src, l, len, at);
        if (SCALE) {
          x[u] = td_vop<R, ulonglong2>(r, TD_SCALE, x[u], x[u]);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      const size_t l = base + at.first + (size_t)u * at.step_u;
      if (l < nlines) {
        td_ll128_st(box + l * 16 + 2 * at.k, x[u].x, at.k == 7 ? flag : x[u].y);
      }
    }
  }
}

/* Every rank's contribution in rank order, the peers' from their lines of
 * round `flag` (lines[q]), this rank's own from `self` (index self_idx). */
struct td_ll128fold {
  const uint64_t* lines[TD_MAPPED_MAX_RANKS];
  const char* self;
  int self_idx;
  int scaled; /* multiply `self` by the PreMulSum scalar first */
  int nsrc;
  int e_mid, e_last;
  uint64_t flag;
  char* dst;
  size_t len;
  td_devcomm* dc;
};

/* Returns 0 on abort or timeout. EOP: the operation when known at compile
 * time (sum), or TD_ANY. */
template <class R, int EOP>
__device__ __forceinline__ int td_run_ll128fold(const td_op* op, uint64_t scalar,
                                                const td_ll128fold& f) {
  constexpr int U = EOP == TD_ANY ? 1 : TD_LL128_U;
  const R r = R::make(scalar, op->divisor);
  td_ll128_at at;
  at.init(U);
  const size_t nlines = (f.len + TD_LL128_DATA - 1) / TD_LL128_DATA;
  for (size_t base = 0; base < nlines; base += at.step) {
    ulonglong2 x[U], y[U], own[U];
    /* This rank's own bytes first, whatever its place in the order: their
     * loads overlap the waits for the peers' lines. */
#pragma unroll
    for (int u = 0; u < U; u++) {
      const size_t l = base + at.first + (size_t)u * at.step_u;
      own[u] = l < nlines ? td_ll128_own(f.self, l, f.len, at) : make_ulonglong2(0, 0);
    }
    for (int q = 0; q < f.nsrc; q++) {
      if (q == f.self_idx) {
#pragma unroll
        for (int u = 0; u < U; u++) {
          y[u] = f.scaled ? td_vop<R, ulonglong2>(r, TD_SCALE, own[u], own[u]) : own[u];
        }
      } else if (!td_ll128_wait<U>(f.lines[q], base, nlines, f.flag, at, y, f.dc)) {
        return 0;
      }
      const int e = EOP != TD_ANY ? EOP : q == f.nsrc - 1 ? f.e_last : f.e_mid;
#pragma unroll
      for (int u = 0; u < U; u++) {
        x[u] = q == 0 ? y[u] : td_vop<R, ulonglong2>(r, e, x[u], y[u]);
      }
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      const size_t l = base + at.first + (size_t)u * at.step_u;
      if (l < nlines) {
        td_ll128_put(f.dst, l, f.len, at, x[u]);
      }
    }
  }
  return 1;
}

/* A peer's lines of round `flag` copied to dst. Returns 0 on abort or timeout. */
__device__ __forceinline__ int td_ll128_copy(const uint64_t* box, uint64_t flag, char* dst,
                                             size_t len, td_devcomm* dc) {
  td_ll128_at at;
  at.init(TD_LL128_U);
  const size_t nlines = (len + TD_LL128_DATA - 1) / TD_LL128_DATA;
  for (size_t base = 0; base < nlines; base += at.step) {
    ulonglong2 y[TD_LL128_U];
    if (!td_ll128_wait<TD_LL128_U>(box, base, nlines, flag, at, y, dc)) {
      return 0;
    }
#pragma unroll
    for (int u = 0; u < TD_LL128_U; u++) {
      const size_t l = base + at.first + (size_t)u * at.step_u;
      if (l < nlines) {
        td_ll128_put(dst, l, len, at, y[u]);
      }
    }
  }
  return 1;
}

/* The folds, inlined into the LL128 kernel alone: inlined into all three
 * protocols' loops of one kernel they made it too large for ptxas (over
 * 20 GB); as calls they cost that kernel a 2.3 KB stack frame. */
template <class R>
__device__ __forceinline__ int td_ll128fold_sum(const td_op* op, uint64_t scalar,
                                                const td_ll128fold* f) {
  return td_run_ll128fold<R, TD_SUM>(op, scalar, *f);
}

template <class R>
__device__ __forceinline__ int td_ll128fold_any(const td_op* op, uint64_t scalar,
                                                const td_ll128fold* f) {
  return td_run_ll128fold<R, TD_ANY>(op, scalar, *f);
}

/* The fold for the call's type. */
static __device__ __forceinline__ int td_ll128fold_typed(const td_op* op, uint64_t scalar,
                                                         const td_ll128fold* f) {
  const int sum = f->e_mid == TD_SUM && f->e_last == TD_SUM;
  int ok = 1;
  td_by_type(op->type, [&](auto tag) {
    typedef typename decltype(tag)::type R;
    ok = sum ? td_ll128fold_sum<R>(op, scalar, f) : td_ll128fold_any<R>(op, scalar, f);
  });
  return ok;
}

/* The push for the call's type: a plain copy unless PreMulSum scales it. */
static __device__ __forceinline__ void td_ll128_push_typed(const td_op* op, uint64_t scalar,
                                                           int scale, const char* src,
                                                           uint64_t* box, size_t len,
                                                           uint64_t flag) {
  if (!scale) {
    return td_ll128_push<td_int<uint64_t, uint64_t>, false>(0, 1, src, box, len, flag);
  }
  td_by_type(op->type, [&](auto tag) {
    td_ll128_push<typename decltype(tag)::type, true>(scalar, op->divisor, src, box, len, flag);
  });
}

#endif
