/* NCCL 2.32's per-call configurations on host buffers, a check per field of
 * ncclCollConfig_t (ranks as communicators of one thread, in groups), the
 * configs of older headers, the 2.31/2.32 fields of ncclConfig_t,
 * ncclSetEncryption's checks and the CFT host functions' answers. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/devcomm.h"
#include "harness.h"
#include "nccl.h"

#define N 3
static ncclComm_t comms[N];
static ncclComm_t solo; /* a communicator of one rank: its calls run at once */
static char log_path[64];

ncclTeam_t ncclTeamCft(ncclComm_t comm, ncclCftTeamMode_t mode);
ncclTeam_t ncclTeamCftMultimem(ncclComm_t comm);
ncclResult_t ncclGetPeerDeviceLeInfo(ncclWindow_t window, size_t offset, int peerWorld,
                                     ncclCftLeId* leId, size_t* leOffset);

/* An allreduce of `count` floats on every rank within `cfg` (one per rank:
 * NULL for the plain call); 1 when it succeeded with the right sums. */
static int allreduce(size_t count, const ncclCollConfig_t* cfg) {
  float* v[N];
  for (int r = 0; r < N; r++) {
    v[r] = malloc(count * sizeof(float));
    for (size_t i = 0; i < count; i++)
      v[r][i] = (float)(r + 1 + (int)(i % 7));
  }
  ncclGroupStart();
  for (int r = 0; r < N; r++)
    ncclAllReduceConfig(v[r], v[r], count, ncclFloat, ncclSum, comms[r], NULL, cfg);
  int ok = ncclGroupEnd() == ncclSuccess;
  for (int r = 0; r < N; r++) {
    for (size_t i = 0; i < count && ok; i++)
      ok = v[r][i] == (float)(6 + 3 * (int)(i % 7));
    free(v[r]);
  }
  return ok;
}

/* Whether the log holds a line with both `a` and `b`. */
static int logged(const char* a, const char* b) {
  FILE* f = fopen(log_path, "r");
  char line[1024];
  int found = 0;
  while (f != NULL && !found && fgets(line, sizeof line, f) != NULL)
    found = strstr(line, a) != NULL && (b == NULL || strstr(line, b) != NULL);
  if (f != NULL)
    fclose(f);
  return found;
}

/* A solo call of `cfg` fails with `want` and a last error containing `text`. */
static void refused(const ncclCollConfig_t* cfg, ncclResult_t want, const char* text) {
  float x = 1;
  ncclResult_t r = ncclAllReduceConfig(&x, &x, 1, ncclFloat, ncclSum, solo, NULL, cfg);
  const char* why = ncclGetLastError(NULL);
  CHECK(r == want && strstr(why, text) != NULL, "got %d (%s), wanted %d with \"%s\"", (int)r, why,
        (int)want, text);
}

static void fields(void) {
  /* NULL: the plain call. */
  CHECK(allreduce(1000, NULL), "a NULL config");
  ncclCollConfig_t c = NCCL_COLLCONFIG_INITIALIZER;
  CHECK(c.size == sizeof c && c.forceAlgSelection == 1 && c.launchCompletionEvent == NULL,
        "the initializer");
  CHECK(allreduce(1001, &c), "the initializer's config");

  /* magic, size, version. */
  c.magic = 0;
  refused(&c, ncclInvalidArgument, "magic");
  c = (ncclCollConfig_t)NCCL_COLLCONFIG_INITIALIZER;
  c.size = 8;
  refused(&c, ncclInvalidArgument, "too small");
  /* A 2.31 program's config: smaller, version 23102; what lies after its
   * end is not read. */
  struct {
    ncclCollConfig_t c;
    char junk[64];
  } old;
  memset(&old, 0x5a, sizeof old);
  old.c = (ncclCollConfig_t)NCCL_COLLCONFIG_INITIALIZER;
  old.c.size = offsetof(ncclCollConfig_t, launchCompletionEvent);
  old.c.version = 23102;
  memset(&old.c.launchCompletionEvent, 0x5a, sizeof old.c.launchCompletionEvent);
  CHECK(allreduce(1002, &old.c), "a 2.31 config with junk past its size");

  /* ext: vendors' options, ignored. */
  ncclConfigExt_t ext = {NULL, {12345, 1}, {.i = 7}};
  c = (ncclCollConfig_t)NCCL_COLLCONFIG_INITIALIZER;
  c.ext = &ext;
  CHECK(allreduce(1003, &c), "a vendor's option");

  /* minCTAs, maxCTAs, nvlsCTAs: checked (host calls have no channels). */
  c = (ncclCollConfig_t)NCCL_COLLCONFIG_INITIALIZER;
  c.minCTAs = 2;
  c.maxCTAs = 4;
  c.nvlsCTAs = 1;
  CHECK(allreduce(1004, &c), "min/max/nvlsCTAs");
  c.maxCTAs = 0;
  refused(&c, ncclInvalidArgument, "maxCTAs is 0");
  c.maxCTAs = 1;
  refused(&c, ncclInvalidArgument, "minCTAs (2) exceeds maxCTAs (1)");
  c = (ncclCollConfig_t)NCCL_COLLCONFIG_INITIALIZER;
  c.cgaClusterSize = 2;
  CHECK(allreduce(1005, &c), "cgaClusterSize");

  /* CTAPolicy. */
  c.CTAPolicy = NCCL_CTA_POLICY_EFFICIENCY;
  CHECK(allreduce(1006, &c), "CTAPolicy");
  c.CTAPolicy = 8;
  refused(&c, ncclInvalidArgument, "CTAPolicy is 8");

  /* algSelection: the plan takes what it names (tutti's names, NCCL's). */
  c = (ncclCollConfig_t)NCCL_COLLCONFIG_INITIALIZER;
  c.algSelection = "Ring";
  CHECK(allreduce(1111, &c) && logged("4444 bytes", "host buffers: Ring"), "algSelection Ring");
  c.algSelection = "tree_simple";
  /* NCCL's tree: tutti's, or the hierarchy (its Tree crosses hosts too). */
  CHECK(allreduce(1112, &c) && (logged("4448 bytes", "host buffers: Tree") ||
                                logged("4448 bytes", "host buffers: Hier")),
        "algSelection TREE_SIMPLE");
  c.algSelection = "Ring,Direct+^Ring";
  CHECK(allreduce(1113, &c) && (logged("4452 bytes", "host buffers: Ring") ||
                                logged("4452 bytes", "host buffers: Direct")),
        "algSelection with , + ^");
  /* forceAlgSelection: what cannot run is an error, or the usual choice. */
  c.algSelection = "Mapped";
  refused(&c, ncclInvalidArgument, "\"Mapped\" cannot be honoured");
  c.algSelection = "Bogus";
  refused(&c, ncclInvalidArgument, "names no algorithm");
  c.forceAlgSelection = 0;
  CHECK(allreduce(1114, &c), "an unknown selection, not forced");
  c.algSelection = "SYMK";
  CHECK(allreduce(1115, &c), "a selection that cannot run here, not forced");
  c.forceAlgSelection = 2;
  refused(&c, ncclInvalidArgument, "forceAlgSelection is 2");

  /* userProfilerTag: in the call's record and its trace line. */
  c = (ncclCollConfig_t)NCCL_COLLCONFIG_INITIALIZER;
  c.userProfilerTag = 424242;
  CHECK(allreduce(1200, &c) && logged("ncclAllReduceConfig", "tag 424242"), "userProfilerTag");

  /* launchCompletionEvent: without a CUDA driver nothing can record it. */
  c = (ncclCollConfig_t)NCCL_COLLCONFIG_INITIALIZER;
  c.launchCompletionEvent = (cudaEvent_t)&c;
  refused(&c, ncclInvalidArgument, "launchCompletionEvent");
}

/* Every other collective through its Config function, config NULL and set. */
static void every_coll(void) {
  ncclCollConfig_t c = NCCL_COLLCONFIG_INITIALIZER;
  c.algSelection = "Direct";
  for (int k = 0; k < 2; k++) {
    const ncclCollConfig_t* cfg = k ? &c : NULL;
    int s[N][N], d[N][N];
    for (int r = 0; r < N; r++)
      for (int i = 0; i < N; i++)
        s[r][i] = 10 * r + i, d[r][i] = -1;
    ncclGroupStart();
    for (int r = 0; r < N; r++)
      ncclAlltoAllConfig(s[r], d[r], 1, ncclInt, comms[r], NULL, cfg);
    int ok = ncclGroupEnd() == ncclSuccess;
    for (int r = 0; r < N; r++)
      for (int i = 0; i < N; i++)
        ok &= d[r][i] == 10 * i + r;
    CHECK(ok, "ncclAlltoAllConfig (config %d)", k);
    ncclGroupStart();
    for (int r = 0; r < N; r++)
      ncclAllGatherConfig(&s[r][0], d[r], 1, ncclInt, comms[r], NULL, cfg);
    ok = ncclGroupEnd() == ncclSuccess;
    for (int r = 0; r < N; r++)
      for (int i = 0; i < N; i++)
        ok &= d[r][i] == 10 * i;
    CHECK(ok, "ncclAllGatherConfig (config %d)", k);
    int one[N];
    ncclGroupStart();
    for (int r = 0; r < N; r++)
      ncclReduceScatterConfig(s[r], &one[r], 1, ncclInt, ncclSum, comms[r], NULL, cfg);
    ok = ncclGroupEnd() == ncclSuccess;
    for (int r = 0; r < N; r++)
      ok &= one[r] == 30 + 3 * r;
    CHECK(ok, "ncclReduceScatterConfig (config %d)", k);
    ncclGroupStart();
    for (int r = 0; r < N; r++) {
      one[r] = r + 1;
      ncclBroadcastConfig(&one[r], &one[r], 1, ncclInt, 1, comms[r], NULL, cfg);
    }
    ok = ncclGroupEnd() == ncclSuccess;
    for (int r = 0; r < N; r++)
      ok &= one[r] == 2;
    CHECK(ok, "ncclBroadcastConfig (config %d)", k);
    int sum = -1;
    ncclGroupStart();
    for (int r = 0; r < N; r++)
      ncclReduceConfig(&s[r][0], &sum, 1, ncclInt, ncclSum, 2, comms[r], NULL, cfg);
    CHECK(ncclGroupEnd() == ncclSuccess && sum == 30, "ncclReduceConfig (config %d)", k);
    ncclGroupStart();
    for (int r = 0; r < N; r++)
      ncclGatherConfig(&s[r][0], d[0], 1, ncclInt, 0, comms[r], NULL, cfg);
    ok = ncclGroupEnd() == ncclSuccess;
    for (int i = 0; i < N; i++)
      ok &= d[0][i] == 10 * i;
    CHECK(ok, "ncclGatherConfig (config %d)", k);
    ncclGroupStart();
    for (int r = 0; r < N; r++)
      ncclScatterConfig(s[0], &one[r], 1, ncclInt, 0, comms[r], NULL, cfg);
    ok = ncclGroupEnd() == ncclSuccess;
    for (int r = 0; r < N; r++)
      ok &= one[r] == r;
    CHECK(ok, "ncclScatterConfig (config %d)", k);
  }
}

/* ncclConfig_t's 2.31 and 2.32 fields, and an older program's config. */
static void comm_config(void) {
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  CHECK(c.size == 120 && offsetof(ncclConfig_t, nvlsHostMode) == 112, "ncclConfig_v23100");
  ncclUniqueId id;
  ncclComm_t comm;
  CHECK_NCCL(ncclGetUniqueId(&id));
  c.launchOrderImplicit = 1;
  c.numRmaSig = 4;
  c.rmaEagerInit = 0;
  c.hostCftMode = ncclHostCftFallback;
  c.nvlsHostMode = ncclNvlsHostModeDisable;
  CHECK_NCCL(ncclCommInitRankConfig(&comm, 1, id, 0, &c));
  ncclCommDestroy(comm);
  c.hostCftMode = ncclHostCftEnable;
  CHECK_NCCL(ncclGetUniqueId(&id));
  ncclResult_t r = ncclCommInitRankConfig(&comm, 1, id, 0, &c);
  CHECK(r == ncclInvalidUsage && strstr(ncclGetLastError(NULL), "Compute Fabric") != NULL,
        "ncclHostCftEnable: %d %s", (int)r, ncclGetLastError(NULL));
  c.hostCftMode = NCCL_CONFIG_UNDEF_INT;
  c.launchOrderImplicit = 2;
  CHECK_NCCL(ncclGetUniqueId(&id));
  r = ncclCommInitRankConfig(&comm, 1, id, 0, &c);
  CHECK(r == ncclInvalidArgument && strstr(ncclGetLastError(NULL), "launchOrderImplicit") != NULL,
        "launchOrderImplicit 2: %d", (int)r);
  /* A 2.30 program's config: 2.31's fields hold junk, not read. */
  c.launchOrderImplicit = 7;
  c.hostCftMode = 99;
  c.version = 23007;
  c.size = offsetof(ncclConfig_t, launchOrderImplicit);
  CHECK_NCCL(ncclGetUniqueId(&id));
  CHECK_NCCL(ncclCommInitRankConfig(&comm, 1, id, 0, &c));
  ncclCommDestroy(comm);
}

static void encryption(void) {
  CHECK_NCCL(ncclSetEncryption(NULL));
  ncclEncryptionConfig_t e = NCCL_ENCRYPTION_CONFIG_INITIALIZER;
  CHECK(sizeof e == 32 && e.mode == NCCL_ENCRYPTION_MODE_NONE && e.psk == NULL, "initializer");
  CHECK_NCCL(ncclSetEncryption(&e));
  e.mode = NCCL_ENCRYPTION_MODE_PSK;
  e.psk = "short";
  CHECK(ncclSetEncryption(&e) == ncclInvalidArgument, "a short key");
  e.psk = "0123456789abcdef0123456789abcdef-test-key";
  CHECK_NCCL(ncclSetEncryption(&e)); /* OpenSSL 3 is installed where tests run */
  e.magic = 1;
  CHECK(ncclSetEncryption(&e) == ncclInvalidArgument, "bad magic");
  CHECK_NCCL(ncclSetEncryption(NULL)); /* the later communicators stay in one process */
}

static void cft(void) {
  ncclTeam_t t = ncclTeamCft(solo, NCCL_CFT_TEAM_FLAT);
  CHECK(t.nRanks == 1 && t.rank == 0 && t.stride == 1, "ncclTeamCft");
  t = ncclTeamCft(solo, (ncclCftTeamMode_t)9);
  CHECK(t.nRanks == 0, "ncclTeamCft of an unknown mode");
  t = ncclTeamCftMultimem(solo);
  CHECK(t.nRanks == 1 && t.rank == 0, "ncclTeamCftMultimem");
  ncclCftLeId le = 0;
  size_t off = 1;
  CHECK(ncclGetPeerDeviceLeInfo(NULL, 0, 0, &le, &off) == ncclInvalidArgument &&
            le == (ncclCftLeId)-1,
        "LE info of no window");
  CHECK(NCCL_WIN_GIN_ONLY == 0x04 && NCCL_WIN_CFT_COUNTED == 0x08, "window flags");
  /* 2.32's window flags are taken; a window has no CFT endpoints. */
  static char buf[1 << 16];
  ncclWindow_t w = NULL;
  CHECK_NCCL(
      ncclCommWindowRegister(solo, buf, sizeof buf, &w, NCCL_WIN_GIN_ONLY | NCCL_WIN_CFT_COUNTED));
  if (w != NULL) {
    ncclResult_t r = ncclGetPeerDeviceLeInfo(w, 0, 0, &le, &off);
    CHECK(r == ncclInvalidUsage && strstr(ncclGetLastError(NULL), "Compute Fabric") != NULL &&
              le == (ncclCftLeId)-1 && off == 0,
          "LE info of a window: %d %s", (int)r, ncclGetLastError(NULL));
    CHECK_NCCL(ncclCommWindowDeregister(solo, w));
  }
  CHECK(ncclCommWindowRegister(solo, buf, sizeof buf, &w, 0x10) == ncclInvalidArgument,
        "an unknown window flag");
}

int main(void) {
  snprintf(log_path, sizeof log_path, "/tmp/tutti-collcfg-%d.log", (int)getpid());
  setenv("NCCL_DEBUG", "TRACE", 1);
  setenv("NCCL_DEBUG_SUBSYS", "COLL,TUNING", 1);
  setenv("NCCL_DEBUG_FILE", log_path, 1);
  setenv("TUTTI_CUDA_DISABLE", "1", 1);
  int v = 0;
  CHECK(ncclGetVersion(&v) == ncclSuccess && v == 23206, "version %d", v);
  ncclUniqueId id;
  CHECK_NCCL(ncclGetUniqueId(&id));
  ncclGroupStart();
  for (int r = 0; r < N; r++)
    ncclCommInitRank(&comms[r], N, id, r);
  CHECK_NCCL(ncclGroupEnd());
  CHECK_NCCL(ncclGetUniqueId(&id));
  CHECK_NCCL(ncclCommInitRank(&solo, 1, id, 0));
  fields();
  every_coll();
  comm_config();
  encryption();
  cft();
  for (int r = 0; r < N; r++)
    ncclCommDestroy(comms[r]);
  ncclCommDestroy(solo);
  if (test_failed == 0)
    unlink(log_path);
  return test_summary("coll_config");
}
