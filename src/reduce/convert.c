/* The exported scalar conversions between float and half, bfloat16 and fp8:
 * thin wrappers over reduce_impl.h, so the vector loops and these agree bit for bit. */
#include "reduce/reduce_impl.h"

float tutti_half_to_float(uint16_t h) {
  return red_half_to_float(h);
}

uint16_t tutti_float_to_half(float f) {
  return red_float_to_half(f);
}

float tutti_bf16_to_float(uint16_t h) {
  return red_bf16_to_float(h);
}

uint16_t tutti_float_to_bf16(float f) {
  return red_float_to_bf16(f);
}

float tutti_e4m3_to_float(uint8_t v) {
  return red_e4m3_to_float(v);
}

uint8_t tutti_float_to_e4m3(float f) {
  return red_float_to_e4m3(f);
}

float tutti_e5m2_to_float(uint8_t v) {
  return red_e5m2_to_float(v);
}

uint8_t tutti_float_to_e5m2(float f) {
  return red_float_to_e5m2(f);
}
