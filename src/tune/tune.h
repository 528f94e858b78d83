/* Choosing the algorithm of each call: the one place that decides. */
#ifndef TUTTI_TUNE_TUNE_H
#define TUTTI_TUNE_TUNE_H

#include "algo/algo.h"

/* The algorithm for `a`: NCCL_ALGO when it names one that implements the
 * collective, otherwise by size. Never fails: an algorithm that cannot run
 * the collective is skipped, and the reason logged (NCCL_DEBUG_SUBSYS=TUNING). */
enum tutti_algo_id tutti_tune_algo(const struct tutti_coll_args* a);

/* The hierarchical allreduce's exchange among hosts (coll_args.inter_algo). */
int tutti_tune_inter(const struct tutti_coll_args* a);

/* Non-zero when NCCL_ALGO names the algorithms (read once). */
int tutti_tune_algo_named(void);

/* The same choice for a collective on device buffers (one host). */
enum tutti_algo_id tutti_tune_algo_device(const struct tutti_coll_args* a);

/* Bytes a ring round moves per step: half the smallest queue, so that a rank
 * one step ahead of its neighbour never fills the queue between them (which
 * could close a cycle of ranks all waiting to send). */
size_t tutti_tune_chunk(size_t queue_bytes, size_t piece_bytes);

/* Parses an NCCL_ALGO value into an allowed-mask per collective (exposed for tests). */
void tutti_tune_parse_algo(const char* spec, unsigned allowed[TUTTI_COLL_COUNT]);

#endif
