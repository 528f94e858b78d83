/* Reductions of half, bfloat16 and fp8: each element is widened to float,
 * combined and rounded back in one vectorized loop. Hand-written loops take
 * the whole groups first where the CPU has them: AVX512-FP16
 * (reduce_narrow_fp16.c), AVX-512 (reduce_narrow_avx512.c), F16C for half. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "reduce/reduce_impl.h"

#if TUTTI_RED_X86
#include <cpuid.h>
#include <immintrin.h>
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
#define NARROW_KERNEL(SUF, ATTR, NAME, LD, ELT, TO_F, FROM_F)                                   \
  ATTR static void red_##NAME##SUF(unsigned char* d, const unsigned char* a,                    \
                                   const unsigned char* b, size_t n, const struct nparams* p) { \
    float s = p->s, dv = p->dv;                                                                 \
    switch (p->eop) {                                                                           \
      case TUTTI_EOP_SUM:                                                                       \
        BINARY(LD, ELT, FROM_F(TO_F(x) + TO_F(y)));                                             \
        break;                                                                                  \
      case TUTTI_EOP_PROD:                                                                      \
        BINARY(LD, ELT, FROM_F(TO_F(x) * TO_F(y)));                                             \
        break;                                                                                  \
      case TUTTI_EOP_MAX:                                                                       \
        BINARY(LD, ELT, FROM_F(TO_F(red_take_max(TO_F(x), TO_F(y)) ? y : x)));                  \
        break;                                                                                  \
      case TUTTI_EOP_MIN:                                                                       \
        BINARY(LD, ELT, FROM_F(TO_F(red_take_min(TO_F(x), TO_F(y)) ? y : x)));                  \
        break;                                                                                  \
      case TUTTI_EOP_SUMSCALE:                                                                  \
        BINARY(LD, ELT, FROM_F(TO_F(x) + TO_F(FROM_F(TO_F(y) * s))));                           \
        break;                                                                                  \
      case TUTTI_EOP_SUMDIV:                                                                    \
        BINARY(LD, ELT, FROM_F(TO_F(FROM_F(TO_F(x) + TO_F(y))) / dv));                          \
        break;                                                                                  \
      case TUTTI_EOP_SCALE:                                                                     \
        UNARY(LD, ELT, FROM_F(TO_F(x) * s));                                                    \
        break;                                                                                  \
      case TUTTI_EOP_DIV:                                                                       \
        UNARY(LD, ELT, FROM_F(TO_F(x) / dv));                                                   \
        break;                                                                                  \
    }                                                                                           \
  }

/* One version: it runs whole only without F16C, which comes with AVX2. */
NARROW_KERNEL(_v0, , half_sw, c16, uint16_t, red_half_to_float, red_float_to_half)
RED_VERSIONS(NARROW_KERNEL, bf16, c16, uint16_t, red_bf16_to_float, red_float_to_bf16)
RED_VERSIONS(NARROW_KERNEL, e4m3, c8, uint8_t, red_e4m3_to_float, red_float_to_e4m3)
RED_VERSIONS(NARROW_KERNEL, e5m2, c8, uint8_t, red_e5m2_to_float, red_float_to_e5m2)

#if TUTTI_RED_X86
#define F16C_INL static inline __attribute__((always_inline, target("avx2,f16c")))

F16C_INL __m256 h8_load(const unsigned char* p, size_t i) {
  return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(const void*)(p + 2 * i)));
}

F16C_INL void h8_store(unsigned char* p, size_t i, __m256 v) {
  _mm_storeu_si128((__m128i*)(void*)(p + 2 * i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

F16C_INL __m256 h8_round(__m256 v) {
  return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

/* Same NaN and tie rules as FMAX / FMIN. */
F16C_INL __m256 h8_pick(__m256 x, __m256 y, __m256 take_y) {
  __m256 r = _mm256_blendv_ps(x, y, take_y);
  r = _mm256_blendv_ps(r, y, _mm256_cmp_ps(y, y, _CMP_UNORD_Q));
  return _mm256_blendv_ps(r, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

#define H8_BINARY(EXPR)                          \
  for (; i + 8 <= n; i += 8) {                   \
    __m256 x = h8_load(a, i), y = h8_load(b, i); \
    h8_store(d, i, (EXPR));                      \
  }

#define H8_UNARY(EXPR)         \
  for (; i + 8 <= n; i += 8) { \
    __m256 x = h8_load(a, i);  \
    h8_store(d, i, (EXPR));    \
  }

/* Does whole groups of 8 and returns how many elements it did; the portable
 * loop, bit-identical to F16C, does the rest. */
__attribute__((target("avx2,f16c"))) static size_t red_half_f16c(unsigned char* d,
                                                                 const unsigned char* a,
                                                                 const unsigned char* b, size_t n,
                                                                 const struct nparams* p) {
  __m256 s = _mm256_set1_ps(p->s), dv = _mm256_set1_ps(p->dv);
  size_t i = 0;
  switch (p->eop) {
    case TUTTI_EOP_SUM:
      H8_BINARY(_mm256_add_ps(x, y));
      break;
    case TUTTI_EOP_PROD:
      H8_BINARY(_mm256_mul_ps(x, y));
      break;
    case TUTTI_EOP_MAX:
      H8_BINARY(h8_pick(x, y, _mm256_cmp_ps(y, x, _CMP_GT_OQ)));
      break;
    case TUTTI_EOP_MIN:
      H8_BINARY(h8_pick(x, y, _mm256_cmp_ps(y, x, _CMP_LT_OQ)));
      break;
    case TUTTI_EOP_SUMSCALE:
      H8_BINARY(_mm256_add_ps(x, h8_round(_mm256_mul_ps(y, s))));
      break;
    case TUTTI_EOP_SUMDIV:
      H8_BINARY(_mm256_div_ps(h8_round(_mm256_add_ps(x, y)), dv));
      break;
    case TUTTI_EOP_SCALE:
      H8_UNARY(_mm256_mul_ps(x, s));
      break;
    case TUTTI_EOP_DIV:
      H8_UNARY(_mm256_div_ps(x, dv));
      break;
  }
  return i;
}

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
  return type == ncclFloat16 && use_f16c() ? red_half_f16c(d, a, b, n, p) : 0;
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
      red_half_sw_v0(d, pa, pb, n, &p);
      return;
    case ncclBfloat16:
      RED_CALL(red_bf16, (d, pa, pb, n, &p));
      return;
    case ncclFloat8e4m3:
      RED_CALL(red_e4m3, (d, pa, pb, n, &p));
      return;
    case ncclFloat8e5m2:
      RED_CALL(red_e5m2, (d, pa, pb, n, &p));
      return;
    default:
      return;
  }
}
