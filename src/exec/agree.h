/* Call agreement: every rank publishes each collective it calls (struct
 * tutti_call, in its doorbell), and compares its own with its peers', so
 * that ranks that called different collectives, datatypes, reductions,
 * roots or counts get an error naming both calls instead of a wrong result
 * or a hang. A failure is published too: the ranks that wait for a failed
 * one stop with its cause, and every later call fails with it. */
#ifndef TUTTI_EXEC_AGREE_H
#define TUTTI_EXEC_AGREE_H

#include <stddef.h>

#include "exec/exec.h"

/* "AllReduce #17 of 1024 float, sum, on device buffers" */
void tutti_call_describe(const struct tutti_call* c, char* buf, size_t len);
/* Records ncclInvalidUsage for ranks `me` and `peer` having made calls `a`
 * and `b` under one number, and returns it. */
ncclResult_t tutti_call_mismatch(int me, const struct tutti_call* a, int peer,
                                 const struct tutti_call* b);

/* Whether rank `p`'s doorbell shows its calls (same host); network peers'
 * stand-in doorbells show them once their proxy brings them. */
int tutti_agree_visible(const struct tutti_exec_rank* er, int p);

/* Compares op's call with every visible peer's record of it: an error when
 * one differs; *pending counts the peers that have not made the call yet. */
ncclResult_t tutti_agree_check(const struct tutti_op* op, int* pending);

/* The first visible peer that has not shown op's call yet, or -1. */
int tutti_agree_missing(const struct tutti_op* op);

/* When data from `peer` does not fit op (a size, a kind): the two calls,
 * as an error, if the peer's record shows it made another one; else
 * ncclSuccess and the caller tells what it saw. */
ncclResult_t tutti_agree_explain(const struct tutti_op* op, int peer);

/* The first peer whose communicator has failed and whose cause this rank
 * takes now in call `seq`, or -1: a definitive cause (calls that differ, a
 * lost peer) found in this call or an earlier one, at once (a peer that
 * failed in a later call did its part of this one); a peer that gave up
 * waiting (TUTTI_TIMEOUT) only for calls after the one it gave up in, so
 * that the ranks of that call each tell their own view of the stall.
 * Records the cause as the error, word for word, its code in *res; *first
 * is the rank that found it. */
int tutti_agree_peer_failed(const struct tutti_exec_rank* er, uint64_t seq, ncclResult_t* res,
                            int* first);

/* Publishes that this rank's communicator failed with `res` and the text of
 * the last error, found by rank `first` (-1: this rank), in call `seq`
 * (0: none), `wait` when it gave up waiting: peers waiting for it stop with
 * that cause. The first cause wins. */
void tutti_agree_fail(struct tutti_exec_rank* er, ncclResult_t res, int first, uint64_t seq,
                      int wait);

/* Before a device launch of `op` (its kernels cannot compare calls):
 * publishes its call and compares it with the peers that made theirs
 * already (the later rank of a pair finds a mismatch); a peer that failed
 * stops it too, with its cause (*first: who found it). */
ncclResult_t tutti_agree_device(struct tutti_op* op, int* first);

/* Device calls are compared at launch only with the peers whose records
 * are there; a network peer's comes a little later. This compares this
 * rank's device calls after *checked (in `own`) with every visible peer's
 * record, advancing *checked past those all peers agree on: 1 and the
 * error recorded when one differs, 0 otherwise. */
int tutti_agree_scan(const struct tutti_doorbell* own, struct tutti_doorbell* const* bells,
                     int nranks, int me, uint64_t* checked);

/* ncclSuccess, or the cause this rank's communicator already failed with
 * (recorded again as the error): every later call fails with it. */
ncclResult_t tutti_agree_sticky(const struct tutti_exec_rank* er);

#endif
