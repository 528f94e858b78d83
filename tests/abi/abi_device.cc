// Built against NVIDIA's NCCL 2.30.7 nccl_device.h (C++, host side only) and
// linked to libtutti.so: the device API's host functions through NVIDIA's
// types. The requirement helpers are pure functions: each is compared, field
// by field over a grid of arguments, with NVIDIA's own library, loaded
// privately by path (it needs no GPU for these).
#include <cstddef>
#include <cuda_runtime.h>
#include <nccl.h>
#include <nccl_device.h>

#include <dlfcn.h>
#include <cstdio>
#include <cstring>
#include <pthread.h>

// The scratch helpers' handles are declared by NVIDIA's headers for Windows
// only (gin_win_stub.h); their layout, for the calls below.
struct OutboxHandle {
  uint32_t bufHandle, size_log2;
};
struct InboxA2AHandle {
  uint32_t bufHandle, signals, size_log2, nPeers_rcp32;
};
extern "C" ncclResult_t ncclGinOutboxCreateRequirement(int, int, OutboxHandle*,
                                                       ncclDevResourceRequirements_t*);
extern "C" ncclResult_t ncclGinInboxA2ACreateRequirement(ncclTeam_t, int, int, InboxA2AHandle*,
                                                         ncclDevResourceRequirements_t*);

static int passed, failed;
#define CHECK(cond, ...)            \
  do {                              \
    if (cond) {                     \
      passed++;                     \
    } else {                        \
      failed++;                     \
      printf("FAIL: " __VA_ARGS__); \
      printf("\n");                 \
    }                               \
  } while (0)

static void* nvlib;
template <typename F>
static F nvsym(const char* name) {
  F f = reinterpret_cast<F>(dlsym(nvlib, name));
  if (f == nullptr) {
    printf("FAIL: NVIDIA's library has no %s\n", name);
    failed++;
  }
  return f;
}

static bool same_req(const ncclDevResourceRequirements_t& a, const ncclDevResourceRequirements_t& b,
                     const void* ha, const void* hb, size_t hbytes) {
  // Pointers into the handles must point at the same field of each.
  auto rel = [](const void* p, const void* base) {
    return p == nullptr ? -1L : (long)((const char*)p - (const char*)base);
  };
  return a.next == b.next && a.bufferSize == b.bufferSize && a.bufferAlign == b.bufferAlign &&
         rel(a.outBufferHandle, ha) == rel(b.outBufferHandle, hb) &&
         a.ginSignalCount == b.ginSignalCount && a.ginCounterCount == b.ginCounterCount &&
         rel(a.outGinSignalStart, ha) == rel(b.outGinSignalStart, hb) &&
         rel(a.outGinCounterStart, ha) == rel(b.outGinCounterStart, hb) &&
         memcmp(ha, hb, hbytes) == 0;
}

static void helpers() {
  typedef ncclResult_t (*lsa_fn)(ncclTeam_t, int, ncclLsaBarrierHandle_t*,
                                 ncclDevResourceRequirements_t*);
  typedef ncclResult_t (*gin_fn)(ncclComm_t, ncclTeam_t, int, ncclGinBarrierHandle_t*,
                                 ncclDevResourceRequirements_t*);
  typedef int (*slots_fn)(int, int);
  typedef ncclResult_t (*a2a_fn)(int, int, ncclLLA2AHandle_t*, ncclDevResourceRequirements_t*);
  typedef ncclResult_t (*outbox_fn)(int, int, OutboxHandle*, ncclDevResourceRequirements_t*);
  typedef ncclResult_t (*inbox_fn)(ncclTeam_t, int, int, InboxA2AHandle*,
                                   ncclDevResourceRequirements_t*);
  lsa_fn nv_lsa = nvsym<lsa_fn>("ncclLsaBarrierCreateRequirement");
  gin_fn nv_gin = nvsym<gin_fn>("ncclGinBarrierCreateRequirement");
  slots_fn nv_slots = nvsym<slots_fn>("ncclLLA2ACalcSlots");
  a2a_fn nv_a2a = nvsym<a2a_fn>("ncclLLA2ACreateRequirement");
  outbox_fn nv_out = nvsym<outbox_fn>("ncclGinOutboxCreateRequirement");
  inbox_fn nv_in = nvsym<inbox_fn>("ncclGinInboxA2ACreateRequirement");
  if (!nv_lsa || !nv_gin || !nv_slots || !nv_a2a || !nv_out || !nv_in)
    return;
  // NCCL 2.32 gives a one-rank team's GIN barrier two signals (2.31: one);
  // tutti answers as the newest release, so older ones differ there only.
  typedef ncclResult_t (*version_fn)(int*);
  version_fn nv_version = nvsym<version_fn>("ncclGetVersion");
  int nv_code = 0;
  if (nv_version != nullptr)
    nv_version(&nv_code);
  const int sizes[] = {1, 2, 3, 4, 7, 8, 64};
  for (int n : sizes) {
    ncclTeam_t team = {n, n - 1, 1};
    for (int k : {0, 1, 2, 5, 16}) {
      ncclLsaBarrierHandle_t h1, h2;
      ncclDevResourceRequirements_t r1, r2;
      memset(&h1, 0x5a, sizeof h1), memset(&h2, 0x5a, sizeof h2);
      memset(&r1, 0x5a, sizeof r1), memset(&r2, 0x5a, sizeof r2);
      CHECK(ncclLsaBarrierCreateRequirement(team, k, &h1, &r1) == ncclSuccess &&
                nv_lsa(team, k, &h2, &r2) == ncclSuccess && same_req(r1, r2, &h1, &h2, sizeof h1),
            "ncclLsaBarrierCreateRequirement(team %d, %d barriers)", n, k);
      ncclGinBarrierHandle_t g1, g2;
      memset(&g1, 0x5a, sizeof g1), memset(&g2, 0x5a, sizeof g2);
      memset(&r1, 0x5a, sizeof r1), memset(&r2, 0x5a, sizeof r2);
      if (n > 1 || nv_code >= 23200)
        CHECK(ncclGinBarrierCreateRequirement(nullptr, team, k, &g1, &r1) == ncclSuccess &&
                  nv_gin(nullptr, team, k, &g2, &r2) == ncclSuccess &&
                  same_req(r1, r2, &g1, &g2, sizeof g1),
              "ncclGinBarrierCreateRequirement(team %d, %d)", n, k);
      for (int lg : {0, 6, 7, 12, 20}) {
        OutboxHandle o1, o2;
        memset(&o1, 0x5a, sizeof o1), memset(&o2, 0x5a, sizeof o2);
        memset(&r1, 0x5a, sizeof r1), memset(&r2, 0x5a, sizeof r2);
        CHECK(ncclGinOutboxCreateRequirement(k, lg, &o1, &r1) == ncclSuccess &&
                  nv_out(k, lg, &o2, &r2) == ncclSuccess && same_req(r1, r2, &o1, &o2, sizeof o1),
              "ncclGinOutboxCreateRequirement(%d blocks, 2^%d)", k, lg);
        if (n > 1) {
          InboxA2AHandle i1, i2;
          memset(&i1, 0x5a, sizeof i1), memset(&i2, 0x5a, sizeof i2);
          memset(&r1, 0x5a, sizeof r1), memset(&r2, 0x5a, sizeof r2);
          CHECK(ncclGinInboxA2ACreateRequirement(team, k, lg, &i1, &r1) == ncclSuccess &&
                    nv_in(team, k, lg, &i2, &r2) == ncclSuccess &&
                    same_req(r1, r2, &i1, &i2, sizeof i1),
                "ncclGinInboxA2ACreateRequirement(team %d, %d blocks, 2^%d)", n, k, lg);
        }
      }
    }
  }
  for (int e : {0, 1, 3, 100})
    for (int s : {1, 4, 8, 9, 16, 17}) {
      CHECK(ncclLLA2ACalcSlots(e, s) == nv_slots(e, s), "ncclLLA2ACalcSlots(%d, %d)", e, s);
      ncclLLA2AHandle_t a1, a2;
      ncclDevResourceRequirements_t r1, r2;
      memset(&a1, 0x5a, sizeof a1), memset(&a2, 0x5a, sizeof a2);
      memset(&r1, 0x5a, sizeof r1), memset(&r2, 0x5a, sizeof r2);
      CHECK(ncclLLA2ACreateRequirement(s, e, &a1, &r1) == ncclSuccess &&
                nv_a2a(s, e, &a2, &r2) == ncclSuccess && same_req(r1, r2, &a1, &a2, sizeof a1),
            "ncclLLA2ACreateRequirement(%d, %d)", s, e);
    }
}

#define NRANKS 3
static ncclComm_t comms[NRANKS];

static void queries() {
  for (int r = 0; r < NRANKS; r++) {
    ncclCommProperties_t p = NCCL_COMM_PROPERTIES_INITIALIZER;
    CHECK(ncclCommQueryProperties(comms[r], &p) == ncclSuccess, "ncclCommQueryProperties: %s",
          ncclGetLastError(comms[r]));
    CHECK(p.rank == r && p.nRanks == NRANKS && !p.deviceApiSupport && !p.multimemSupport &&
              p.hostRmaSupport && p.nLsaTeams == NRANKS && p.ginType == NCCL_GIN_TYPE_NONE,
          "properties of rank %d: rank %d nRanks %d device %d multimem %d hostRma %d lsaTeams %d",
          r, p.rank, p.nRanks, p.deviceApiSupport, p.multimemSupport, p.hostRmaSupport,
          p.nLsaTeams);
#if NCCL_VERSION_CODE >= 23100
    /* 2.31's: one hash on every rank, no GIN. */
    static uint64_t hash0;
    hash0 = r == 0 ? p.commHash : hash0;
    CHECK(p.commHash != 0 && p.commHash == hash0 &&
              p.ginConnectionType == NCCL_GIN_CONNECTION_NONE &&
              !p.ginSupport[NCCL_GIN_TYPE_PROXY] && p.devCommRuntimeVersionSize == 0,
          "2.31 properties of rank %d: hash %llx connection %d", r, (unsigned long long)p.commHash,
          (int)p.ginConnectionType);
#endif
    ncclCommProperties_t bad = NCCL_COMM_PROPERTIES_INITIALIZER;
    bad.magic = 0;
    CHECK(ncclCommQueryProperties(comms[r], &bad) == ncclInvalidUsage, "properties: bad magic");
    ncclTeam_t w = ncclTeamWorld(comms[r]), l = ncclTeamLsa(comms[r]), rl = ncclTeamRail(comms[r]);
    CHECK(w.nRanks == NRANKS && w.rank == r && w.stride == 1, "ncclTeamWorld of rank %d", r);
    // Host communicators map no GPU: each rank is its own load/store team.
    CHECK(l.nRanks == 1 && l.rank == 0 && l.stride == 1, "ncclTeamLsa of rank %d", r);
    CHECK(rl.nRanks == NRANKS && rl.rank == r && rl.stride == 1, "ncclTeamRail of rank %d", r);
    CHECK(ncclTeamRankToWorld(comms[r], w, (r + 1) % NRANKS) == (r + 1) % NRANKS,
          "ncclTeamRankToWorld");
    CHECK(ncclTeamRankToLsa(comms[r], l, 0) == 0, "ncclTeamRankToLsa");
    ncclDevCommRequirements_t reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    ncclDevComm_t* dc = reinterpret_cast<ncclDevComm_t*>(&reqs);  // never written
    CHECK(ncclDevCommCreate(comms[r], &reqs, dc) == ncclInvalidUsage,
          "ncclDevCommCreate answers as NCCL without symmetric memory");
    CHECK(ncclDevCommCreate(comms[r], nullptr, dc) == ncclInvalidArgument,
          "ncclDevCommCreate NULL");
  }
}

/* The window pointers: tutti maps no peer's window, so a peer's is NCCL's
 * "not reachable" (success, NULL); this rank's own is its buffer where that
 * is device memory (host memory here: NULL); ranges and unknown windows
 * are refused; there is no multicast. */
static void windows() {
  static char bufs[NRANKS][8192];
  ncclWindow_t win[NRANKS];
  ncclGroupStart();
  for (int r = 0; r < NRANKS; r++)
    ncclCommWindowRegister(comms[r], bufs[r], sizeof bufs[r], &win[r], NCCL_WIN_COLL_SYMMETRIC);
  ncclResult_t g = ncclGroupEnd();
  CHECK(g == ncclSuccess, "window registration: %s", ncclGetLastError(nullptr));
  if (g != ncclSuccess)
    return;
  for (int r = 0; r < NRANKS; r++) {
    void* p = &p;
    for (int peer = 0; peer < NRANKS; peer++) {
      p = &p;
      CHECK(ncclGetPeerDevicePointer(win[r], 64, peer, &p) == ncclSuccess && p == nullptr,
            "ncclGetPeerDevicePointer(rank %d, peer %d): success and NULL", r, peer);
    }
    p = &p;
    CHECK(ncclGetLsaDevicePointer(win[r], 0, 0, &p) == ncclSuccess && p == nullptr,
          "ncclGetLsaDevicePointer of rank %d", r);
    CHECK(ncclGetLsaDevicePointer(win[r], 0, 1, &p) == ncclInvalidArgument,
          "ncclGetLsaDevicePointer beyond the load/store team");
    CHECK(ncclGetPeerDevicePointer(win[r], 8192, r, &p) == ncclInvalidArgument,
          "ncclGetPeerDevicePointer at the window's end");
    CHECK(ncclGetPeerDevicePointer(win[r], 0, NRANKS, &p) == ncclInvalidArgument,
          "ncclGetPeerDevicePointer of a rank out of range");
    CHECK(ncclGetPeerDevicePointer(win[r], 0, 0, nullptr) == ncclInvalidArgument,
          "ncclGetPeerDevicePointer with no outPtr");
    CHECK(ncclGetPeerDevicePointer(reinterpret_cast<ncclWindow_t>(&p), 0, 0, &p) ==
              ncclInvalidArgument,
          "ncclGetPeerDevicePointer of no window");
    p = &p;
    CHECK(ncclGetLsaMultimemDevicePointer(win[r], 0, &p) == ncclSuccess && p == nullptr,
          "ncclGetLsaMultimemDevicePointer: no multicast");
    ncclMultimemHandle_t mm = {nullptr};
    CHECK(ncclGetMultimemDevicePointer(win[r], 0, mm, &p) == ncclInvalidArgument,
          "ncclGetMultimemDevicePointer with an empty handle");
    void* user = nullptr;
    CHECK(ncclWinGetUserPtr(comms[r], win[r], &user) == ncclSuccess && user == bufs[r],
          "ncclWinGetUserPtr of rank %d", r);
  }
  for (int r = 0; r < NRANKS; r++)
    ncclCommWindowDeregister(comms[r], win[r]);
  void* p = nullptr;
  CHECK(ncclGetPeerDevicePointer(win[0], 0, 0, &p) == ncclInvalidArgument,
        "ncclGetPeerDevicePointer of a deregistered window");
}

int main(int argc, char** argv) {
  if (argc < 2) {
    printf("usage: %s NVIDIA_LIBNCCL\n", argv[0]);
    return 2;
  }
  nvlib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (nvlib == nullptr) {
    printf("FAIL: cannot load %s: %s\n", argv[1], dlerror());
    return 1;
  }
  helpers();
  ncclUniqueId id;
  ncclResult_t res = ncclGetUniqueId(&id);
  ncclGroupStart();
  for (int r = 0; r < NRANKS && res == ncclSuccess; r++)
    res = ncclCommInitRank(&comms[r], NRANKS, id, r);
  ncclResult_t g = ncclGroupEnd();
  if (res != ncclSuccess || g != ncclSuccess) {
    printf("FAIL: init: %s\n", ncclGetLastError(nullptr));
    return 1;
  }
  queries();
  windows();
  for (int r = 0; r < NRANKS; r++)
    ncclCommDestroy(comms[r]);
  printf("abi_device: %d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
