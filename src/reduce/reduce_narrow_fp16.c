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

#define PH_TARGET target("avx512fp16,avx512vbmi,avx512f,avx512bw,avx512vl,avx512dq")
#define PH_INL static inline __attribute__((always_inline, PH_TARGET))

/* ---- half: as is; a NaN picked by max / min is quieted, as the float
 * loops' widening does. ---- */
PH_INL __m512h ld_half(const unsigned char* p, size_t i) {
  return _mm512_loadu_ph(p + 2 * i);
}

PH_INL void st_half(unsigned char* p, size_t i, __m512h v) {
  _mm512_storeu_ph(p + 2 * i, v);
}

/* ---- fp8: 64 codes per step, widened to two vectors of 32 half bits by
 * interleaving bytes (the in-lane order of unpack, which the final pack
 * restores). ---- */

/* e4m3's byte tables: the half's low byte by the code's low 6 bits, its high
 * byte by the low 7 (EEEE.MMM -> 0EEEE.MMM0000000; the NaN 1111.111 ->
 * 11111.1110000000, the quiet half NaN). */
struct e4m3_tabs {
  __m512i lo, hi0, hi1;
};

PH_INL struct e4m3_tabs e4m3_tabs(void) {
  static const unsigned char iota[64] = {
      0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
      22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43,
      44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63};
  __m512i i = _mm512_loadu_si512((const void*)iota);
  struct e4m3_tabs t;
  t.lo = _mm512_and_si512(_mm512_slli_epi16(i, 7), _mm512_set1_epi8((char)0x80));
  t.hi0 = _mm512_and_si512(_mm512_srli_epi16(i, 1), _mm512_set1_epi8(0x7f));
  t.hi1 = _mm512_mask_mov_epi8(_mm512_add_epi8(t.hi0, _mm512_set1_epi8(32)), (__mmask64)1 << 63,
                               _mm512_set1_epi8(0x7f));
  return t;
}

PH_INL void dec_e4m3(__m512i q, const struct e4m3_tabs* t, __m512h* lo, __m512h* hi) {
  __m512i l = _mm512_permutexvar_epi8(q, t->lo);
  __m512i h = _mm512_permutex2var_epi8(t->hi0, q, t->hi1);
  h = _mm512_ternarylogic_epi32(h, q, _mm512_set1_epi8((char)0x80), 0xf8); /* h | (q & 0x80) */
  *lo = _mm512_castsi512_ph(_mm512_unpacklo_epi8(l, h));
  *hi = _mm512_castsi512_ph(_mm512_unpackhi_epi8(l, h));
}

/* e5m2 is the high byte. */
PH_INL void dec_e5m2(__m512i q, const struct e4m3_tabs* t, __m512h* lo, __m512h* hi) {
  (void)t;
  *lo = _mm512_castsi512_ph(_mm512_unpacklo_epi8(_mm512_setzero_si512(), q));
  *hi = _mm512_castsi512_ph(_mm512_unpackhi_epi8(_mm512_setzero_si512(), q));
}

/* Rounds the half bits to nearest-even at bit `shift` (the fp8 grid),
 * saturates at `max` (a finite code; inf included) and turns NaN into
 * S.1111111: the code in each 16-bit lane's low byte. */
PH_INL __m512i enc_codes(__m512h v, int shift, short max) {
  __m512i u = _mm512_castph_si512(v);
  __m512i a = _mm512_and_si512(u, _mm512_set1_epi16(0x7fff));
  __mmask32 nan = _mm512_cmpgt_epu16_mask(a, _mm512_set1_epi16(0x7c00));
  __m512i odd = _mm512_and_si512(_mm512_srli_epi16(a, (unsigned)shift), _mm512_set1_epi16(1));
  __m512i half_ulp = _mm512_set1_epi16((short)((1 << (shift - 1)) - 1));
  __m512i r =
      _mm512_srli_epi16(_mm512_add_epi16(_mm512_add_epi16(a, half_ulp), odd), (unsigned)shift);
  r = _mm512_min_epu16(r, _mm512_set1_epi16(max));
  r = _mm512_mask_mov_epi16(r, nan, _mm512_set1_epi16(0x7f));
  /* r | ((u >> 8) & 0x80) */
  return _mm512_ternarylogic_epi32(r, _mm512_srli_epi16(u, 8), _mm512_set1_epi16(0x80), 0xf8);
}

PH_INL __m512i enc_e5m2(__m512h v) {
  return enc_codes(v, 8, 0x7b);
}

PH_INL __m512i enc_e4m3(__m512h v) {
  return enc_codes(v, 7, 0x7e);
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

#define PH_BIN_half(EXPR)                         \
  for (; i + 32 <= n; i += 32) {                  \
    RED_PREFETCH(a, 2 * i);                       \
    RED_PREFETCH(b, 2 * i);                       \
    __m512h x = ld_half(a, i), y = ld_half(b, i); \
    st_half(d, i, (EXPR));                        \
  }

#define PH_BIN8(T, EXPR)                                                \
  for (; i + 64 <= n; i += 64) {                                        \
    RED_PREFETCH(a, i);                                                 \
    RED_PREFETCH(b, i);                                                 \
    __m512h xl, xh, yl, yh;                                             \
    dec_##T(_mm512_loadu_si512((const void*)(a + i)), &tabs, &xl, &xh); \
    dec_##T(_mm512_loadu_si512((const void*)(b + i)), &tabs, &yl, &yh); \
    __m512h x = xl, y = yl;                                             \
    __m512i rl = enc_##T(EXPR);                                         \
    x = xh;                                                             \
    y = yh;                                                             \
    __m512i rh = enc_##T(EXPR);                                         \
    _mm512_storeu_si512((void*)(d + i), _mm512_packus_epi16(rl, rh));   \
  }
#define PH_BIN_e4m3(EXPR) PH_BIN8(e4m3, EXPR)
#define PH_BIN_e5m2(EXPR) PH_BIN8(e5m2, EXPR)

/* Returns how many elements it did: 0 for an op it leaves to the float loops. */
#define PH_KERNEL(T, PROD_TOO)                                                              \
  __attribute__((PH_TARGET)) static size_t ph_##T(unsigned char* d, const unsigned char* a, \
                                                  const unsigned char* b, size_t n,         \
                                                  enum tutti_red_eop eop) {                 \
    size_t i = 0;                                                                           \
    struct e4m3_tabs tabs = e4m3_tabs();                                                    \
    (void)tabs;                                                                             \
    switch (eop) {                                                                          \
      case TUTTI_EOP_SUM:                                                                   \
        PH_BIN_##T(_mm512_add_ph(x, y));                                                    \
        break;                                                                              \
      case TUTTI_EOP_PROD:                                                                  \
        if (PROD_TOO) {                                                                     \
          PH_BIN_##T(_mm512_mul_ph(x, y));                                                  \
        }                                                                                   \
        break;                                                                              \
      case TUTTI_EOP_MAX:                                                                   \
        PH_BIN_##T(ph_pick(x, y, _mm512_cmp_ph_mask(y, x, _CMP_GT_OQ)));                    \
        break;                                                                              \
      case TUTTI_EOP_MIN:                                                                   \
        PH_BIN_##T(ph_pick(x, y, _mm512_cmp_ph_mask(y, x, _CMP_LT_OQ)));                    \
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
