/* Copies that bypass the caches (tutti_copy_stream). A plain copy into a
 * line that is not cached first reads the line, then overwrites it: a third
 * of its memory traffic is that read. Streaming stores write whole lines
 * without it, and do not push the data the copy reads out of the caches;
 * for outputs larger than the caches that makes copies ~1.3x faster here
 * (docs/history/results-diary.md, "Decisions"), for outputs that fit it would only evict them. */
#include <string.h>

#include "reduce/reduce_impl.h"

#if TUTTI_RED_X86
#include <immintrin.h>

/* Bytes before dst is aligned to `align`. */
static inline size_t head_of(const void* dst, size_t align, size_t bytes) {
  size_t h = (align - ((uintptr_t)dst & (align - 1))) & (align - 1);
  return h < bytes ? h : bytes;
}

__attribute__((target("avx512f"))) static void stream_v4(char* d, const char* s, size_t bytes) {
  size_t i = 0;
  for (; i + 256 <= bytes; i += 256) {
    RED_PREFETCH(s, i);
    RED_PREFETCH(s, i + 64);
    RED_PREFETCH(s, i + 128);
    RED_PREFETCH(s, i + 192);
    __m512i a = _mm512_loadu_si512(s + i), b = _mm512_loadu_si512(s + i + 64);
    __m512i c = _mm512_loadu_si512(s + i + 128), e = _mm512_loadu_si512(s + i + 192);
    _mm512_stream_si512((void*)(d + i), a);
    _mm512_stream_si512((void*)(d + i + 64), b);
    _mm512_stream_si512((void*)(d + i + 128), c);
    _mm512_stream_si512((void*)(d + i + 192), e);
  }
  _mm_sfence();
  memcpy(d + i, s + i, bytes - i);
}

__attribute__((target("avx2"))) static void stream_v3(char* d, const char* s, size_t bytes) {
  size_t i = 0;
  for (; i + 128 <= bytes; i += 128) {
    RED_PREFETCH(s, i);
    RED_PREFETCH(s, i + 64);
    __m256i a = _mm256_loadu_si256((const __m256i*)(s + i));
    __m256i b = _mm256_loadu_si256((const __m256i*)(s + i + 32));
    __m256i c = _mm256_loadu_si256((const __m256i*)(s + i + 64));
    __m256i e = _mm256_loadu_si256((const __m256i*)(s + i + 96));
    _mm256_stream_si256((__m256i*)(d + i), a);
    _mm256_stream_si256((__m256i*)(d + i + 32), b);
    _mm256_stream_si256((__m256i*)(d + i + 64), c);
    _mm256_stream_si256((__m256i*)(d + i + 96), e);
  }
  _mm_sfence();
  memcpy(d + i, s + i, bytes - i);
}
#endif

void tutti_copy_stream(void* dst, const void* src, size_t bytes) {
#if TUTTI_RED_X86
  const int isa = red_isa();
  if (isa >= 1 && bytes >= 4096) {
    const size_t h = head_of(dst, 64, bytes);
    memcpy(dst, src, h);
    char* d = (char*)dst + h;
    const char* s = (const char*)src + h;
    if (isa >= 2) {
      stream_v4(d, s, bytes - h);
    } else {
      stream_v3(d, s, bytes - h);
    }
    return;
  }
#endif
  memcpy(dst, src, bytes);
}
