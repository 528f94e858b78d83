/* Reductions of half, bfloat16 and fp8: each element is widened to float,
 * combined and rounded back in one vectorized loop. Hand-written loops take
 * the whole groups first where the CPU has them: AVX512-FP16
 * (reduce_narrow_fp16.c), AVX-512 (reduce_narrow_avx512.c), AVX2 and F16C
 * (reduce_narrow_avx2.c). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "reduce/reduce_impl.h"

#if TUTTI_RED_X86
#include <cpuid.h>
#endif

struct nparams {
  enum tutti_red_eop eop;
  float s;  /* SUMSCALE / SCALE */
  float dv; /* SUMDIV / DIV */
};

LDST(c16, uint16_t)
LDST(c8, uint8_t)

/* Whether max / min takes b: the FMAX / FMIN rules (a NaN wins, a's first;
 * ties keep a). The pick is of the code, which is then decoded and encoded:
 * selecting floats instead lets GCC move the encoding's float add under a
 * branch, which it cannot vectorize. */
RED_INLINE uint32_t red_take_max(float x, float y) {
  return (uint32_t)(x == x) & ((uint32_t)(y != y) | (uint32_t)(y > x));
}

RED_INLINE uint32_t red_take_min(float x, float y) {
  return (uint32_t)(x == x) & ((uint32_t)(y != y) | (uint32_t)(y < x));
}

/* Float is wide enough (>= 2p+2 bits) that rounding its result once more to
 * the narrow type gives the correctly rounded narrow result. For PREMULSUM the
 * product is rounded to the type before the add, as NCCL computes it in the
 * narrow type. */
#define NARROW_KERNEL(NAME, LD, ELT, TO_F, FROM_F)                                         \
  static void red_##NAME(unsigned char* d, const unsigned char* a, const unsigned char* b, \
                         size_t n, const struct nparams* p) {                              \
    float s = p->s, dv = p->dv;                                                            \
    switch (p->eop) {                                                                      \
      case TUTTI_EOP_SUM:                                                                  \
        BINARY(LD, ELT, FROM_F(TO_F(x) + TO_F(y)));                                        \
        break;                                                                             \
      case TUTTI_EOP_PROD:                                                                 \
        BINARY(LD, ELT, FROM_F(TO_F(x) * TO_F(y)));                                        \
        break;                                                                             \
      case TUTTI_EOP_MAX:                                                                  \
        BINARY(LD, ELT, FROM_F(TO_F(red_take_max(TO_F(x), TO_F(y)) ? y : x)));             \
        break;                                                                             \
      case TUTTI_EOP_MIN:                                                                  \
        BINARY(LD, ELT, FROM_F(TO_F(red_take_min(TO_F(x), TO_F(y)) ? y : x)));             \
        break;                                                                             \
      case TUTTI_EOP_SUMSCALE:                                                             \
        BINARY(LD, ELT, FROM_F(TO_F(x) + TO_F(FROM_F(TO_F(y) * s))));                      \
        break;                                                                             \
      case TUTTI_EOP_SUMDIV:                                                               \
        BINARY(LD, ELT, FROM_F(TO_F(FROM_F(TO_F(x) + TO_F(y))) / dv));                     \
        break;                                                                             \
      case TUTTI_EOP_SCALE:                                                                \
        UNARY(LD, ELT, FROM_F(TO_F(x) * s));                                               \
        break;                                                                             \
      case TUTTI_EOP_DIV:                                                                  \
        UNARY(LD, ELT, FROM_F(TO_F(x) / dv));                                              \
        break;                                                                             \
    }                                                                                      \
  }

/* One (baseline) version each: the hand-written loops (AVX2 and F16C and
 * up) leave them the tails, or everything on a CPU without those. */
NARROW_KERNEL(half, c16, uint16_t, red_half_to_float, red_float_to_half)
NARROW_KERNEL(bf16, c16, uint16_t, red_bf16_to_float, red_float_to_bf16)
NARROW_KERNEL(e4m3, c8, uint8_t, red_e4m3_to_float, red_float_to_e4m3)
NARROW_KERNEL(e5m2, c8, uint8_t, red_e5m2_to_float, red_float_to_e5m2)

#if TUTTI_RED_X86
/* cpuid is slow (it traps in VMs), so the answer is cached: -1 unknown, 0 or 1. */
static int cpu_f16c = -1;

static int use_f16c(void) {
  int v = __atomic_load_n(&cpu_f16c, __ATOMIC_RELAXED);
  if (v < 0) {
    unsigned eax, ebx, ecx, edx;
    v = red_isa() >= 1 && __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
    __atomic_store_n(&cpu_f16c, v, __ATOMIC_RELAXED);
  }
  return v;
}

/* The hand-written loops this CPU runs, widest first: each does whole
 * groups and returns how many elements it did; the portable loops do the rest. */
static size_t red_vector(unsigned char* d, const unsigned char* a, const unsigned char* b, size_t n,
                         ncclDataType_t type, const struct nparams* p) {
  size_t w = tutti_type_size(type), done = 0;
  int isa = red_isa();
  if (isa >= 3 && b != NULL) {
    done = tutti_reduce_narrow_fp16(d, a, b, n, type, p->eop);
  }
  if (isa >= 2) {
    return done + tutti_reduce_narrow_avx512(d + w * done, a + w * done,
                                             b != NULL ? b + w * done : NULL, n - done, type,
                                             p->eop, p->s, p->dv);
  }
  return use_f16c() ? tutti_reduce_narrow_avx2(d, a, b, n, type, p->eop, p->s, p->dv) : 0;
}
#endif

void tutti_reduce_narrow(void* dst, const void* a, const void* b, size_t n,
                         const struct tutti_redop* op, enum tutti_red_eop eop) {
  struct nparams p = {eop, 0.0f, (float)(op->divisor ? op->divisor : 1)};
  unsigned char* d = dst;
  const unsigned char* pa = a;
  const unsigned char* pb = b;
  size_t w = tutti_type_size(op->type);
  p.s = op->type == ncclFloat16      ? red_half_to_float(op->scalar.u16)
        : op->type == ncclBfloat16   ? red_bf16_to_float(op->scalar.u16)
        : op->type == ncclFloat8e4m3 ? red_e4m3_to_float(op->scalar.u8)
                                     : red_e5m2_to_float(op->scalar.u8);
  size_t done = 0;
#if TUTTI_RED_X86
  done = red_vector(d, pa, pb, n, op->type, &p);
#endif
  d += w * done;
  pa += w * done;
  pb = pb != NULL ? pb + w * done : NULL;
  n -= done;
  switch (op->type) {
    case ncclFloat16:
      red_half(d, pa, pb, n, &p);
      return;
    case ncclBfloat16:
      red_bf16(d, pa, pb, n, &p);
      return;
    case ncclFloat8e4m3:
      red_e4m3(d, pa, pb, n, &p);
      return;
    case ncclFloat8e5m2:
      red_e5m2(d, pa, pb, n, &p);
      return;
    default:
      return;
  }
}
