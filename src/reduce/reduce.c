/* The dispatch of tutti_reduce / tutti_copy, and the loops for the
 * integer, float and double types (narrow floats: reduce_narrow.c; type
 * and op names: names.c). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "reduce/reduce_impl.h"
#include "util/log.h"

/* Integers wrap: the arithmetic is done in the unsigned type U (no signed
 * overflow UB) and converted back; only ordering and division use T's sign.
 * Division truncates toward zero, as NCCL's FuncSumPostDiv does. */
#define SIGNED_DIV(T, v) ((T)((int64_t)(v) / sdiv))
#define UNSIGNED_DIV(T, v) ((T)((uint64_t)(v) / div))

#define INT_KERNEL(SUF, ATTR, NAME, T, U, DIV)                                                    \
  ATTR static void red_##NAME##SUF(unsigned char* d, const unsigned char* a,                      \
                                   const unsigned char* b, size_t n, enum tutti_red_eop eop, U s, \
                                   uint64_t div) {                                                \
    /* Clamped so INT64_MIN / sdiv cannot overflow. */                                            \
    int64_t sdiv = div > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)div;                          \
    (void)sdiv;                                                                                   \
    switch (eop) {                                                                                \
      case TUTTI_EOP_SUM:                                                                         \
        BINARY(NAME, T, (T)((U)x + (U)y));                                                        \
        break;                                                                                    \
      case TUTTI_EOP_PROD:                                                                        \
        BINARY(NAME, T, (T)((U)x * (U)y));                                                        \
        break;                                                                                    \
      case TUTTI_EOP_MAX:                                                                         \
        BINARY(NAME, T, y > x ? y : x);                                                           \
        break;                                                                                    \
      case TUTTI_EOP_MIN:                                                                         \
        BINARY(NAME, T, y < x ? y : x);                                                           \
        break;                                                                                    \
      case TUTTI_EOP_SUMSCALE:                                                                    \
        BINARY(NAME, T, (T)((U)x + (U)((U)y * s)));                                               \
        break;                                                                                    \
      case TUTTI_EOP_SUMDIV:                                                                      \
        BINARY(NAME, T, DIV(T, (T)((U)x + (U)y)));                                                \
        break;                                                                                    \
      case TUTTI_EOP_SCALE:                                                                       \
        UNARY(NAME, T, (T)((U)x * s));                                                            \
        break;                                                                                    \
      case TUTTI_EOP_DIV:                                                                         \
        UNARY(NAME, T, DIV(T, x));                                                                \
        break;                                                                                    \
    }                                                                                             \
  }

#define INT_TYPE(NAME, T, U, DIV) \
  LDST(NAME, T)                   \
  RED_VERSIONS(INT_KERNEL, NAME, T, U, DIV)

INT_TYPE(i8, int8_t, uint8_t, SIGNED_DIV)
INT_TYPE(u8, uint8_t, uint8_t, UNSIGNED_DIV)
INT_TYPE(i32, int32_t, uint32_t, SIGNED_DIV)
INT_TYPE(u32, uint32_t, uint32_t, UNSIGNED_DIV)
INT_TYPE(i64, int64_t, uint64_t, SIGNED_DIV)
INT_TYPE(u64, uint64_t, uint64_t, UNSIGNED_DIV)

/* Block for a + b * s: the products go through memory so that no compiler
 * contracts them into an FMA (gnu11 allows GCC to), keeping the product rounded
 * on its own as on the GPU; the local blocks alias nothing, so no alias checks. */
#define SCALE_BLK 512

#define FLOAT_KERNEL(SUF, ATTR, NAME, T)                                                          \
  ATTR static void red_##NAME##SUF(unsigned char* d, const unsigned char* a,                      \
                                   const unsigned char* b, size_t n, enum tutti_red_eop eop, T s, \
                                   uint64_t div) {                                                \
    T dv = (T)div;                                                                                \
    switch (eop) {                                                                                \
      case TUTTI_EOP_SUM:                                                                         \
        BINARY(NAME, T, x + y);                                                                   \
        break;                                                                                    \
      case TUTTI_EOP_PROD:                                                                        \
        BINARY(NAME, T, x* y);                                                                    \
        break;                                                                                    \
      case TUTTI_EOP_MAX:                                                                         \
        BINARY(NAME, T, FMAX(x, y));                                                              \
        break;                                                                                    \
      case TUTTI_EOP_MIN:                                                                         \
        BINARY(NAME, T, FMIN(x, y));                                                              \
        break;                                                                                    \
      case TUTTI_EOP_SUMSCALE:                                                                    \
        for (size_t off = 0; off < n; off += SCALE_BLK) {                                         \
          T t[SCALE_BLK], u[SCALE_BLK];                                                           \
          size_t m = n - off < SCALE_BLK ? n - off : SCALE_BLK;                                   \
          for (size_t i = 0; i < m; i++) {                                                        \
            t[i] = ld_##NAME(b, off + i) * s;                                                     \
          }                                                                                       \
          for (size_t i = 0; i < m; i++) {                                                        \
            u[i] = ld_##NAME(a, off + i);                                                         \
          }                                                                                       \
          for (size_t i = 0; i < m; i++) {                                                        \
            st_##NAME(d, off + i, u[i] + t[i]);                                                   \
          }                                                                                       \
        }                                                                                         \
        break;                                                                                    \
      case TUTTI_EOP_SUMDIV:                                                                      \
        BINARY(NAME, T, (x + y) / dv);                                                            \
        break;                                                                                    \
      case TUTTI_EOP_SCALE:                                                                       \
        UNARY(NAME, T, x* s);                                                                     \
        break;                                                                                    \
      case TUTTI_EOP_DIV:                                                                         \
        UNARY(NAME, T, x / dv);                                                                   \
        break;                                                                                    \
    }                                                                                             \
  }

LDST(f32, float)
LDST(f64, double)
RED_VERSIONS(FLOAT_KERNEL, f32, float)
RED_VERSIONS(FLOAT_KERNEL, f64, double)

static void run(void* dst, const void* a, const void* b, size_t n, const struct tutti_redop* op,
                enum tutti_red_eop eop, const char* caller) {
  unsigned char* d = dst;
  const unsigned char* pa = a;
  const unsigned char* pb = b;
  uint64_t div = op->divisor ? op->divisor : 1; /* never trap on a zero divisor */
  switch (op->type) {
    case ncclInt8:
      RED_CALL(red_i8, (d, pa, pb, n, eop, op->scalar.u8, div));
      return;
    case ncclUint8:
      RED_CALL(red_u8, (d, pa, pb, n, eop, op->scalar.u8, div));
      return;
    case ncclInt32:
      RED_CALL(red_i32, (d, pa, pb, n, eop, (uint32_t)op->scalar.i32, div));
      return;
    case ncclUint32:
      RED_CALL(red_u32, (d, pa, pb, n, eop, op->scalar.u32, div));
      return;
    case ncclInt64:
      RED_CALL(red_i64, (d, pa, pb, n, eop, (uint64_t)op->scalar.i64, div));
      return;
    case ncclUint64:
      RED_CALL(red_u64, (d, pa, pb, n, eop, op->scalar.u64, div));
      return;
    case ncclFloat32:
      RED_CALL(red_f32, (d, pa, pb, n, eop, op->scalar.f32, div));
      return;
    case ncclFloat64:
      RED_CALL(red_f64, (d, pa, pb, n, eop, op->scalar.f64, div));
      return;
    case ncclFloat16:
    case ncclBfloat16:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      tutti_reduce_narrow(dst, a, b, n, op, eop);
      return;
    default:
      WARN("%s: unknown data type %d", caller, (int)op->type);
      return;
  }
}

void tutti_reduce(void* dst, const void* a, const void* b, size_t n, const struct tutti_redop* op,
                  int flags) {
  enum tutti_red_eop eop;
  switch (op->kind) {
    case TUTTI_RED_SUM:
      eop = TUTTI_EOP_SUM;
      break;
    case TUTTI_RED_PROD:
      eop = TUTTI_EOP_PROD;
      break;
    case TUTTI_RED_MAX:
      eop = TUTTI_EOP_MAX;
      break;
    case TUTTI_RED_MIN:
      eop = TUTTI_EOP_MIN;
      break;
    case TUTTI_RED_PREMULSUM:
      eop = (flags & TUTTI_RED_SCALE_B) ? TUTTI_EOP_SUMSCALE : TUTTI_EOP_SUM;
      break;
    case TUTTI_RED_SUMPOSTDIV:
      eop = (flags & TUTTI_RED_FINAL) ? TUTTI_EOP_SUMDIV : TUTTI_EOP_SUM;
      break;
    default:
      WARN("tutti_reduce: unknown reduction kind %d", (int)op->kind);
      return;
  }
  if (n > 0) {
    run(dst, a, b, n, op, eop, "tutti_reduce");
  }
}

void tutti_copy(void* dst, const void* src, size_t n, const struct tutti_redop* op, int flags) {
  if (n == 0) {
    return;
  }
  if (op->kind == TUTTI_RED_PREMULSUM && (flags & TUTTI_RED_SCALE_B)) {
    run(dst, src, NULL, n, op, TUTTI_EOP_SCALE, "tutti_copy");
  } else if (op->kind == TUTTI_RED_SUMPOSTDIV && (flags & TUTTI_RED_FINAL)) {
    run(dst, src, NULL, n, op, TUTTI_EOP_DIV, "tutti_copy");
  } else if (dst != src) {
    memcpy(dst, src, n * tutti_type_size(op->type));
  }
}
