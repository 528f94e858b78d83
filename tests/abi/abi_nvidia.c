/* Built against NVIDIA's nccl.h, not tutti's, and linked to libtutti.so: a
 * program written for NCCL runs on tutti. Built twice: against the CUDA
 * toolkit's header (NCCL 2.28: an older program on the newer library) and
 * against NCCL 2.30.7's, 2.31.2's and 2.32.6's from PyPI (header_nvidia.sh). Checks the ABI facts
 * against tutti's header (those of the header's own release only where the
 * releases match), that every function NVIDIA declares links with NVIDIA's
 * signature, and runs real collectives with NVIDIA's config layout. */
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi_layout.h"
#include "abi_facts.inc"

#ifndef NCCL_MAJOR
#error "NVIDIA's nccl.h was not found"
#endif

void abi_facts_nvidia(struct abi_facts* f) {
  gather(f);
}

/* Taking each function's address through NVIDIA's prototype: a missing
 * symbol fails the link, and the call below goes through the exact type. */
typedef ncclResult_t (*allreduce_fn)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t,
                                     ncclComm_t, cudaStream_t);
static const void* const symbols[] = {
    (const void*)ncclGetVersion,
    (const void*)ncclGetUniqueId,
    (const void*)ncclCommInitRankConfig,
    (const void*)ncclCommInitRank,
    (const void*)ncclCommInitAll,
    (const void*)ncclCommInitRankScalable,
    (const void*)ncclCommFinalize,
    (const void*)ncclCommDestroy,
    (const void*)ncclCommAbort,
    (const void*)ncclCommRevoke,
    (const void*)ncclCommSplit,
    (const void*)ncclCommShrink,
    (const void*)ncclGetErrorString,
    (const void*)ncclGetLastError,
    (const void*)ncclCommGetAsyncError,
    (const void*)ncclCommCount,
    (const void*)ncclCommCuDevice,
    (const void*)ncclCommUserRank,
    (const void*)ncclCommRegister,
    (const void*)ncclCommDeregister,
    (const void*)ncclCommWindowRegister,
    (const void*)ncclCommWindowDeregister,
    (const void*)ncclRedOpCreatePreMulSum,
    (const void*)ncclRedOpDestroy,
    (const void*)ncclReduce,
    (const void*)ncclBcast,
    (const void*)ncclBroadcast,
    (const void*)ncclAllReduce,
    (const void*)ncclReduceScatter,
    (const void*)ncclAllGather,
    (const void*)ncclAlltoAll,
    (const void*)ncclGather,
    (const void*)ncclScatter,
    (const void*)ncclSend,
    (const void*)ncclRecv,
    (const void*)ncclGroupStart,
    (const void*)ncclGroupEnd,
    (const void*)ncclGroupSimulateEnd,
    (const void*)ncclMemAlloc,
    (const void*)ncclMemFree,
#if NCCL_VERSION_CODE >= 23000
    (const void*)ncclCommGetUniqueId,
    (const void*)ncclCommGrow,
    (const void*)ncclCommSuspend,
    (const void*)ncclCommResume,
    (const void*)ncclCommMemStats,
    (const void*)ncclWinGetUserPtr,
    (const void*)ncclPutSignal,
    (const void*)ncclSignal,
    (const void*)ncclWaitSignal,
    (const void*)ncclParamBind,
    (const void*)ncclParamGetI8,
    (const void*)ncclParamGetI16,
    (const void*)ncclParamGetI32,
    (const void*)ncclParamGetI64,
    (const void*)ncclParamGetU8,
    (const void*)ncclParamGetU16,
    (const void*)ncclParamGetU32,
    (const void*)ncclParamGetU64,
    (const void*)ncclParamGetStr,
    (const void*)ncclParamGet,
    (const void*)ncclParamGetParameter,
    (const void*)ncclParamGetAllParameterKeys,
    (const void*)ncclParamDumpAll,
    (const void*)pncclAllReduce,
    (const void*)pncclCommGrow,
    (const void*)pncclParamBind,
#endif
#if NCCL_VERSION_CODE >= 23100
    (const void*)ncclAllReduceConfig,
    (const void*)ncclBroadcastConfig,
    (const void*)ncclReduceConfig,
    (const void*)ncclAllGatherConfig,
    (const void*)ncclReduceScatterConfig,
    (const void*)ncclAlltoAllConfig,
    (const void*)ncclGatherConfig,
    (const void*)ncclScatterConfig,
    (const void*)pncclAllReduceConfig,
#endif
#if NCCL_VERSION_CODE >= 23200
    (const void*)ncclSetEncryption,
    (const void*)pncclSetEncryption,
#endif
};

/* tutti's fact of the same name, or -1. */
static int find(const struct abi_facts* f, const char* name) {
  for (int i = 0; i < f->n; i++)
    if (strcmp(f->name[i], name) == 0)
      return i;
  return -1;
}

int main(void) {
  int passed = 0, failed = 0;
  struct abi_facts nv, tu;
  abi_facts_nvidia(&nv);
  abi_facts_tutti(&tu);
  const int same_release = nv.version / 100 == tu.version / 100;
  printf("NVIDIA's header: %lld, tutti's: %lld\n", nv.version, tu.version);
  for (int i = 0; i < nv.n; i++) {
    int t = find(&tu, nv.name[i]);
    if (t < 0) {
      failed++;
      printf("FAIL %s: NVIDIA %lld, not in tutti's header\n", nv.name[i], nv.value[i]);
    } else if (nv.release[i] && !same_release) {
      printf("     %s: NVIDIA %lld, tutti %lld (another release)\n", nv.name[i], nv.value[i],
             tu.value[t]);
    } else if (nv.value[i] == tu.value[t]) {
      passed++;
    } else {
      failed++;
      printf("FAIL %s: NVIDIA %lld, tutti %lld\n", nv.name[i], nv.value[i], tu.value[t]);
    }
  }
  for (size_t i = 0; i < sizeof symbols / sizeof symbols[0]; i++) {
    if (symbols[i] != NULL)
      passed++;
    else
      failed++;
  }
  /* A program needs a library at least as new as its header. */
  int version = 0;
  if (ncclGetVersion(&version) == ncclSuccess && version >= NCCL_VERSION_CODE)
    passed++;
  else {
    failed++;
    printf("FAIL version %d\n", version);
  }

  /* A real job through NVIDIA's types: a config from NVIDIA's initializer,
   * ranks as communicators of one thread, a grouped allreduce and broadcast. */
  ncclComm_t comms[3];
  ncclUniqueId id;
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.commName = "abi";
  ncclResult_t r = ncclGetUniqueId(&id);
  ncclGroupStart();
  for (int i = 0; i < 3 && r == ncclSuccess; i++)
    r = ncclCommInitRankConfig(&comms[i], 3, id, i, &cfg);
  ncclResult_t g = ncclGroupEnd();
  if (r != ncclSuccess || g != ncclSuccess) {
    printf("FAIL init: %s\n", ncclGetLastError(NULL));
    printf("%d passed, %d failed\n", passed, failed + 1);
    return 1;
  }
  allreduce_fn ar = ncclAllReduce;
  double v[3][8];
  for (int i = 0; i < 3; i++)
    for (int k = 0; k < 8; k++)
      v[i][k] = i + k;
  ncclGroupStart();
  for (int i = 0; i < 3; i++)
    ar(v[i], v[i], 8, ncclDouble, ncclSum, comms[i], (cudaStream_t)0);
  g = ncclGroupEnd();
  int ok = g == ncclSuccess;
  for (int i = 0; i < 3; i++)
    for (int k = 0; k < 8; k++)
      ok &= v[i][k] == 3.0 + 3.0 * k;
  if (ok)
    passed++;
  else {
    failed++;
    printf("FAIL allreduce: %s\n", ncclGetLastError(NULL));
  }
#if NCCL_VERSION_CODE >= 23000
  /* 2.30's calls through NVIDIA's types. */
  uint64_t stat = 99;
  ok = ncclCommMemStats(comms[0], ncclStatGpuMemSuspended, &stat) == ncclSuccess && stat == 0;
  ncclParamHandle_t h;
  const char* text = NULL;
  ok &= ncclParamBind(&h, "NCCL_DEBUG") == ncclSuccess &&
        ncclParamGetStr(h, &text) == ncclSuccess && text != NULL;
  if (ok)
    passed++;
  else {
    failed++;
    printf("FAIL 2.30 calls: %s\n", ncclGetLastError(NULL));
  }
#endif
#if NCCL_VERSION_CODE >= 23100
  /* A per-call configuration of NVIDIA's layout, as its header sets it. */
  ncclCollConfig_t cc = NCCL_COLLCONFIG_INITIALIZER;
  cc.algSelection = "RING";
  cc.userProfilerTag = 7;
  for (int i = 0; i < 3; i++)
    for (int k = 0; k < 8; k++)
      v[i][k] = i + k;
  ncclGroupStart();
  for (int i = 0; i < 3; i++)
    ncclAllReduceConfig(v[i], v[i], 8, ncclDouble, ncclSum, comms[i], (cudaStream_t)0, &cc);
  ok = ncclGroupEnd() == ncclSuccess;
  for (int i = 0; i < 3; i++)
    for (int k = 0; k < 8; k++)
      ok &= v[i][k] == 3.0 + 3.0 * k;
  if (ok)
    passed++;
  else {
    failed++;
    printf("FAIL ncclAllReduceConfig: %s\n", ncclGetLastError(NULL));
  }
#endif
  for (int i = 0; i < 3; i++)
    ncclCommDestroy(comms[i]);
  printf("abi: %d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
