/* AVX-512 loops for the narrow floats: 16 elements widened to float per
 * step, combined, and encoded back with the same rules (and the same bits)
 * as the portable conversions of reduce_impl.h. fp8 decodes through half
 * (e5m2 is a half's top byte; e4m3 is a half's bits scaled by 2^8), so the
 * widening is vcvtph2ps; encoding rounds on the float grid as red_encode does. */
#include <stddef.h>
#include <stdint.h>

#include "reduce/reduce_impl.h"

#if TUTTI_RED_X86
#include <immintrin.h>

#define V4_INL \
  static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl,avx512dq")))

/* For each type T: dec_T widens 16 packed values to floats, enc_T packs 16
 * floats; ld_T / st_T move them from / to element i. */
#define V4_LDST(T, PACKED, LOAD, STORE, W)                         \
  V4_INL __m512 ld_##T(const unsigned char* p, size_t i) {         \
    return dec_##T(LOAD((const PACKED*)(const void*)(p + (W)*i))); \
  }                                                                \
  V4_INL void st_##T(unsigned char* p, size_t i, __m512 v) {       \
    STORE((PACKED*)(void*)(p + (W)*i), enc_##T(v));                \
  }                                                                \
  V4_INL __m512 round_##T(__m512 v) {                              \
    return dec_##T(enc_##T(v));                                    \
  }

/* ---- half ---- */
V4_INL __m512 dec_half(__m256i h) {
  return _mm512_cvtph_ps(h);
}

V4_INL __m256i enc_half(__m512 v) {
  return _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT);
}

/* ---- bfloat16, 32 at a time: a float's top half, so widening interleaves
 * with zeros (the lanes in unpack order, which the pack restores), and
 * rounding is to nearest-even on the bits, a NaN kept quiet (as
 * red_float_to_bf16). ---- */
V4_INL __m512i enc32_bf16(__m512 v) {
  __m512i u = _mm512_castps_si512(v);
  __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff)));
  r = _mm512_srli_epi32(r, 16);
  __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                          _mm512_set1_epi32(0x7f800000));
  return _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
}

V4_INL __m512 round_bf16(__m512 v) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(enc32_bf16(v), 16));
}

V4_INL __m512 bf_lo(__m512i w) {
  return _mm512_castsi512_ps(_mm512_unpacklo_epi16(_mm512_setzero_si512(), w));
}

V4_INL __m512 bf_hi(__m512i w) {
  return _mm512_castsi512_ps(_mm512_unpackhi_epi16(_mm512_setzero_si512(), w));
}

V4_INL __m512i bf_load(const unsigned char* p, size_t i) {
  return _mm512_loadu_si512((const void*)(p + 2 * i));
}

V4_INL void bf_store(unsigned char* p, size_t i, __m512 lo, __m512 hi) {
  _mm512_storeu_si512((void*)(p + 2 * i), _mm512_packus_epi32(enc32_bf16(lo), enc32_bf16(hi)));
}

#define V4_BIN_bf16(EXPR)                           \
  for (; i + 32 <= n; i += 32) {                    \
    RED_PREFETCH(a, 2 * i);                         \
    RED_PREFETCH(b, 2 * i);                         \
    __m512i wa = bf_load(a, i), wb = bf_load(b, i); \
    __m512 x = bf_lo(wa), y = bf_lo(wb);            \
    __m512 lo = (EXPR);                             \
    x = bf_hi(wa);                                  \
    y = bf_hi(wb);                                  \
    bf_store(d, i, lo, (EXPR));                     \
  }

#define V4_UN_bf16(EXPR)         \
  for (; i + 32 <= n; i += 32) { \
    RED_PREFETCH(a, 2 * i);      \
    __m512i wa = bf_load(a, i);  \
    __m512 x = bf_lo(wa);        \
    __m512 lo = (EXPR);          \
    x = bf_hi(wa);               \
    bf_store(d, i, lo, (EXPR));  \
  }

/* ---- fp8: |f| clamped to the saturation value, rounded with red_encode's
 * formula (c = 2^(max(E, Emin) + 23 - mbits) puts a onto the target grid),
 * NaN as S.1111111, the sign put back. ---- */
V4_INL __m128i fp8_encode(__m512 v, int mbits, uint32_t min_eb, uint32_t sat) {
  __m512i u = _mm512_castps_si512(v);
  __m512i a = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
  __mmask16 nan = _mm512_cmpgt_epu32_mask(a, _mm512_set1_epi32(0x7f800000));
  a = _mm512_min_epu32(a, _mm512_set1_epi32((int)sat));
  __m512i eb = _mm512_max_epu32(_mm512_srli_epi32(a, 23), _mm512_set1_epi32((int)min_eb));
  __m512i cb = _mm512_slli_epi32(_mm512_add_epi32(eb, _mm512_set1_epi32(23 - mbits)), 23);
  __m512 sum = _mm512_add_ps(_mm512_castsi512_ps(a), _mm512_castsi512_ps(cb));
  __m512i t = _mm512_sub_epi32(_mm512_castps_si512(sum), cb);
  __m512i e = _mm512_sub_epi32(eb, _mm512_set1_epi32((int)min_eb));
  __m512i r = _mm512_add_epi32(_mm512_slli_epi32(e, mbits), t);
  r = _mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(0x7f));
  r = _mm512_or_si512(r, _mm512_and_si512(_mm512_srli_epi32(u, 24), _mm512_set1_epi32(0x80)));
  return _mm512_cvtepi32_epi8(r);
}

V4_INL __m512 dec_e5m2(__m128i q) {
  return _mm512_cvtph_ps(_mm256_slli_epi16(_mm256_cvtepu8_epi16(q), 8));
}

V4_INL __m128i enc_e5m2(__m512 v) {
  return fp8_encode(v, 2, 113, 0x47600000u);
}

/* S.EEEE.MMM as the half S.0EEEE.MMM0000000 is the value times 2^-8,
 * subnormals included; S.1111.111, the NaN, becomes the quiet half NaN
 * 0x7f80, which widens to the float red_e4m3_to_float gives. */
V4_INL __m512 dec_e4m3(__m128i q) {
  __m256i w = _mm256_cvtepu8_epi16(q);
  __m256i h = _mm256_or_si256(_mm256_and_si256(_mm256_slli_epi16(w, 8), _mm256_set1_epi16(-0x8000)),
                              _mm256_and_si256(_mm256_slli_epi16(w, 7), _mm256_set1_epi16(0x3f80)));
  __mmask16 nan = _mm256_cmpeq_epi16_mask(_mm256_and_si256(w, _mm256_set1_epi16(0x7f)),
                                          _mm256_set1_epi16(0x7f));
  h = _mm256_mask_mov_epi16(h, nan, _mm256_or_si256(h, _mm256_set1_epi16(0x4000)));
  return _mm512_mul_ps(_mm512_cvtph_ps(h), _mm512_set1_ps(256.0f));
}

V4_INL __m128i enc_e4m3(__m512 v) {
  return fp8_encode(v, 3, 121, 0x43e00000u);
}

V4_LDST(half, __m256i, _mm256_loadu_si256, _mm256_storeu_si256, 2)
V4_LDST(e5m2, __m128i, _mm_loadu_si128, _mm_storeu_si128, 1)
V4_LDST(e4m3, __m128i, _mm_loadu_si128, _mm_storeu_si128, 1)

/* Max / min with the FMAX / FMIN rules: a NaN wins, a's first; ties keep a. */
V4_INL __m512 v4_pick(__m512 x, __m512 y, __mmask16 y_wins) {
  __mmask16 take =
      (y_wins | _mm512_cmp_ps_mask(y, y, _CMP_UNORD_Q)) & _mm512_cmp_ps_mask(x, x, _CMP_ORD_Q);
  return _mm512_mask_blend_ps(take, x, y);
}

#define V4_BINARY(T, EXPR)                     \
  for (; i + 16 <= n; i += 16) {               \
    RED_PREFETCH(a, RED_W_##T* i);             \
    RED_PREFETCH(b, RED_W_##T* i);             \
    __m512 x = ld_##T(a, i), y = ld_##T(b, i); \
    st_##T(d, i, (EXPR));                      \
  }

#define V4_UNARY(T, EXPR)          \
  for (; i + 16 <= n; i += 16) {   \
    RED_PREFETCH(a, RED_W_##T* i); \
    __m512 x = ld_##T(a, i);       \
    st_##T(d, i, (EXPR));          \
  }

#define V4_BIN_half(EXPR) V4_BINARY(half, EXPR)
#define V4_UN_half(EXPR) V4_UNARY(half, EXPR)
#define V4_BIN_e4m3(EXPR) V4_BINARY(e4m3, EXPR)
#define V4_UN_e4m3(EXPR) V4_UNARY(e4m3, EXPR)
#define V4_BIN_e5m2(EXPR) V4_BINARY(e5m2, EXPR)
#define V4_UN_e5m2(EXPR) V4_UNARY(e5m2, EXPR)

/* round_T: the intermediate roundings of SUMSCALE and SUMDIV, as the
 * portable loops do them. */
#define V4_KERNEL(T)                                                                  \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq"))) static size_t v4_##T( \
      unsigned char* d, const unsigned char* a, const unsigned char* b, size_t n,     \
      enum tutti_red_eop eop, float sv, float dvv) {                                  \
    __m512 s = _mm512_set1_ps(sv), dv = _mm512_set1_ps(dvv);                          \
    size_t i = 0;                                                                     \
    switch (eop) {                                                                    \
      case TUTTI_EOP_SUM:                                                             \
        V4_BIN_##T(_mm512_add_ps(x, y));                                              \
        break;                                                                        \
      case TUTTI_EOP_PROD:                                                            \
        V4_BIN_##T(_mm512_mul_ps(x, y));                                              \
        break;                                                                        \
      case TUTTI_EOP_MAX:                                                             \
        V4_BIN_##T(v4_pick(x, y, _mm512_cmp_ps_mask(y, x, _CMP_GT_OQ)));              \
        break;                                                                        \
      case TUTTI_EOP_MIN:                                                             \
        V4_BIN_##T(v4_pick(x, y, _mm512_cmp_ps_mask(y, x, _CMP_LT_OQ)));              \
        break;                                                                        \
      case TUTTI_EOP_SUMSCALE:                                                        \
        V4_BIN_##T(_mm512_add_ps(x, round_##T(_mm512_mul_ps(y, s))));                 \
        break;                                                                        \
      case TUTTI_EOP_SUMDIV:                                                          \
        V4_BIN_##T(_mm512_div_ps(round_##T(_mm512_add_ps(x, y)), dv));                \
        break;                                                                        \
      case TUTTI_EOP_SCALE:                                                           \
        V4_UN_##T(_mm512_mul_ps(x, s));                                               \
        break;                                                                        \
      case TUTTI_EOP_DIV:                                                             \
        V4_UN_##T(_mm512_div_ps(x, dv));                                              \
        break;                                                                        \
    }                                                                                 \
    return i;                                                                         \
  }

V4_KERNEL(half)
V4_KERNEL(bf16)
V4_KERNEL(e4m3)
V4_KERNEL(e5m2)

size_t tutti_reduce_narrow_avx512(unsigned char* d, const unsigned char* a, const unsigned char* b,
                                  size_t n, ncclDataType_t type, enum tutti_red_eop eop, float s,
                                  float dv) {
  switch (type) {
    case ncclFloat16:
      return v4_half(d, a, b, n, eop, s, dv);
    case ncclBfloat16:
      return v4_bf16(d, a, b, n, eop, s, dv);
    case ncclFloat8e4m3:
      return v4_e4m3(d, a, b, n, eop, s, dv);
    case ncclFloat8e5m2:
      return v4_e5m2(d, a, b, n, eop, s, dv);
    default:
      return 0;
  }
}
#endif
