/* A rank that is alive but stalled is reported as such after TUTTI_TIMEOUT:
 * rank 1 is stopped (SIGSTOP) while rank 0 waits for it in an allreduce;
 * then rank 1 is alive but busy in its own code (in no collective). Rank 0's
 * error must say which, naming the rank, and its next call must fail at
 * once with the same cause. Prints "N passed, N failed". */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"
#include "procs.h"

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
}

/* Rank 0 reports on `fd` whether its error says `want`. */
static int rank_main(int r, ncclUniqueId id, const char* want, int fd) {
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, 2, id, r) != ncclSuccess) {
    return 1;
  }
  int32_t buf[1024] = {0};
  if (r == 1) {
    /* Busy in its own code past rank 0's timeout; or stopped (by the parent)
     * during this pause, before it enters the collective. */
    sleep_s(strstr(want, "no collective") != NULL ? 6 : 1);
    ncclAllReduce(buf, buf, 1024, ncclInt32, ncclSum, comm, NULL);
    ncclCommAbort(comm);
    return 0;
  }
  ncclResult_t res = ncclAllReduce(buf, buf, 1024, ncclInt32, ncclSum, comm, NULL);
  const char* err = ncclGetLastError(comm);
  int ok = res == ncclRemoteError && strstr(err, want) != NULL && strstr(err, "rank 1") != NULL;
  dprintf(fd, "%s: %s\n", ok ? "ok" : "WRONG", err);
  char first[1024];
  snprintf(first, sizeof first, "%s", err);
  /* The next call on the broken communicator fails at once with the same
   * cause (not after a second timeout). */
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  ncclResult_t res2 = ncclAllReduce(buf, buf, 1024, ncclInt32, ncclSum, comm, NULL);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  err = ncclGetLastError(comm);
  const int again = res2 == res && strcmp(err, first) == 0 && t1.tv_sec - t0.tv_sec < 1;
  dprintf(fd, "%s: then: %s\n", again ? "ok" : "WRONG", err);
  ok = ok && again;
  ncclCommAbort(comm);
  return ok ? 0 : 1;
}

int main(void) {
  const char* cases[2] = {"stopped", "no collective"};
  int passed = 0, failed = 0;
  for (int c = 0; c < 2; c++) {
    if (procs_comm_id() != 0) { /* rank 0 runs the root: no thread here while forking */
      return 1;
    }
    fflush(NULL);
    pid_t pids[2];
    for (int r = 0; r < 2; r++) {
      pids[r] = fork();
      if (pids[r] == 0) {
        ncclUniqueId id;
        _exit(ncclGetUniqueId(&id) != ncclSuccess ? 1 : rank_main(r, id, cases[c], STDOUT_FILENO));
      }
    }
    if (c == 0) {
      sleep_s(0.5);
      kill(pids[1], SIGSTOP);
    }
    int st0 = 0;
    waitpid(pids[0], &st0, 0);
    kill(pids[1], SIGCONT);
    kill(pids[1], SIGKILL);
    waitpid(pids[1], NULL, 0);
    int ok = WIFEXITED(st0) && WEXITSTATUS(st0) == 0;
    printf("stalled peer, %s: %s\n", cases[c], ok ? "passed" : "FAILED");
    ok ? passed++ : failed++;
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
