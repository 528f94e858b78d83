/* The API with ranks as threads: init paths (per thread, several from one
 * thread in a group, ncclCommInitAll, non-blocking), groups across
 * communicators, split, PreMulSum operators, every argument check and the
 * error texts, abort from another thread, and what init/destroy leaves behind. */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "nccl.h"
#include "ranks.h"
#include "rundir.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int count_fds(void) {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  for (struct dirent* e; d && (e = readdir(d)) != NULL;)
    n += e->d_name[0] != '.';
  if (d)
    closedir(d);
  return n;
}

static int count_shm(void) {
  int n = 0;
  DIR* d = opendir("/dev/shm");
  for (struct dirent* e; d && (e = readdir(d)) != NULL;)
    n += strncmp(e->d_name, "tutti-", 6) == 0;
  if (d)
    closedir(d);
  return n;
}

static int allreduce_ok(ncclComm_t comm, int rank, int n, size_t count) {
  float* buf = calloc(count, sizeof(float));
  for (size_t i = 0; i < count; i++)
    buf[i] = (float)(rank + 1);
  int ok = ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, NULL) == ncclSuccess;
  for (size_t i = 0; i < count && ok; i++)
    ok = buf[i] == (float)(n * (n + 1) / 2);
  free(buf);
  return ok;
}

static void body_init_allreduce(struct rank_ctx* c) {
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, c->nranks, c->id, c->rank) != ncclSuccess)
    return;
  int count = -1, rank = -1;
  ncclCommCount(comm, &count);
  ncclCommUserRank(comm, &rank);
  c->result =
      count == c->nranks && rank == c->rank && allreduce_ok(comm, c->rank, c->nranks, 100003);
  ncclCommDestroy(comm);
}

static void test_versions_and_strings(void) {
  int v = 0;
  CHECK_NCCL(ncclGetVersion(&v));
  CHECK(v == NCCL_VERSION_CODE && v == 23206, "version %d", v);
  CHECK(strcmp(ncclGetErrorString(ncclTimeout), "timeout") == 0, "ncclTimeout text");
  CHECK(ncclGetVersion(NULL) == ncclInvalidArgument, "NULL version");
  for (int r = 0; r <= ncclNumResults; r++) {
    CHECK(ncclGetErrorString((ncclResult_t)r) != NULL, "error string %d", r);
  }
  CHECK(strstr(ncclGetErrorString(ncclRemoteError), "remote") != NULL, "remote error text");
}

static void test_threads(void) {
  for (int n = 1; n <= 8; n *= 2) {
    CHECK(run_ranks(n, body_init_allreduce, NULL) == n, "init + allreduce, %d ranks as threads", n);
  }
}

/* nccl-tests' pattern: one thread owns every rank. */
static void test_one_thread_many_ranks(void) {
  const int n = 4;
  ncclComm_t comms[4];
  CHECK_NCCL(ncclCommInitAll(comms, n, NULL));
  float* bufs[4];
  for (int r = 0; r < n; r++) {
    bufs[r] = malloc(1000 * sizeof(float));
    for (int i = 0; i < 1000; i++)
      bufs[r][i] = (float)r;
  }
  CHECK_NCCL(ncclGroupStart());
  for (int r = 0; r < n; r++)
    CHECK_NCCL(ncclAllReduce(bufs[r], bufs[r], 1000, ncclFloat, ncclMax, comms[r], NULL));
  CHECK_NCCL(ncclGroupEnd());
  int ok = 1;
  for (int r = 0; r < n; r++)
    for (int i = 0; i < 1000; i++)
      ok &= bufs[r][i] == 3.0f;
  CHECK(ok, "grouped allreduce over 4 communicators from one thread");
  int dev = -5;
  CHECK_NCCL(ncclCommCuDevice(comms[2], &dev));
  CHECK(dev == 2, "ncclCommInitAll assigns devices in order: got %d", dev);
  for (int r = 0; r < n; r++) {
    CHECK_NCCL(ncclCommDestroy(comms[r]));
    free(bufs[r]);
  }
  /* Several ncclCommInitRankConfig from one thread inside a group. */
  ncclUniqueId id;
  CHECK_NCCL(ncclGetUniqueId(&id));
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.commName = "grouped";
  CHECK_NCCL(ncclGroupStart());
  for (int r = 0; r < 3; r++)
    CHECK_NCCL(ncclCommInitRankConfig(&comms[r], 3, id, r, &cfg));
  CHECK_NCCL(ncclGroupEnd());
  int32_t vals[3][6];
  CHECK_NCCL(ncclGroupStart());
  for (int r = 0; r < 3; r++) {
    vals[r][r] = 10 + r;
    CHECK_NCCL(ncclAllGather(&vals[r][r], vals[r], 1, ncclInt32, comms[r], NULL));
  }
  CHECK_NCCL(ncclGroupEnd());
  CHECK(vals[0][0] == 10 && vals[1][1] == 11 && vals[2][2] == 12 && vals[2][0] == 10 &&
            vals[0][2] == 12,
        "in-place allgather after grouped init");
  for (int r = 0; r < 3; r++)
    CHECK_NCCL(ncclCommDestroy(comms[r]));
}

static void body_split(struct rank_ctx* c) {
  ncclComm_t comm, sub = NULL, none = (ncclComm_t)1;
  if (ncclCommInitRank(&comm, c->nranks, c->id, c->rank) != ncclSuccess)
    return;
  int color = c->rank % 2, key = -c->rank; /* reversed order inside each color */
  int ok = ncclCommSplit(comm, color, key, &sub, NULL) == ncclSuccess && sub != NULL;
  int subn = 0, subr = -1;
  if (ok) {
    ncclCommCount(sub, &subn);
    ncclCommUserRank(sub, &subr);
    int members = (c->nranks + 1 - color) / 2;
    ok = subn == members && subr == members - 1 - c->rank / 2;
    int v = c->rank, sum = 0;
    ok = ok && ncclAllReduce(&v, &sum, 1, ncclInt32, ncclSum, sub, NULL) == ncclSuccess;
    int want = 0;
    for (int r = color; r < c->nranks; r += 2)
      want += r;
    ok = ok && sum == want;
    ncclCommDestroy(sub);
  }
  /* NCCL_SPLIT_NOCOLOR: the caller takes part but gets no communicator. */
  int res = ncclCommSplit(comm, c->rank == 0 ? NCCL_SPLIT_NOCOLOR : 0, 0, &none, NULL);
  ok = ok && res == ncclSuccess && ((c->rank == 0) == (none == NULL));
  if (none != NULL)
    ncclCommDestroy(none);
  ncclCommDestroy(comm);
  c->result = ok;
}

static void test_split(void) {
  CHECK(run_ranks(5, body_split, NULL) == 5, "split 5 ranks by parity with reversed keys");
}

static void body_premulsum(struct rank_ctx* c) {
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, c->nranks, c->id, c->rank) != ncclSuccess)
    return;
  double scalar = 0.5, vals[4] = {2, 4, 6, 8}, out[4];
  ncclRedOp_t op;
  int ok = ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat64, ncclScalarHostImmediate, comm) ==
           ncclSuccess;
  scalar = 100; /* immediate: the value was taken at creation */
  ok = ok && ncclAllReduce(vals, out, 4, ncclFloat64, op, comm, NULL) == ncclSuccess;
  for (int i = 0; i < 4 && ok; i++)
    ok = out[i] == vals[i] * 0.5 * c->nranks;
  ok = ok && ncclAllReduce(vals, out, 4, ncclFloat32, op, comm, NULL) == ncclInvalidArgument;
  ok = ok && ncclRedOpDestroy(op, comm) == ncclSuccess;
  ok = ok && ncclRedOpDestroy(op, comm) == ncclInvalidArgument;
  ok = ok && ncclRedOpDestroy(ncclSum, comm) == ncclInvalidArgument;
  ncclCommDestroy(comm);
  c->result = ok;
}

static void test_bad_arguments(void) {
  ncclComm_t comms[2];
  CHECK_NCCL(ncclCommInitAll(comms, 2, NULL));
  ncclComm_t c = comms[0];
  float buf[4];
  CHECK(ncclAllReduce(buf, buf, 4, ncclFloat, ncclSum, NULL, NULL) == ncclInvalidArgument,
        "NULL comm");
  CHECK(strstr(ncclGetLastError(NULL), "comm is NULL") != NULL, "text: %s", ncclGetLastError(NULL));
  CHECK(ncclAllReduce(NULL, buf, 4, ncclFloat, ncclSum, c, NULL) == ncclInvalidArgument,
        "NULL sendbuff");
  CHECK(strstr(ncclGetLastError(c), "sendbuff is NULL") != NULL, "text: %s", ncclGetLastError(c));
  CHECK(ncclAllReduce(buf, NULL, 4, ncclFloat, ncclSum, c, NULL) == ncclInvalidArgument,
        "NULL recvbuff");
  CHECK(ncclAllReduce(buf, buf, 4, (ncclDataType_t)12, ncclSum, c, NULL) == ncclInvalidArgument,
        "bad type");
  CHECK(strstr(ncclGetLastError(c), "invalid datatype 12") != NULL, "text: %s",
        ncclGetLastError(c));
  CHECK(ncclAllReduce(buf, buf, 4, (ncclDataType_t)-1, ncclSum, c, NULL) == ncclInvalidArgument,
        "negative type");
  CHECK(ncclAllReduce(buf, buf, 4, ncclFloat, (ncclRedOp_t)42, c, NULL) == ncclInvalidArgument,
        "bad op");
  CHECK(ncclReduce(buf, buf, 4, ncclFloat, ncclSum, 2, c, NULL) == ncclInvalidArgument,
        "root out of range");
  CHECK(strstr(ncclGetLastError(c), "root 2 is out of range") != NULL, "text: %s",
        ncclGetLastError(c));
  CHECK(ncclBroadcast(buf, buf, 4, ncclFloat, -1, c, NULL) == ncclInvalidArgument, "negative root");
  CHECK(ncclSend(buf, 4, ncclFloat, 5, c, NULL) == ncclInvalidArgument, "peer out of range");
  CHECK(ncclRecv(buf, 4, ncclFloat, -2, c, NULL) == ncclInvalidArgument, "negative peer");
  CHECK(ncclAllGather(buf, buf, (size_t)-1 / 2, ncclFloat, c, NULL) == ncclInvalidArgument,
        "count overflow");
  CHECK(ncclAllReduce(NULL, NULL, 0, ncclFloat, ncclSum, c, NULL) == ncclSuccess,
        "count 0 with NULL buffers");
  CHECK(ncclGroupEnd() == ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  /* An invalid call inside a group fails the whole group; nothing runs. */
  CHECK_NCCL(ncclGroupStart());
  buf[0] = 7;
  ncclAllReduce(buf, buf, 4, ncclFloat, ncclSum, comms[0], NULL);
  CHECK(ncclAllReduce(buf, buf, 4, (ncclDataType_t)99, ncclSum, comms[1], NULL) ==
            ncclInvalidArgument,
        "bad call in group");
  CHECK(ncclGroupEnd() == ncclInvalidArgument, "group with a bad call fails");
  CHECK(buf[0] == 7, "nothing ran");
  int count;
  CHECK(ncclCommCount(c, NULL) == ncclInvalidArgument, "NULL count");
  CHECK(ncclCommUserRank(NULL, &count) == ncclInvalidArgument, "NULL comm for rank");
  ncclResult_t async;
  CHECK_NCCL(ncclCommGetAsyncError(c, &async));
  CHECK(async == ncclSuccess, "async error %d", (int)async);
  CHECK_NCCL(ncclCommFinalize(comms[0]));
  CHECK_NCCL(ncclCommFinalize(comms[1]));
  CHECK_NCCL(ncclCommDestroy(comms[0]));
  CHECK_NCCL(ncclCommDestroy(comms[1]));
  CHECK(ncclAllReduce(buf, buf, 4, ncclFloat, ncclSum, c, NULL) == ncclInvalidArgument,
        "destroyed comm");
  CHECK(strstr(ncclGetLastError(NULL), "not a live communicator") != NULL, "text: %s",
        ncclGetLastError(NULL));
  CHECK(ncclCommCount(c, &count) == ncclInvalidArgument, "destroyed comm count");
  CHECK(ncclCommDestroy(NULL) == ncclSuccess, "destroy NULL");

  /* Init arguments and configs. */
  ncclUniqueId id;
  ncclComm_t nc = (ncclComm_t)1;
  CHECK_NCCL(ncclGetUniqueId(&id));
  CHECK(ncclCommInitRank(&nc, 0, id, 0) == ncclInvalidArgument, "nranks 0");
  CHECK(nc == NULL, "output cleared on failure");
  CHECK(ncclCommInitRank(&nc, 2, id, 2) == ncclInvalidArgument, "rank out of range");
  CHECK(ncclCommInitRank(NULL, 2, id, 0) == ncclInvalidArgument, "NULL output");
  ncclUniqueId junk;
  memset(&junk, 0xab, sizeof junk);
  CHECK(ncclCommInitRank(&nc, 1, junk, 0) == ncclInvalidArgument, "garbage unique id");
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.magic = 0;
  CHECK(ncclCommInitRankConfig(&nc, 1, id, 0, &cfg) == ncclInvalidArgument, "config magic");
  CHECK(strstr(ncclGetLastError(NULL), "NCCL_CONFIG_INITIALIZER") != NULL, "text: %s",
        ncclGetLastError(NULL));
  ncclConfig_t cfg2 = NCCL_CONFIG_INITIALIZER;
  cfg2.blocking = 3;
  CHECK(ncclCommInitRankConfig(&nc, 1, id, 0, &cfg2) == ncclInvalidArgument, "config blocking 3");
  ncclConfig_t cfg3 = NCCL_CONFIG_INITIALIZER;
  cfg3.version = 100;
  CHECK(ncclCommInitRankConfig(&nc, 1, id, 0, &cfg3) == ncclInvalidArgument, "config version");
  /* A config from an older NCCL (smaller size) is read up to its size. */
  ncclConfig_t cfg4 = NCCL_CONFIG_INITIALIZER;
  cfg4.size = offsetof(ncclConfig_t, netName);
  cfg4.commName = (const char*)0x1; /* beyond `size`: must not be read */
  CHECK_NCCL(ncclCommInitRankConfig(&nc, 1, id, 0, &cfg4));
  CHECK_NCCL(ncclCommDestroy(nc));
}

static void test_nonblocking(void) {
  ncclUniqueId id;
  CHECK_NCCL(ncclGetUniqueId(&id));
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclComm_t comm = NULL;
  ncclResult_t r = ncclCommInitRankConfig(&comm, 1, id, 0, &cfg);
  CHECK(r == ncclInProgress || r == ncclSuccess, "non-blocking init returns %d", (int)r);
  ncclResult_t state = ncclInProgress;
  double t0 = now();
  while (state == ncclInProgress && now() - t0 < 20)
    ncclCommGetAsyncError(comm, &state);
  CHECK(state == ncclSuccess, "non-blocking init completes: %d", (int)state);
  CHECK(allreduce_ok(comm, 0, 1, 10), "allreduce on a non-blocking communicator");
  CHECK_NCCL(ncclCommDestroy(comm));
}

struct abort_arg {
  ncclComm_t comm;
  double at;
};

static void* abort_later(void* p) {
  struct abort_arg* a = p;
  usleep(300 * 1000);
  a->at = now();
  ncclCommAbort(a->comm);
  return NULL;
}

static void test_abort_unblocks(void) {
  ncclComm_t comms[2];
  CHECK_NCCL(ncclCommInitAll(comms, 2, NULL));
  /* Rank 1 never joins: rank 0 waits until the abort arrives. */
  struct abort_arg a = {comms[0], 0};
  pthread_t th;
  pthread_create(&th, NULL, abort_later, &a);
  float buf[64] = {0};
  ncclResult_t r = ncclAllReduce(buf, buf, 64, ncclFloat, ncclSum, comms[0], NULL);
  double returned = now();
  pthread_join(th, NULL);
  CHECK(r != ncclSuccess, "aborted allreduce fails");
  CHECK(returned - a.at < 1.0, "abort unblocked the call after %.3f s", returned - a.at);
  CHECK_NCCL(ncclCommDestroy(comms[1]));
}

static void test_premulsum(void) {
  CHECK(run_ranks(3, body_premulsum, NULL) == 3, "PreMulSum create/use/destroy");
}

static void test_no_leaks(void) {
  run_ranks(2, body_init_allreduce, NULL); /* warm up lazily created state */
  int fds = count_fds();
  for (int i = 0; i < 100; i++)
    run_ranks(2, body_init_allreduce, NULL);
  /* The roots' threads close their sockets once their last reply is out:
   * allow them a moment on a loaded machine. */
  for (int t = 0; t < 50 && count_fds() != fds; t++) {
    usleep(100 * 1000);
  }
  CHECK(count_fds() == fds, "fds after 100 init/destroy cycles: %d, before %d", count_fds(), fds);
  CHECK(count_shm() == 0, "no tutti segment left in /dev/shm (%d)", count_shm());
}

int main(void) {
  /* test_no_leaks counts descriptors: the RAS host role stays here. */
  char run_dir[] = "/tmp/tutti-api-XXXXXX";
  if (test_rundir_make(run_dir) != 0) {
    perror("test_api: a private runtime directory");
    return 1;
  }
  test_versions_and_strings();
  test_threads();
  test_one_thread_many_ranks();
  test_split();
  test_premulsum();
  test_bad_arguments();
  test_nonblocking();
  test_abort_unblocks();
  test_no_leaks();
  test_rundir_remove(run_dir);
  return test_summary("api");
}
