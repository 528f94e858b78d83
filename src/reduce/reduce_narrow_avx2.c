/* AVX2 (and F16C) loops for the narrow floats, for CPUs without AVX-512:
 * 8 elements (bfloat16 16) widened to float per step, combined, and encoded back with
 * the same rules (and the same bits) as the portable conversions of
 * reduce_impl.h. fp8 decodes through half (vcvtph2ps), as the AVX-512 loops
 * do; encoding rounds on the float grid as red_encode does. */
#include <stddef.h>
#include <stdint.h>

#include "reduce/reduce_impl.h"

#if TUTTI_RED_X86
#include <immintrin.h>

#define V3_TARGET target("avx2,f16c")
#define V3_INL static inline __attribute__((always_inline, V3_TARGET))

/* For each type T: dec_T widens 8 packed values (16-bit codes in a vector
 * of 128 bits, or fp8 codes in its low 64 bits) to floats, enc_T packs 8
 * floats; ld_T / st_T move them from / to element i. */
#define V3_LDST(T, LOAD, STORE, W)                           \
  V3_INL __m256 ld_##T(const unsigned char* p, size_t i) {   \
    return dec_##T(LOAD((const void*)(p + (W)*i)));          \
  }                                                          \
  V3_INL void st_##T(unsigned char* p, size_t i, __m256 v) { \
    STORE((void*)(p + (W)*i), enc_##T(v));                   \
  }                                                          \
  V3_INL __m256 round_##T(__m256 v) {                        \
    return dec_##T(enc_##T(v));                              \
  }

V3_INL __m128i ld128(const void* p) {
  return _mm_loadu_si128((const __m128i*)p);
}

V3_INL void st128(void* p, __m128i v) {
  _mm_storeu_si128((__m128i*)p, v);
}

V3_INL __m128i ld64(const void* p) {
  return _mm_loadl_epi64((const __m128i*)p);
}

V3_INL void st64(void* p, __m128i v) {
  _mm_storel_epi64((__m128i*)p, v);
}

/* Eight 32-bit lanes holding values below 2^16 to eight 16-bit ones. */
V3_INL __m128i pack16(__m256i r) {
  return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
}

/* ---- half ---- */
V3_INL __m256 dec_half(__m128i h) {
  return _mm256_cvtph_ps(h);
}

V3_INL __m128i enc_half(__m256 v) {
  return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT);
}

/* ---- bfloat16, 16 at a time: a float's top half, so widening interleaves
 * with zeros (the lanes in unpack order, which the pack restores), and
 * rounding is to nearest-even on the bits, a NaN kept quiet (as
 * red_float_to_bf16). ---- */
V3_INL __m256i enc32_bf16(__m256 v) {
  __m256i u = _mm256_castps_si256(v);
  __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7fff)));
  r = _mm256_srli_epi32(r, 16);
  /* |u| fits a signed compare. */
  __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                   _mm256_set1_epi32(0x7f800000));
  __m256i q = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  return _mm256_blendv_epi8(r, q, nan);
}

V3_INL __m256 round_bf16(__m256 v) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(enc32_bf16(v), 16));
}

V3_INL __m256 bf_lo(__m256i w) {
  return _mm256_castsi256_ps(_mm256_unpacklo_epi16(_mm256_setzero_si256(), w));
}

V3_INL __m256 bf_hi(__m256i w) {
  return _mm256_castsi256_ps(_mm256_unpackhi_epi16(_mm256_setzero_si256(), w));
}

V3_INL __m256i bf_load(const unsigned char* p, size_t i) {
  return _mm256_loadu_si256((const __m256i*)(const void*)(p + 2 * i));
}

V3_INL void bf_store(unsigned char* p, size_t i, __m256 lo, __m256 hi) {
  _mm256_storeu_si256((__m256i*)(void*)(p + 2 * i),
                      _mm256_packus_epi32(enc32_bf16(lo), enc32_bf16(hi)));
}

#define V3_BIN_bf16(EXPR)                           \
  for (; i + 16 <= n; i += 16) {                    \
    RED_PREFETCH(a, 2 * i);                         \
    RED_PREFETCH(b, 2 * i);                         \
    __m256i wa = bf_load(a, i), wb = bf_load(b, i); \
    __m256 x = bf_lo(wa), y = bf_lo(wb);            \
    __m256 lo = (EXPR);                             \
    x = bf_hi(wa);                                  \
    y = bf_hi(wb);                                  \
    bf_store(d, i, lo, (EXPR));                     \
  }

#define V3_UN_bf16(EXPR)         \
  for (; i + 16 <= n; i += 16) { \
    RED_PREFETCH(a, 2 * i);      \
    __m256i wa = bf_load(a, i);  \
    __m256 x = bf_lo(wa);        \
    __m256 lo = (EXPR);          \
    x = bf_hi(wa);               \
    bf_store(d, i, lo, (EXPR));  \
  }

/* ---- fp8: |f| clamped to the saturation value, rounded with red_encode's
 * formula, NaN as S.1111111, the sign put back; the codes in the low 64
 * bits. ---- */
V3_INL __m128i fp8_encode(__m256 v, int mbits, uint32_t min_eb, uint32_t sat) {
  __m256i u = _mm256_castps_si256(v);
  __m256i a = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
  __m256i nan = _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7f800000));
  a = _mm256_min_epu32(a, _mm256_set1_epi32((int)sat));
  __m256i eb = _mm256_max_epu32(_mm256_srli_epi32(a, 23), _mm256_set1_epi32((int)min_eb));
  __m256i cb = _mm256_slli_epi32(_mm256_add_epi32(eb, _mm256_set1_epi32(23 - mbits)), 23);
  __m256 sum = _mm256_add_ps(_mm256_castsi256_ps(a), _mm256_castsi256_ps(cb));
  __m256i t = _mm256_sub_epi32(_mm256_castps_si256(sum), cb);
  __m256i e = _mm256_sub_epi32(eb, _mm256_set1_epi32((int)min_eb));
  __m256i r = _mm256_add_epi32(_mm256_slli_epi32(e, mbits), t);
  r = _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7f), nan);
  r = _mm256_or_si256(r, _mm256_and_si256(_mm256_srli_epi32(u, 24), _mm256_set1_epi32(0x80)));
  __m128i w = pack16(r);
  return _mm_packus_epi16(w, w);
}

V3_INL __m256 dec_e5m2(__m128i q) {
  return _mm256_cvtph_ps(_mm_slli_epi16(_mm_cvtepu8_epi16(q), 8));
}

V3_INL __m128i enc_e5m2(__m256 v) {
  return fp8_encode(v, 2, 113, 0x47600000u);
}

/* The half S.0EEEE.MMM0000000 is the e4m3 value times 2^-8, subnormals
 * included: w << 7 puts EEEE.MMM at bits 7-13 and the sign at bit 14, and
 * adding bit 14 to itself moves the sign to bit 15. The NaN S.1111.111
 * becomes the quiet half NaN S.11111.1110000000, which widens to the float
 * red_e4m3_to_float gives. */
V3_INL __m256 dec_e4m3(__m128i q) {
  __m128i h = _mm_slli_epi16(_mm_cvtepu8_epi16(q), 7);
  h = _mm_add_epi16(h, _mm_and_si128(h, _mm_set1_epi16(0x4000)));
  __m128i nan = _mm_cmpeq_epi16(_mm_and_si128(h, _mm_set1_epi16(0x7fff)), _mm_set1_epi16(0x3f80));
  h = _mm_add_epi16(h, _mm_and_si128(nan, _mm_set1_epi16(0x4000)));
  return _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(256.0f));
}

V3_INL __m128i enc_e4m3(__m256 v) {
  return fp8_encode(v, 3, 121, 0x43e00000u);
}

V3_LDST(half, ld128, st128, 2)
V3_LDST(e5m2, ld64, st64, 1)
V3_LDST(e4m3, ld64, st64, 1)

/* Max / min with the FMAX / FMIN rules: a NaN wins, a's first; ties keep a. */
V3_INL __m256 v3_pick(__m256 x, __m256 y, __m256 y_wins) {
  __m256 r = _mm256_blendv_ps(x, y, y_wins);
  r = _mm256_blendv_ps(r, y, _mm256_cmp_ps(y, y, _CMP_UNORD_Q));
  return _mm256_blendv_ps(r, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

#define V3_BINARY(T, EXPR)                     \
  for (; i + 8 <= n; i += 8) {                 \
    RED_PREFETCH(a, RED_W_##T* i);             \
    RED_PREFETCH(b, RED_W_##T* i);             \
    __m256 x = ld_##T(a, i), y = ld_##T(b, i); \
    st_##T(d, i, (EXPR));                      \
  }

#define V3_UNARY(T, EXPR)          \
  for (; i + 8 <= n; i += 8) {     \
    RED_PREFETCH(a, RED_W_##T* i); \
    __m256 x = ld_##T(a, i);       \
    st_##T(d, i, (EXPR));          \
  }

#define V3_BIN_half(EXPR) V3_BINARY(half, EXPR)
#define V3_UN_half(EXPR) V3_UNARY(half, EXPR)
#define V3_BIN_e4m3(EXPR) V3_BINARY(e4m3, EXPR)
#define V3_UN_e4m3(EXPR) V3_UNARY(e4m3, EXPR)
#define V3_BIN_e5m2(EXPR) V3_BINARY(e5m2, EXPR)
#define V3_UN_e5m2(EXPR) V3_UNARY(e5m2, EXPR)

/* round_T: the intermediate roundings of SUMSCALE and SUMDIV, as the
 * portable loops do them. */
#define V3_KERNEL(T)                                                                             \
  __attribute__((V3_TARGET)) static size_t v3_##T(unsigned char* d, const unsigned char* a,      \
                                                  const unsigned char* b, size_t n,              \
                                                  enum tutti_red_eop eop, float sv, float dvv) { \
    __m256 s = _mm256_set1_ps(sv), dv = _mm256_set1_ps(dvv);                                     \
    size_t i = 0;                                                                                \
    switch (eop) {                                                                               \
      case TUTTI_EOP_SUM:                                                                        \
        V3_BIN_##T(_mm256_add_ps(x, y));                                                         \
        break;                                                                                   \
      case TUTTI_EOP_PROD:                                                                       \
        V3_BIN_##T(_mm256_mul_ps(x, y));                                                         \
        break;                                                                                   \
      case TUTTI_EOP_MAX:                                                                        \
        V3_BIN_##T(v3_pick(x, y, _mm256_cmp_ps(y, x, _CMP_GT_OQ)));                              \
        break;                                                                                   \
      case TUTTI_EOP_MIN:                                                                        \
        V3_BIN_##T(v3_pick(x, y, _mm256_cmp_ps(y, x, _CMP_LT_OQ)));                              \
        break;                                                                                   \
      case TUTTI_EOP_SUMSCALE:                                                                   \
        V3_BIN_##T(_mm256_add_ps(x, round_##T(_mm256_mul_ps(y, s))));                            \
        break;                                                                                   \
      case TUTTI_EOP_SUMDIV:                                                                     \
        V3_BIN_##T(_mm256_div_ps(round_##T(_mm256_add_ps(x, y)), dv));                           \
        break;                                                                                   \
      case TUTTI_EOP_SCALE:                                                                      \
        V3_UN_##T(_mm256_mul_ps(x, s));                                                          \
        break;                                                                                   \
      case TUTTI_EOP_DIV:                                                                        \
        V3_UN_##T(_mm256_div_ps(x, dv));                                                         \
        break;                                                                                   \
    }                                                                                            \
    return i;                                                                                    \
  }

V3_KERNEL(half)
V3_KERNEL(bf16)
V3_KERNEL(e4m3)
V3_KERNEL(e5m2)

size_t tutti_reduce_narrow_avx2(unsigned char* d, const unsigned char* a, const unsigned char* b,
                                size_t n, ncclDataType_t type, enum tutti_red_eop eop, float s,
                                float dv) {
  switch (type) {
    case ncclFloat16:
      return v3_half(d, a, b, n, eop, s, dv);
    case ncclBfloat16:
      return v3_bf16(d, a, b, n, eop, s, dv);
    case ncclFloat8e4m3:
      return v3_e4m3(d, a, b, n, eop, s, dv);
    case ncclFloat8e5m2:
      return v3_e5m2(d, a, b, n, eop, s, dv);
    default:
      return 0;
  }
}
#endif
