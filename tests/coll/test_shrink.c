/* ncclCommShrink with ranks as processes: a healthy shrink that leaves a
 * rank out (NCCL_SHRINK_DEFAULT), and a shrink after a rank died in the
 * middle of the job (NCCL_SHRINK_ABORT): the survivors see the failure as an
 * error, shrink, and go on with correct results. Prints "N passed, N failed". */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"
#include "procs.h"

#define COUNT 100003
#define NRANKS 4

static int check_sum(ncclComm_t comm, const int* members, int nmembers, int myrank,
                     const char* what) {
  int32_t* buf = malloc(COUNT * sizeof *buf);
  for (int i = 0; i < COUNT; i++) {
    buf[i] = myrank * 1000 + i % 997;
  }
  ncclResult_t res = ncclAllReduce(buf, buf, COUNT, ncclInt32, ncclSum, comm, NULL);
  int ok = res == ncclSuccess;
  for (int i = 0; ok && i < COUNT; i++) {
    int32_t want = 0;
    for (int m = 0; m < nmembers; m++) {
      want += members[m] * 1000 + i % 997;
    }
    ok = buf[i] == want;
  }
  if (!ok) {
    fprintf(stderr, "rank %d: %s: %s\n", myrank, what,
            res != ncclSuccess ? ncclGetLastError(comm) : "wrong sum");
  }
  free(buf);
  return ok;
}

/* One rank of a job; returns the number of failed checks. */
static int run_rank(int r, ncclUniqueId id, int dying) {
  ncclComm_t comm, small;
  if (ncclCommInitRank(&comm, NRANKS, id, r) != ncclSuccess) {
    fprintf(stderr, "rank %d: init: %s\n", r, ncclGetLastError(NULL));
    return 1;
  }
  int all[NRANKS] = {0, 1, 2, 3};
  int fails = !check_sum(comm, all, NRANKS, r, "allreduce before the shrink");
  int gone = dying ? 2 : 3;
  int rest[NRANKS - 1], k = 0;
  for (int i = 0; i < NRANKS; i++) {
    if (i != gone) {
      rest[k++] = i;
    }
  }
  if (r == gone) {
    if (dying) {
      _exit(0); /* gone without a word */
    }
    ncclCommDestroy(comm); /* left out, healthy */
    return fails;
  }
  if (dying) {
    /* The survivors' next collective must fail, naming the failure. */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int32_t x = 1;
    ncclResult_t res = ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (res == ncclSuccess) {
      fprintf(stderr, "rank %d: an allreduce with a dead rank succeeded\n", r);
      fails++;
    } else {
      printf("rank %d: failure seen after %.2f s: %s\n", r,
             (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9,
             ncclGetLastError(comm));
    }
  }
  int excl[1] = {gone};
  ncclResult_t res =
      ncclCommShrink(comm, excl, 1, &small, NULL, dying ? NCCL_SHRINK_ABORT : NCCL_SHRINK_DEFAULT);
  if (res != ncclSuccess) {
    fprintf(stderr, "rank %d: ncclCommShrink: %s\n", r, ncclGetLastError(comm));
    return fails + 1;
  }
  int n = 0, me = -1;
  ncclCommCount(small, &n);
  ncclCommUserRank(small, &me);
  if (n != NRANKS - 1 || me != r - (r > gone)) {
    fprintf(stderr, "rank %d: shrunk communicator has %d ranks, this one %d\n", r, n, me);
    fails++;
  }
  for (int it = 0; it < 3; it++) {
    fails += !check_sum(small, rest, NRANKS - 1, r, "allreduce after the shrink");
  }
  ncclCommDestroy(small);
  if (dying) {
    ncclCommAbort(comm);
  } else {
    ncclCommDestroy(comm);
  }
  return fails;
}

int main(void) {
  int passed = 0, failed = 0;
  for (int dying = 0; dying < 2; dying++) {
    /* No bootstrap root thread in this process while it forks: rank 0 runs it. */
    if (procs_comm_id() != 0) {
      fprintf(stderr, "no free loopback port for NCCL_COMM_ID\n");
      return 1;
    }
    fflush(NULL);
    pid_t pids[NRANKS];
    for (int r = 0; r < NRANKS; r++) {
      pids[r] = fork();
      if (pids[r] == 0) {
        ncclUniqueId id;
        if (ncclGetUniqueId(&id) != ncclSuccess) {
          fprintf(stderr, "rank %d: ncclGetUniqueId: %s\n", r, ncclGetLastError(NULL));
          _exit(1);
        }
        _exit(run_rank(r, id, dying) ? 1 : 0);
      }
    }
    int ok = 1;
    for (int r = 0; r < NRANKS; r++) {
      int st = 0;
      waitpid(pids[r], &st, 0);
      ok &= WIFEXITED(st) && WEXITSTATUS(st) == 0;
    }
    printf("shrink %s: %s\n", dying ? "after a rank died (NCCL_SHRINK_ABORT)" : "of a healthy job",
           ok ? "passed" : "FAILED");
    ok ? passed++ : failed++;
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
