/* Running N ranks as processes: each child runs the body and reports its
 * passed / failed counts to the parent through a pipe. */
#ifndef TUTTI_TEST_PROCS_H
#define TUTTI_TEST_PROCS_H

/* The body of rank `rank`; it fills *passed and *failed. */
typedef void (*procs_fn)(int rank, void* arg, long* passed, long* failed);

/* Forks `n` processes running fn(rank, arg), waits for all and adds their
 * counts to *passed and *failed; a rank that died or reported nothing counts
 * as one failure. Call it before this process starts threads or CUDA. */
void procs_run(int n, procs_fn fn, void* arg, long* passed, long* failed);

/* Points NCCL_COMM_ID at a free loopback port, so that every rank gets the
 * job's unique id from ncclGetUniqueId and rank 0 runs the bootstrap root:
 * the parent then starts no thread before it forks (a thread inside malloc
 * at fork time leaves the child's allocator locked). Returns 0 on success. */
int procs_comm_id(void);

#endif
