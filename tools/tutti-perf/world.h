/* Everything that involves all ranks but is not the measured collective:
 * communicator setup, barriers, reductions of times and error counts, and
 * waiting for completion. Between processes these go through the library
 * itself (there is no MPI), with host or device buffers as the mode needs. */
#ifndef TUTTI_PERF_WORLD_H
#define TUTTI_PERF_WORLD_H

#include "perf.h"

enum perf_reduce { PERF_RED_RANK0, PERF_RED_AVG, PERF_RED_MIN, PERF_RED_MAX, PERF_RED_SUM };

/* Main thread, before the threads start: buffers, streams, and (unless
 * -p 1) the communicators of every local rank. */
void perf_world_setup(struct perf_world* w, struct perf_thread* threads);
/* Per thread with -p 1: this thread's communicators. */
void perf_world_init_thread(struct perf_thread* t);
void perf_world_teardown(struct perf_world* w, struct perf_thread* threads);
void perf_world_barrier(struct perf_thread* t);
/* One-sided runs: registers (on, collective) or deregisters (0, local) the
 * windows over this thread's ranks' buffers. */
void perf_world_windows(struct perf_thread* t, int on);
/* Combines `v` over all ranks (all threads of every process). */
double perf_world_reduce(struct perf_thread* t, double v, enum perf_reduce mode);
/* Waits until the work queued on this thread's ranks is done. */
void perf_world_complete(struct perf_thread* t);

#define PERF_LINE 160
/* Every rank's "# Using devices" line, in rank order, into `all` (nranks *
 * PERF_LINE bytes; filled on thread 0 of each process). */
void perf_world_device_lines(struct perf_thread* t, char* all);

#endif
