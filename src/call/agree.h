/* Call agreement: every rank publishes each collective it calls (struct
 * tutti_call, in its doorbell), and compares its own with its peers', so
 * that ranks that called different collectives, datatypes, reductions,
 * roots or counts get an error naming both calls instead of a wrong result
 * or a hang. A failure is published too: the ranks that wait for a failed
 * one stop with its cause, and every later call fails with it. Both
 * executors use it (the host executor as it runs, the device executor at
 * launch and in its watchdog); it sees ranks only through their doorbells
 * (struct tutti_bells). */
#ifndef TUTTI_CALL_AGREE_H
#define TUTTI_CALL_AGREE_H

#include <stdint.h>

#include "call/doorbell.h"

/* Whether rank `p`'s doorbell shows its calls (same host); network peers'
 * stand-in doorbells show them once their proxy brings them. */
int tutti_agree_visible(struct tutti_bells b, int p);

/* Compares `call` with every visible peer's record of it: an error when
 * one differs; *pending counts the peers that have not made the call yet. */
ncclResult_t tutti_agree_check(struct tutti_bells b, const struct tutti_call* call, int* pending);

/* The first visible peer that has not shown `call` yet, or -1. */
int tutti_agree_missing(struct tutti_bells b, const struct tutti_call* call);

/* When data from `peer` does not fit `call` (a size, a kind): the two
 * calls, as an error, if the peer's record shows it made another one; else
 * ncclSuccess and the caller tells what it saw. */
ncclResult_t tutti_agree_explain(struct tutti_bells b, const struct tutti_call* call, int peer);

/* The first peer whose communicator has failed and whose cause this rank
 * takes now in call `seq`, or -1: a definitive cause (calls that differ, a
 * lost peer) found in this call or an earlier one, at once (a peer that
 * failed in a later call did its part of this one); a peer that gave up
 * waiting (TUTTI_TIMEOUT) only for calls after the one it gave up in, so
 * that the ranks of that call each tell their own view of the stall.
 * Records the cause as the error, word for word, its code in *res; *first
 * is the rank that found it. */
int tutti_agree_peer_failed(struct tutti_bells b, uint64_t seq, ncclResult_t* res, int* first);

/* Publishes that this rank's communicator failed with `res` and the text of
 * the last error, found by rank `first` (-1: this rank), in call `seq`
 * (0: none), `wait` when it gave up waiting: peers waiting for it stop with
 * that cause. The first cause wins. */
void tutti_agree_fail(struct tutti_bells b, ncclResult_t res, int first, uint64_t seq, int wait);

/* Before a device launch of `call` (its kernels cannot compare calls):
 * publishes it and compares it with the peers that made theirs already
 * (the later rank of a pair finds a mismatch), advancing *checked as
 * tutti_agree_scan does; a peer that failed stops it too, with its cause
 * (*first: who found it). */
ncclResult_t tutti_agree_device(struct tutti_bells b, const struct tutti_call* call,
                                uint64_t* checked, int* first);

/* Device calls are compared at launch only with the peers whose records
 * are there; a network peer's comes a little later. This compares this
 * rank's device calls after *checked (in `own`) with every visible peer's
 * record, advancing *checked past those all peers agree on: 1 and the
 * error recorded when one differs, 0 otherwise. */
int tutti_agree_scan(const struct tutti_doorbell* own, struct tutti_doorbell* const* bells,
                     int nranks, int me, uint64_t* checked);

/* ncclSuccess, or the cause this rank's communicator already failed with,
 * as `own` records it (recorded again as the error): every later call
 * fails with it. */
ncclResult_t tutti_agree_sticky(const struct tutti_doorbell* own);

#endif
