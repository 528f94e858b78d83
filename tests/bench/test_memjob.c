/* bench/memjob.c, the memory benchmarks' harness, on the CPU: ranks meet
 * at the barrier, their tallies reach the parent, a rank that dies counts
 * as a failure and leaves the others' barrier with one, and the loader
 * tells a missing required function from a missing optional one. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "memjob.h"

struct world {
  struct memjob_sync sync;
  int seen[3][4]; /* [round][rank]: set before the round's barrier */
  int dies;       /* the rank that exits without reporting, or -1 */
};

static void body(void* arg, int r) {
  struct world* w = arg;
  for (int round = 0; round < 3; round++) {
    if (r == w->dies && round == 1) {
      _exit(0); /* no report */
    }
    w->seen[round][r] = 1;
    if (!memjob_barrier(&w->sync, w->dies >= 0 ? 1.0 : 30.0)) {
      return; /* the barrier counted the failure */
    }
    int all = 1;
    for (int q = 0; q < w->sync.n; q++) {
      all &= __atomic_load_n(&w->seen[round][q], __ATOMIC_ACQUIRE);
    }
    EXPECT(all, "rank %d, round %d: passed the barrier before every rank reached it", r, round);
  }
}

static int check(int ok, const char* what) {
  printf("%s %s\n", ok ? "ok  " : "FAIL", what);
  return ok ? 0 : 1;
}

int main(void) {
  int bad = 0;
  struct world* w =
      mmap(NULL, sizeof *w, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (w == MAP_FAILED) {
    return 1;
  }
  w->sync.n = 4;
  w->dies = -1;
  memjob_fork(4, body, w);
  bad +=
      check(passed == 12 && failed == 0, "4 ranks, 3 rounds: every rank's checks reach the parent");
  memset(w, 0, sizeof *w);
  w->sync.n = 3;
  w->dies = 2;
  passed = failed = 0;
  memjob_fork(3, body, w);
  /* Ranks 0 and 1 pass round 0's check and time out at round 1's barrier
   * (2 passed, 2 failed); rank 2 dies unreported, its pass lost (1 failed). */
  bad +=
      check(passed == 2 && failed == 3, "a rank that dies: one failure, the others' barrier ends");
  munmap(w, sizeof *w);

  void* fn_getpid = NULL;
  void* fn_absent = NULL;
  struct memjob_sym optional[] = {{"getpid", &fn_getpid, 0},
                                  {"no_such_function_here", &fn_absent, 1}};
  bad += check(memjob_load("libc.so.6", optional, 2) == 1 && fn_getpid != NULL && fn_absent == NULL,
               "a missing optional function is NULL, the library loads");
  struct memjob_sym required[] = {{"getpid", &fn_getpid, 0},
                                  {"no_such_function_here", &fn_absent, 0}};
  bad += check(memjob_load("libc.so.6", required, 2) == 0,
               "a missing required function refuses the library");
  bad += check(memjob_load("/nonexistent/libnccl.so.2", optional, 1) == 0,
               "a missing library is refused");
  return bad == 0 ? 0 : 1;
}
