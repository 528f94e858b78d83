/* Bootstrap: turns a unique id into a connected set of ranks.
 * The id carries the root's address, a random 128-bit job secret and a flag
 * telling whether the root still has to be started (NCCL_COMM_ID mode, where
 * rank 0 starts it). Every rank reports to the root, which all-gathers the
 * ranks' listening addresses; the ranks then connect into a ring of sockets
 * that stays open for the communicator's life: all-gathers and barriers for
 * split / shm setup run on it. Every connection presents the job secret
 * before anything else is read, and every message is length-checked. */
#ifndef TUTTI_BOOTSTRAP_BOOTSTRAP_H
#define TUTTI_BOOTSTRAP_BOOTSTRAP_H

#include <stddef.h>

#include "nccl.h"

struct tutti_bootstrap;

/* Fills `id`. With NCCL_COMM_ID=host:port set, returns the same id on every
 * caller without starting anything (rank 0 starts the root in init); the job
 * secret then comes from TUTTI_JOB_SECRET if set, else is derived from the
 * address. Otherwise starts a root thread in this process, listening on the
 * interface chosen by NCCL_SOCKET_IFNAME, with a fresh random secret. */
ncclResult_t tutti_bootstrap_get_unique_id(ncclUniqueId* id);

/* Like tutti_bootstrap_get_unique_id but always starts a fresh root in this
 * process, whatever NCCL_COMM_ID says: for communicators made from inside
 * the library (ncclCommInitAll, ncclCommSplit). */
ncclResult_t tutti_bootstrap_new_root(ncclUniqueId* id);

/* An id whose root the new communicator's rank 0 starts at `root` (as with
 * NCCL_COMM_ID), with the given 16-byte secret: for communicators whose ranks
 * can agree on an id without exchanging it (ncclCommShrink). */
union tutti_socket_addr;
void tutti_bootstrap_rank0_id(const union tutti_socket_addr* root, const unsigned char secret[16],
                              ncclUniqueId* id);

/* Checks that `id` is well formed (magic, version, address family). */
ncclResult_t tutti_bootstrap_check_id(const ncclUniqueId* id);

/* The 16-byte job secret of `id` (used to name shared-memory segments). */
void tutti_bootstrap_id_secret(const ncclUniqueId* id, unsigned char secret[16]);

/* Joins the job as `rank` of `nranks`. Blocks until every rank has joined or
 * `timeout_s` passed (ncclSystemError / ncclRemoteError / ncclInvalidUsage
 * with a sentence naming what is missing). `abort_flag`, when non-NULL, is
 * polled at least every 100 ms: once non-zero the call returns
 * ncclRemoteError promptly. */
ncclResult_t tutti_bootstrap_init(const ncclUniqueId* id, int rank, int nranks, double timeout_s,
                                  volatile int* abort_flag, struct tutti_bootstrap** out);

/* The 16-byte secret every connection of this communicator presents (the
 * id's, or the job's learned token): transports and shared memory use it. */
void tutti_bootstrap_secret(const struct tutti_bootstrap* b, unsigned char secret[16]);

/* ncclSuccess, or ncclInvalidUsage with the cause once this communicator's
 * job was found sharing its NCCL_COMM_ID with another job: every later call
 * must fail with it. */
ncclResult_t tutti_bootstrap_job_check(const struct tutti_bootstrap* b);

/* All-gather over the ring: `data` holds nranks blocks of `bytes`; this
 * rank's block (index rank) is the input, the others are filled. */
ncclResult_t tutti_bootstrap_allgather(struct tutti_bootstrap* b, void* data, size_t bytes);

/* The same, stopped by `abort_flag` instead of the communicator's own: a
 * revoked communicator's ring (its own flag raised) still serves
 * ncclCommGrow, which the new communicator's abort then stops. */
ncclResult_t tutti_bootstrap_allgather_watch(struct tutti_bootstrap* b, void* data, size_t bytes,
                                             volatile int* abort_flag);

/* Returns once every rank has entered the barrier. */
ncclResult_t tutti_bootstrap_barrier(struct tutti_bootstrap* b);

/* The host:port this rank listens on, for logs ("" before init). */
const char* tutti_bootstrap_address(const struct tutti_bootstrap* b, int rank);

/* Closes the sockets and frees everything; safe on NULL. */
void tutti_bootstrap_close(struct tutti_bootstrap* b);

#endif
