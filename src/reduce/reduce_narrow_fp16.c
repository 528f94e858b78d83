/* AVX512-FP16 loops: sums, max and min of half and fp8 computed in half
 * precision, 32 elements per instruction, with no widening to float.
 *
 * Why the result is the same as through float: a half sum or product is
 * rounded once, correctly, like the float result rounded to half (a float
 * product of two halves is exact; for sums float has >= 2p + 2 bits, so its
 * rounding does not change the final one). An fp8 sum is first rounded to
 * half, which has >= 2p + 1 bits for both fp8 formats, so rounding that half
 * to fp8 gives the correctly rounded fp8 sum, which is what float gives too;
 * sums in half's subnormal range are exact. Max and min pick a value.
 * e5m2 is a half's top byte; e4m3 is carried as its value times 2^-8
 * (S.EEEE.MMM -> the half S.0EEEE.MMM0000000), which keeps its subnormals
 * normal-or-exact in half and maps its grid onto half bits 7 and up.
 * Products of fp8, the scaled and divided ops stay on the float loops. */
#include <stddef.h>
#include <stdint.h>

#include "reduce/reduce_impl.h"

#if TUTTI_RED_X86
#include <immintrin.h>

#define PH_TARGET target("avx512fp16,avx512f,avx512bw,avx512vl,avx512dq")
#define PH_INL static inline __attribute__((always_inline, PH_TARGET))

/* ---- half: as is; a NaN picked by max / min is quieted, as the float
 * loops' widening does. ---- */
PH_INL __m512h ld_half(const unsigned char* p, size_t i) {
  return _mm512_loadu_ph(p + 2 * i);
}

PH_INL void st_half(unsigned char* p, size_t i, __m512h v) {
  _mm512_storeu_ph(p + 2 * i, v);
}

/* ---- fp8: 32 codes widened to 16-bit lanes. ---- */
PH_INL __m512i ld_codes(const unsigned char* p, size_t i) {
  return _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i*)(const void*)(p + i)));
}

/* Rounds the half bits u to nearest-even at bit `shift` (the fp8 grid),
 * saturates at `max` (a finite code; inf included) and turns NaN into
 * S.1111111. */
PH_INL void st_codes(unsigned char* p, size_t i, __m512h v, int shift, short max) {
  __m512i u = _mm512_castph_si512(v);
  __m512i a = _mm512_and_si512(u, _mm512_set1_epi16(0x7fff));
  __mmask32 nan = _mm512_cmpgt_epu16_mask(a, _mm512_set1_epi16(0x7c00));
  __m512i odd = _mm512_and_si512(_mm512_srli_epi16(a, (unsigned)shift), _mm512_set1_epi16(1));
  __m512i half_ulp = _mm512_set1_epi16((short)((1 << (shift - 1)) - 1));
  __m512i r =
      _mm512_srli_epi16(_mm512_add_epi16(_mm512_add_epi16(a, half_ulp), odd), (unsigned)shift);
  r = _mm512_min_epu16(r, _mm512_set1_epi16(max));
  r = _mm512_mask_mov_epi16(r, nan, _mm512_set1_epi16(0x7f));
  r = _mm512_or_si512(r, _mm512_and_si512(_mm512_srli_epi16(u, 8), _mm512_set1_epi16(0x80)));
  _mm256_storeu_si256((__m256i*)(void*)(p + i), _mm512_cvtepi16_epi8(r));
}

PH_INL __m512h ld_e5m2(const unsigned char* p, size_t i) {
  return _mm512_castsi512_ph(_mm512_slli_epi16(ld_codes(p, i), 8));
}

PH_INL void st_e5m2(unsigned char* p, size_t i, __m512h v) {
  st_codes(p, i, v, 8, 0x7b);
}

/* w << 7 puts EEEE.MMM at bits 7-13 and the sign at bit 14; adding bit 14
 * to itself moves the sign to bit 15. The NaN S.1111.111 becomes the half
 * NaN S.11111.1110000000. */
PH_INL __m512h ld_e4m3(const unsigned char* p, size_t i) {
  __m512i h = _mm512_slli_epi16(ld_codes(p, i), 7);
  h = _mm512_add_epi16(h, _mm512_and_si512(h, _mm512_set1_epi16(0x4000)));
  __mmask32 nan = _mm512_cmpeq_epi16_mask(_mm512_and_si512(h, _mm512_set1_epi16(0x7fff)),
                                          _mm512_set1_epi16(0x3f80));
  h = _mm512_mask_add_epi16(h, nan, h, _mm512_set1_epi16(0x4000));
  return _mm512_castsi512_ph(h);
}

PH_INL void st_e4m3(unsigned char* p, size_t i, __m512h v) {
  st_codes(p, i, v, 7, 0x7e);
}

/* Max / min with the FMAX / FMIN rules (a NaN wins, a's first; ties keep
 * a); a NaN comes out quiet. */
PH_INL __m512h ph_pick(__m512h x, __m512h y, __mmask32 y_wins) {
  __mmask32 take =
      (y_wins | _mm512_cmp_ph_mask(y, y, _CMP_UNORD_Q)) & _mm512_cmp_ph_mask(x, x, _CMP_ORD_Q);
  __m512i r = _mm512_castph_si512(_mm512_mask_blend_ph(take, x, y));
  __mmask32 nan = _mm512_cmpgt_epu16_mask(_mm512_and_si512(r, _mm512_set1_epi16(0x7fff)),
                                          _mm512_set1_epi16(0x7c00));
  r = _mm512_mask_mov_epi16(r, nan, _mm512_or_si512(r, _mm512_set1_epi16(0x200)));
  return _mm512_castsi512_ph(r);
}

#define PH_BINARY(T, EXPR)                      \
  for (; i + 32 <= n; i += 32) {                \
    RED_PREFETCH(a, RED_W_##T* i);              \
    RED_PREFETCH(b, RED_W_##T* i);              \
    __m512h x = ld_##T(a, i), y = ld_##T(b, i); \
    st_##T(d, i, (EXPR));                       \
  }

/* Returns how many elements it did: 0 for an op it leaves to the float loops. */
#define PH_KERNEL(T, PROD_TOO)                                                              \
  __attribute__((PH_TARGET)) static size_t ph_##T(unsigned char* d, const unsigned char* a, \
                                                  const unsigned char* b, size_t n,         \
                                                  enum tutti_red_eop eop) {                 \
    size_t i = 0;                                                                           \
    switch (eop) {                                                                          \
      case TUTTI_EOP_SUM:                                                                   \
        PH_BINARY(T, _mm512_add_ph(x, y));                                                  \
        break;                                                                              \
      case TUTTI_EOP_PROD:                                                                  \
        if (PROD_TOO) {                                                                     \
          PH_BINARY(T, _mm512_mul_ph(x, y));                                                \
        }                                                                                   \
        break;                                                                              \
      case TUTTI_EOP_MAX:                                                                   \
        PH_BINARY(T, ph_pick(x, y, _mm512_cmp_ph_mask(y, x, _CMP_GT_OQ)));                  \
        break;                                                                              \
      case TUTTI_EOP_MIN:                                                                   \
        PH_BINARY(T, ph_pick(x, y, _mm512_cmp_ph_mask(y, x, _CMP_LT_OQ)));                  \
        break;                                                                              \
      default:                                                                              \
        break;                                                                              \
    }                                                                                       \
    return i;                                                                               \
  }

PH_KERNEL(half, 1)
PH_KERNEL(e4m3, 0)
PH_KERNEL(e5m2, 0)

size_t tutti_reduce_narrow_fp16(unsigned char* d, const unsigned char* a, const unsigned char* b,
                                size_t n, ncclDataType_t type, enum tutti_red_eop eop) {
  switch (type) {
    case ncclFloat16:
      return ph_half(d, a, b, n, eop);
    case ncclFloat8e4m3:
      return ph_e4m3(d, a, b, n, eop);
    case ncclFloat8e5m2:
      return ph_e5m2(d, a, b, n, eop);
    default:
      return 0;
  }
}
#endif
