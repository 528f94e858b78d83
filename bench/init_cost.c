/* What forming a communicator costs: N processes on this host run
 * ncclGetUniqueId / ncclCommInitRank / ncclCommDestroy R times, and rank 0
 * prints the median and spread of init's wall time (the bootstrap root and
 * ring, and with NCCL_SHM_DISABLE=1 every TCP pair's sockets). Written to
 * price the hellos' proof of the job secret (docs/design.md, "Bootstrap").
 *
 *   cc -O2 -Iinclude bench/init_cost.c -Lbuild -ltutti -o /tmp/init_cost
 *   LD_LIBRARY_PATH=build NCCL_SHM_DISABLE=1 /tmp/init_cost 4 41
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 4, rounds = argc > 2 ? atoi(argv[2]) : 21;
  if (n < 1 || rounds < 1 || rounds > 1000) {
    fprintf(stderr, "usage: init_cost NRANKS ROUNDS (1..1000)\n");
    return 2;
  }
  double* ms = calloc((size_t)rounds, sizeof *ms);
  for (int k = 0; k < rounds; k++) {
    ncclUniqueId id;
    if (ncclGetUniqueId(&id) != ncclSuccess) {
      fprintf(stderr, "init_cost: ncclGetUniqueId: %s\n", ncclGetLastError(NULL));
      return 1;
    }
    for (int r = 1; r < n; r++) {
      if (fork() == 0) {
        ncclComm_t c;
        if (ncclCommInitRank(&c, n, id, r) != ncclSuccess) {
          _exit(1);
        }
        ncclCommDestroy(c);
        _exit(0);
      }
    }
    ncclComm_t c;
    const double t0 = now();
    ncclResult_t res = ncclCommInitRank(&c, n, id, 0);
    ms[k] = (now() - t0) * 1e3;
    if (res != ncclSuccess) {
      fprintf(stderr, "init_cost: init: %s\n", ncclGetLastError(NULL));
      return 1;
    }
    ncclCommDestroy(c);
    int bad = 0;
    for (int r = 1; r < n; r++) {
      int st = 0;
      wait(&st);
      bad |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    if (bad) {
      fprintf(stderr, "init_cost: a rank failed\n");
      return 1;
    }
  }
  qsort(ms, (size_t)rounds, sizeof *ms, cmp);
  printf("init of %d ranks: median %.2f ms (10%% %.2f, 90%% %.2f), %d rounds\n", n, ms[rounds / 2],
         ms[rounds / 10], ms[rounds * 9 / 10], rounds);
  free(ms);
  return 0;
}
