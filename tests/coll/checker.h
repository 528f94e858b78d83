/* Exact inputs and references for every datatype x reduction: inputs are
 * small integers, a hash of (rank, element), so that every element tells
 * where it came from, chosen so that every sum, product, max and min is
 * exact in the type whatever the order (up to 64 ranks); avg on floating
 * types, whose terms the library rounds, is checked against a bound derived
 * from that rounding (chk_equal). */
#ifndef TUTTI_TEST_CHECKER_H
#define TUTTI_TEST_CHECKER_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

/* Fills `n` elements of type `t`: the input of rank `rank` for reduction
 * `op` (ncclSum.. ncclAvg, or ncclNumOps for PreMulSum), starting at element
 * index `first` of that rank's buffer. */
void chk_fill(void* buf, ncclDataType_t t, int op, int rank, size_t first, size_t n);

/* The expected element `i` of the reduction over `nranks` ranks, as double. */
double chk_reduce_ref(ncclDataType_t t, int op, int nranks, size_t i, double premul);

/* Element `i` of `buf` as double. */
double chk_get(const void* buf, ncclDataType_t t, size_t i);

/* Rounds `v` to the type (what storing it would give), as double. */
double chk_round(ncclDataType_t t, double v);

/* The PreMulSum scalar the tests use, 2, as a value of type `t` in the first
 * bytes of `out` (8 bytes, the rest zeroed). */
void chk_two(ncclDataType_t t, void* out);

/* Whether `got` is right for `want` at element `i` (the index given to
 * chk_reduce_ref): bit-exact except avg on floating types. */
int chk_equal(ncclDataType_t t, int op, int nranks, size_t i, double got, double want);

#endif
