/* Choosing the algorithm of each call: the one place that decides. */
#ifndef TUTTI_TUNE_TUNE_H
#define TUTTI_TUNE_TUNE_H

#include "algo/algo.h"

/* The algorithm for `a`: NCCL_ALGO when it names one that implements the
 * collective, otherwise by size. Never fails: an algorithm that cannot run
 * the collective is skipped, and the reason logged (NCCL_DEBUG_SUBSYS=TUNING). */
enum tutti_algo_id tutti_tune_algo(const struct tutti_coll_args* a);

/* Parses an NCCL_ALGO value into an allowed-mask per collective (exposed for tests). */
void tutti_tune_parse_algo(const char* spec, unsigned allowed[TUTTI_COLL_COUNT]);

#endif
