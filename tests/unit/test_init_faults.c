/* Init that cannot complete and peers that go away: a rank that never
 * arrives, an unreachable root, a peer that dies or leaves mid-job, ranks
 * that call mismatched collectives. Each must end in an error that names the
 * cause, within the bound set by TUTTI_TIMEOUT (2 s here), never a hang. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "nccl.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void test_missing_rank(void) {
  ncclUniqueId id;
  CHECK_NCCL(ncclGetUniqueId(&id));
  ncclComm_t comm = (ncclComm_t)1;
  double t0 = now();
  ncclResult_t r = ncclCommInitRank(&comm, 2, id, 0);
  double dt = now() - t0;
  CHECK(r != ncclSuccess, "init with a missing rank fails");
  CHECK(comm == NULL, "no communicator is left behind");
  CHECK(dt < 10, "failed after %.1f s", dt);
  CHECK(strstr(ncclGetLastError(NULL), "1") != NULL, "names the missing rank: %s",
        ncclGetLastError(NULL));
}

static void test_unreachable_root(void) {
  setenv("NCCL_COMM_ID", "127.0.0.1:1", 1); /* nothing listens on port 1 */
  ncclUniqueId id;
  CHECK_NCCL(ncclGetUniqueId(&id));
  unsetenv("NCCL_COMM_ID");
  ncclComm_t comm;
  double t0 = now();
  ncclResult_t r = ncclCommInitRank(&comm, 2, id, 1);
  double dt = now() - t0;
  CHECK(r != ncclSuccess, "init with an unreachable root fails");
  CHECK(dt < 10, "failed after %.1f s", dt);
  CHECK(strstr(ncclGetLastError(NULL), "127.0.0.1:1") != NULL, "names the root: %s",
        ncclGetLastError(NULL));
}

/* Rank 1 of a 2-process job does `how` after one good allreduce; rank 0 then
 * calls another allreduce, which must fail naming rank 1 and `expect`. */
enum { DIE_KILLED, DIE_DESTROYED, MISMATCH };

static void test_peer_gone(int how, const char* expect) {
  ncclUniqueId id;
  CHECK_NCCL(ncclGetUniqueId(&id));
  int fds[2];
  if (pipe(fds) != 0)
    return;
  pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    ncclComm_t comm;
    float v[256] = {0};
    if (ncclCommInitRank(&comm, 2, id, 1) != ncclSuccess)
      _exit(3);
    if (ncclAllReduce(v, v, 256, ncclFloat, ncclSum, comm, NULL) != ncclSuccess)
      _exit(4);
    if (how == DIE_KILLED) {
      raise(SIGKILL);
    }
    if (how == DIE_DESTROYED) {
      ncclCommDestroy(comm);
      sleep(3); /* alive, but gone from the communicator */
      _exit(0);
    }
    /* MISMATCH: twice the count rank 0 uses. */
    ncclResult_t r = ncclAllReduce(v, v, 256, ncclFloat, ncclSum, comm, NULL);
    char line[600];
    int n = snprintf(line, sizeof line, "%d %s", (int)r, ncclGetLastError(comm));
    if (write(fds[1], line, (size_t)n) < 0)
      _exit(5);
    _exit(0);
  }
  close(fds[1]);
  ncclComm_t comm;
  float v[256] = {0};
  CHECK_NCCL(ncclCommInitRank(&comm, 2, id, 0));
  CHECK_NCCL(ncclAllReduce(v, v, 256, ncclFloat, ncclSum, comm, NULL));
  double t0 = now();
  ncclResult_t r = ncclAllReduce(v, v, how == MISMATCH ? 128 : 256, ncclFloat, ncclSum, comm, NULL);
  double dt = now() - t0;
  const char* text = ncclGetLastError(comm);
  CHECK(r != ncclSuccess, "allreduce fails when rank 1 %s", expect);
  CHECK(dt < 5, "within %.2f s", dt);
  CHECK(strstr(text, expect) != NULL && strstr(text, "rank 1") != NULL, "text: %s", text);
  ncclResult_t async = ncclSuccess;
  CHECK_NCCL(ncclCommGetAsyncError(comm, &async));
  CHECK(async == r, "ncclCommGetAsyncError reports %d (the call returned %d)", (int)async, (int)r);
  if (how == MISMATCH) {
    char line[600] = {0};
    ssize_t n = read(fds[0], line, sizeof line - 1);
    CHECK(n > 0 && atoi(line) == ncclInvalidUsage && strstr(line, "of 128 float") != NULL &&
              strstr(line, "of 256 float") != NULL,
          "rank 1 also reports the mismatch, naming both calls: %s", line);
  }
  close(fds[0]);
  ncclCommDestroy(comm);
  int st;
  waitpid(child, &st, 0);
}

int main(void) {
  setenv("TUTTI_TIMEOUT", "2", 1);
  /* No RAS listener: this process forks after its first communicators, and
   * a thread in the parent would make the children's threads unfollowable
   * under ThreadSanitizer (the ras.* tests cover the listener). */
  setenv("NCCL_RAS_ENABLE", "0", 1);
  test_missing_rank();
  test_unreachable_root();
  test_peer_gone(DIE_KILLED, "exited");
  test_peer_gone(DIE_DESTROYED, "destroyed its communicator");
  test_peer_gone(MISMATCH, "called AllReduce #2 of 256 float");
  /* Segments are unlinked as soon as every local rank has mapped them: even
   * a killed rank leaves nothing in /dev/shm. */
  CHECK(system("ls /dev/shm | grep -q '^tutti-'") != 0, "no tutti segment left in /dev/shm");
  return test_summary("init_faults");
}
