/* Element-wise reductions on host memory for every ncclDataType_t x op.
 * Half, bfloat16 and fp8 values are widened to float, combined and rounded
 * back to nearest-even (fp8: saturating to the largest finite value, NaN kept),
 * which gives the correctly rounded result of the narrow type. */
#ifndef TUTTI_REDUCE_REDUCE_H
#define TUTTI_REDUCE_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

enum tutti_red_kind {
  TUTTI_RED_SUM = 0,
  TUTTI_RED_PROD,
  TUTTI_RED_MAX,
  TUTTI_RED_MIN,
  TUTTI_RED_PREMULSUM, /* sum of (x * scalar); ncclAvg on floating types, PreMulSum ops */
  TUTTI_RED_SUMPOSTDIV /* sum, then the final result divided by `divisor`; ncclAvg on integers */
};

/* A reduction resolved for one collective call. */
struct tutti_redop {
  ncclDataType_t type;
  enum tutti_red_kind kind;
  /* PREMULSUM: the scalar, as a value of `type` stored in the low bytes. */
  union {
    double f64;
    float f32;
    uint64_t u64;
    int64_t i64;
    uint32_t u32;
    int32_t i32;
    uint16_t u16;
    uint8_t u8;
  } scalar;
  uint64_t divisor; /* SUMPOSTDIV: nranks */
};

/* Flags of tutti_reduce / tutti_copy. */
#define TUTTI_RED_SCALE_B \
  0x1 /* `b` (or `src`) is user input: multiply by the PREMULSUM scalar first */
#define TUTTI_RED_FINAL 0x2 /* the result is final: apply the SUMPOSTDIV division */

size_t tutti_type_size(ncclDataType_t type);
const char* tutti_type_name(ncclDataType_t type);
const char* tutti_red_name(enum tutti_red_kind kind);

/* dst[i] = a[i] OP b'[i] for i < n elements, where b' is b scaled when
 * TUTTI_RED_SCALE_B; then divided when TUTTI_RED_FINAL and kind is SUMPOSTDIV.
 * dst may alias a or b exactly; no other overlap. Pointers need no alignment. */
void tutti_reduce(void* dst, const void* a, const void* b, size_t n, const struct tutti_redop* op,
                  int flags);

/* dst[i] = src'[i]: a memcpy unless a flag asks for scaling or the final division. */
void tutti_copy(void* dst, const void* src, size_t n, const struct tutti_redop* op, int flags);

/* memcpy with streaming stores where the CPU has them: for copies into
 * outputs larger than the caches (src/reduce/copy_stream.c). No overlap. */
void tutti_copy_stream(void* dst, const void* src, size_t bytes);

/* Conversions used by the reductions and by tests' references. */
float tutti_half_to_float(uint16_t h);
uint16_t tutti_float_to_half(float f);
float tutti_bf16_to_float(uint16_t h);
uint16_t tutti_float_to_bf16(float f);
float tutti_e4m3_to_float(uint8_t v);
uint8_t tutti_float_to_e4m3(float f);
float tutti_e5m2_to_float(uint8_t v);
uint8_t tutti_float_to_e5m2(float f);

#endif
