/* One process of the grow scenario across namespace "hosts" (run.sh grow):
 *   test_netns_grow DIR 0|1|new
 * Hosts 0 and 1 make a job of two ranks (host 0's unique id handed over in
 * DIR/parent.id), host 0 makes the grow's id (DIR/grow.id), and the process
 * of host 2 joins as rank 2 of three; then ranks 0 and 1 shrink the grown
 * communicator back to two, leaving host 2's rank out. Every collective runs
 * bit for bit on each communicator (every_coll.h): the two-rank job, the
 * grown one, the parent after the grow, the shrunk one. Prints
 * "grow host H: N passed, N failed"; exits 1 on any failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "every_coll.h"
#include "nccl.h"

static long passed, failed;

static void expect(int ok, const char* what) {
  if (ok) {
    passed++;
  } else {
    failed++;
    fprintf(stderr, "FAIL: %s: %s\n", what, ncclGetLastError(NULL));
  }
}

/* Written whole or not at all: a reader never sees half an id. */
static int put_id(const char* dir, const char* name, const ncclUniqueId* id) {
  char tmp[512], path[512];
  snprintf(tmp, sizeof tmp, "%s/%s.tmp", dir, name);
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE* f = fopen(tmp, "wb");
  int ok = f != NULL && fwrite(id, sizeof *id, 1, f) == 1;
  ok = f != NULL && fclose(f) == 0 && ok;
  return ok && rename(tmp, path) == 0 ? 0 : -1;
}

/* Waits for the file (the other host may start later). */
static int get_id(const char* dir, const char* name, ncclUniqueId* id) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  const char* s = getenv("TUTTI_TIMEOUT");
  for (int ms = 0; ms < ((s != NULL ? atoi(s) : 300) + 60) * 1000; ms += 50) {
    FILE* f = fopen(path, "rb");
    if (f != NULL) {
      int ok = fread(id, sizeof *id, 1, f) == 1;
      fclose(f);
      return ok ? 0 : -1;
    }
    struct timespec t = {0, 50 * 1000000};
    nanosleep(&t, NULL);
  }
  fprintf(stderr, "no %s appeared in %s\n", name, dir);
  return -1;
}

static void report(const char* host, const char* what, long p0, long f0) {
  printf("grow host %s: %s: %ld passed, %ld failed\n", host, what, passed - p0, failed - f0);
}

/* every_coll on `comm`, with a line saying how it went. */
static int all_colls(ncclComm_t comm, const char* host, const char* what) {
  long p0 = passed, f0 = failed;
  int ok = every_coll(comm, what, &passed, &failed);
  report(host, what, p0, f0);
  return ok;
}

static int existing(const char* dir, int rank, const char* host) {
  ncclUniqueId id;
  ncclComm_t parent = NULL, grown = NULL, shrunk = NULL;
  if (rank == 0) {
    expect(ncclGetUniqueId(&id) == ncclSuccess && put_id(dir, "parent.id", &id) == 0,
           "the job's id");
  } else {
    expect(get_id(dir, "parent.id", &id) == 0, "the job's id");
  }
  expect(ncclCommInitRank(&parent, 2, id, rank) == ncclSuccess, "init of 2 ranks");
  if (failed || !all_colls(parent, host, "2 hosts")) {
    return 1;
  }
  if (rank == 0) {
    expect(ncclCommGetUniqueId(parent, &id) == ncclSuccess && put_id(dir, "grow.id", &id) == 0,
           "the grow's id");
  }
  ncclResult_t res = ncclCommGrow(parent, 3, NULL, -1, &grown, NULL);
  expect(res == ncclSuccess, "grow to 3 hosts");
  if (res != ncclSuccess || !all_colls(grown, host, "grown to 3 hosts") ||
      !all_colls(parent, host, "the parent after the grow")) {
    return 1;
  }
  int out = 2, n = 0, me = -1;
  res = ncclCommShrink(grown, &out, 1, &shrunk, NULL, NCCL_SHRINK_DEFAULT);
  expect(res == ncclSuccess, "shrink back to 2 hosts");
  if (res == ncclSuccess) {
    ncclCommCount(shrunk, &n);
    ncclCommUserRank(shrunk, &me);
    expect(n == 2 && me == rank, "the shrunk communicator's shape");
    all_colls(shrunk, host, "shrunk back to 2 hosts");
  }
  if (rank == 0) {
    expect(put_id(dir, "done", &id) == 0, "the end's mark");
  }
  ncclCommDestroy(shrunk);
  ncclCommDestroy(grown);
  ncclCommDestroy(parent);
  return failed != 0;
}

static int joining(const char* dir, const char* host) {
  ncclUniqueId id;
  ncclComm_t grown = NULL;
  expect(get_id(dir, "grow.id", &id) == 0, "the grow's id");
  ncclResult_t res = failed ? ncclInvalidUsage : ncclCommGrow(NULL, 3, &id, 2, &grown, NULL);
  expect(res == ncclSuccess, "join the grow as rank 2");
  if (res == ncclSuccess) {
    all_colls(grown, host, "grown to 3 hosts");
  }
  /* Left out of the shrink: it leaves once the others are done, so that
   * nothing it sent can be cut off on its way. */
  expect(get_id(dir, "done", &id) == 0, "the others' end");
  ncclCommDestroy(grown);
  return failed != 0;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s DIR 0|1|new\n", argv[0]);
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  const int rc = strcmp(argv[2], "new") == 0 ? joining(argv[1], "2")
                                             : existing(argv[1], atoi(argv[2]), argv[2]);
  printf("grow host %s: %ld passed, %ld failed\n", strcmp(argv[2], "new") == 0 ? "2" : argv[2],
         passed, failed);
  return rc;
}
