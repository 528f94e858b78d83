/* Data types (names, sizes, loads and stores) and the values that fill the
 * buffers: small integers chosen so that every reduction is exact in every
 * type, whatever the order in which a library combines the ranks. */
#ifndef TUTTI_PERF_DATA_H
#define TUTTI_PERF_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

size_t perf_type_size(ncclDataType_t t);
const char* perf_type_name(ncclDataType_t t);
/* Accepts nccl-tests' names and a few aliases; -1 if unknown. */
int perf_type_parse(const char* s);
const char* perf_op_name(int op); /* PERF_OP_MULSUM: "mulsum", PERF_OP_NONE: "none" */
int perf_op_parse(const char* s);

double perf_load(const void* buf, size_t i, ncclDataType_t t);
void perf_store(void* buf, size_t i, ncclDataType_t t, double v);

/* One (type, op, nranks, seed): what each rank puts in, what comes out. */
struct perf_gen {
  ncclDataType_t type;
  int op;
  int nranks;
  uint32_t seed;
  uint32_t mask; /* data movement, max and min: values 0..mask */
  int contrib;   /* sum and mulsum: ranks that add a non-zero value to an element */
  int pow2;      /* prod: ranks that may multiply an element by 2 */
  int avg_w;     /* avg: every rank holds about w in 1..avg_w, so the mean is w */
  double tol;    /* 0: results must be exact */
};

void perf_gen_init(struct perf_gen* g, ncclDataType_t t, int op, int nranks, uint32_t seed);
/* Element `gi` of a data-movement collective (gi is global: rank*count+i). */
double perf_gen_plain(const struct perf_gen* g, size_t gi);
/* Element `i` of `rank`'s input to a reduction. */
double perf_gen_input(const struct perf_gen* g, int rank, size_t i);
/* The reduction of element `i` over all ranks. */
double perf_gen_result(const struct perf_gen* g, size_t i);
/* The PreMulSum scalar of `rank` for the "mulsum" op. */
double perf_gen_premul(int rank);
/* Non-zero when `got` is not an acceptable value for `expected`. */
int perf_gen_wrong(const struct perf_gen* g, double got, double expected);

#endif
