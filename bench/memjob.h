/* What the memory benchmarks (comm_mem.c, suspend_mem.c) share: ranks as
 * processes forked from one parent, a barrier in memory they all map, the
 * library under test loaded by path, and the tallies of their checks
 * gathered into the parent. Plain C: tests/bench checks it on the CPU. */
#ifndef TUTTI_BENCH_MEMJOB_H
#define TUTTI_BENCH_MEMJOB_H

#include <stddef.h>
#include <stdio.h>

/* This process's checks (a rank's own until memjob_fork gathers them). */
extern long passed, failed;

#define FAILF(...)                \
  do {                            \
    failed++;                     \
    fprintf(stderr, __VA_ARGS__); \
    fputc('\n', stderr);          \
  } while (0)
#define EXPECT(cond, ...) \
  do {                    \
    if (cond) {           \
      passed++;           \
    } else {              \
      FAILF(__VA_ARGS__); \
    }                     \
  } while (0)

/* The ranks' barrier, in memory mapped before the fork (n set by the parent). */
struct memjob_sync {
  int n;
  int arrived;
  int gen;
};

/* CLOCK_MONOTONIC in seconds. */
double memjob_now(void);
/* Every rank here: 1; 0 (and a failure counted) after `limit_s` seconds,
 * a rank that died or hangs. */
int memjob_barrier(struct memjob_sync* s, double limit_s);

/* A function of the library under test: its name, where its address goes,
 * and whether the library may lack it (NULL then). */
struct memjob_sym {
  const char* name;
  void** fn;
  int optional;
};
/* dlopen(path) into the global scope and every symbol looked up: 0 (with
 * a line naming the first one missing) unless all required were found. */
int memjob_load(const char* path, const struct memjob_sym* syms, size_t n);

/* Rank r as a host of its own (NCCL_HOSTID and TUTTI_HOSTID "<prefix>-r"). */
void memjob_as_host(const char* prefix, int r);

/* Forks `n` ranks, each running body(arg, r) with its own tallies under a
 * 600 s alarm, and adds what each reports to this process's; a rank that
 * dies before reporting counts one failure. */
void memjob_fork(int n, void (*body)(void* arg, int r), void* arg);

#endif
