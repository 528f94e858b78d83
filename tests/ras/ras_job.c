/* One rank of the RAS tests' jobs (tests/ras/ras_test.py starts them):
 * ras_job RANK NRANKS MODE, the job's id from NCCL_COMM_ID. Each prints
 * "rank R: result N: error text" for the call that failed, "rank R: done"
 * after its calls, then stays RAS_AFTER seconds (default 20) for queries.
 *   stall  4 allreduces of 65536 floats; rank 2 then never makes the 5th
 *   slow   12 small allreduces; rank 1 enters each 0.15 s late
 *   dead   4 allreduces; rank 3 then dies (SIGKILL) before the 5th
 *   two    the job's communicator and a split by rank parity; after 3
 *          calls on each, rank 2 makes no 4th on the split one
 * RAS_PSK set: the job encrypts its connections with that key
 * (ncclSetEncryption) before it makes its communicator. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
}

static double env_s(const char* name, double dflt) {
  const char* v = getenv(name);
  return v != NULL && *v != '\0' ? atof(v) : dflt;
}

static int allreduce(ncclComm_t comm, float* buf, size_t n, int rank) {
  const ncclResult_t res = ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, comm, NULL);
  if (res != ncclSuccess) {
    printf("rank %d: result %d: %s\n", rank, (int)res, ncclGetLastError(comm));
    fflush(stdout);
  }
  return res == ncclSuccess;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: ras_job RANK NRANKS stall|slow|dead|two\n");
    return 2;
  }
  const int rank = atoi(argv[1]), nranks = atoi(argv[2]);
  const char* mode = argv[3];
  ncclUniqueId id;
  ncclComm_t comm;
  const char* psk = getenv("RAS_PSK");
  if (psk != NULL && *psk != '\0') {
    ncclEncryptionConfig_t enc = NCCL_ENCRYPTION_CONFIG_INITIALIZER;
    enc.mode = NCCL_ENCRYPTION_MODE_PSK;
    enc.psk = psk;
    if (ncclSetEncryption(&enc) != ncclSuccess) {
      fprintf(stderr, "rank %d: ncclSetEncryption failed: %s\n", rank, ncclGetLastError(NULL));
      return 1;
    }
  }
  if (ncclGetUniqueId(&id) != ncclSuccess ||
      ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) {
    fprintf(stderr, "rank %d: init failed\n", rank);
    return 1;
  }
  const size_t n = 65536;
  float* buf = calloc(n, sizeof *buf);
  int ok = 1;
  if (strcmp(mode, "stall") == 0 || strcmp(mode, "dead") == 0) {
    for (int i = 0; i < 4 && ok; i++) {
      ok = allreduce(comm, buf, n, rank);
    }
    if (rank == (mode[0] == 's' ? 2 : 3)) {
      if (mode[0] == 'd') {
        raise(SIGKILL);
      }
      sleep_s(env_s("RAS_HOLD", 30)); /* alive, in its own code */
      return 0;
    }
    ok = ok && allreduce(comm, buf, n, rank);
  } else if (strcmp(mode, "slow") == 0) {
    for (int i = 0; i < 12 && ok; i++) {
      if (rank == 1) {
        sleep_s(0.15);
      }
      ok = allreduce(comm, buf, 1024, rank);
    }
  } else if (strcmp(mode, "two") == 0) {
    ncclComm_t half;
    if (ncclCommSplit(comm, rank % 2, rank, &half, NULL) != ncclSuccess) {
      return 1;
    }
    for (int i = 0; i < 3 && ok; i++) {
      ok = allreduce(comm, buf, n, rank) && allreduce(half, buf, n, rank);
    }
    if (rank == 2) {
      sleep_s(env_s("RAS_HOLD", 30));
      return 0;
    }
    ok = ok && allreduce(half, buf, n, rank);
  }
  if (ok) {
    printf("rank %d: done\n", rank);
    fflush(stdout);
  }
  sleep_s(env_s("RAS_AFTER", 20));
  return 0;
}
