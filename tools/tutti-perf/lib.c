/* Finding and loading the NCCL-API library, and resolving its functions. */
#define _GNU_SOURCE /* dladdr */
#include "lib.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct perf_nccl_api perf_nccl;

#ifndef PERF_INSTALL_LIBDIR
#define PERF_INSTALL_LIBDIR "lib"
#endif

struct sym {
  const char* name;
  void** slot;
  int required;
};

#define SYM(field, req) \
  { "nccl" #field, (void**)&perf_nccl.field, req }

static struct sym syms[] = {
    SYM(GetVersion, 1),
    SYM(GetUniqueId, 1),
    SYM(CommInitRank, 1),
    SYM(CommInitAll, 0),
    SYM(CommDestroy, 1),
    SYM(CommGetAsyncError, 0),
    SYM(GetErrorString, 1),
    SYM(GetLastError, 0),
    SYM(SetEncryption, 0),
    SYM(GroupStart, 1),
    SYM(GroupEnd, 1),
    SYM(AllReduce, 1),
    SYM(Broadcast, 1),
    SYM(Reduce, 1),
    SYM(AllGather, 1),
    SYM(ReduceScatter, 1),
    SYM(Send, 1),
    SYM(Recv, 1),
    SYM(AlltoAll, 0),
    SYM(Gather, 0),
    SYM(Scatter, 0),
    SYM(RedOpCreatePreMulSum, 0),
    SYM(RedOpDestroy, 0),
    SYM(CommWindowRegister, 0),
    SYM(CommWindowDeregister, 0),
    SYM(PutSignal, 0),
    SYM(WaitSignal, 0),
};

static int exe_dir(char* out, size_t len) {
  ssize_t n = readlink("/proc/self/exe", out, len - 1);
  if (n <= 0) {
    return -1;
  }
  out[n] = '\0';
  char* slash = strrchr(out, '/');
  if (slash == NULL) {
    return -1;
  }
  *slash = '\0';
  return 0;
}

static void* try_open(const char* path, char* why, size_t why_len) {
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    snprintf(why, why_len, "%s", dlerror());
  }
  return h;
}

/* The default: the libtutti this binary was built or installed with (the
 * build tree's, two folders up; an installed tree's, in its libdir), so a
 * bare `tutti-perf` measures the tree it came from rather than whichever
 * copy the loader happens to find first. No build path is compiled in: a
 * packaged binary looks nowhere but beside itself. */
static void* open_default(char* why, size_t why_len) {
  char dir[PATH_MAX];
  char cand[2][PATH_MAX + 64];
  int ncand = 0;
  if (exe_dir(dir, sizeof dir) == 0) {
    snprintf(cand[ncand++], sizeof cand[0], "%s/../../libtutti.so.0", dir);
    snprintf(cand[ncand++], sizeof cand[0], "%s/../%s/libtutti.so.0", dir, PERF_INSTALL_LIBDIR);
  }
  for (int i = 0; i < ncand; i++) {
    if (access(cand[i], R_OK) == 0) {
      void* h = try_open(cand[i], why, why_len);
      if (h != NULL) {
        return h;
      }
    }
  }
  return try_open("libtutti.so.0", why, why_len);
}

int perf_lib_load(const char* path, char* why, size_t why_len) {
  void* h = path ? try_open(path, why, why_len) : open_default(why, why_len);
  if (h == NULL) {
    return -1;
  }
  for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
    *syms[i].slot = dlsym(h, syms[i].name);
    if (*syms[i].slot == NULL && syms[i].required) {
      snprintf(why, why_len, "%s does not export %s: is it an NCCL-API library?",
               path ? path : "libtutti.so.0", syms[i].name);
      dlclose(h);
      return -1;
    }
  }
  Dl_info info;
  const char* mapped = path ? path : "libtutti.so.0";
  if (dladdr((void*)perf_nccl.GetVersion, &info) != 0 && info.dli_fname != NULL) {
    mapped = info.dli_fname;
  }
  if (realpath(mapped, perf_nccl.path) == NULL) {
    snprintf(perf_nccl.path, sizeof perf_nccl.path, "%s", mapped);
  }
  ncclResult_t r = perf_nccl.GetVersion(&perf_nccl.version);
  if (r != ncclSuccess) {
    snprintf(why, why_len, "ncclGetVersion failed: %s", perf_nccl.GetErrorString(r));
    return -1;
  }
  return 0;
}

void perf_lib_label(const char* path, char* out, size_t len) {
  const char* base = strrchr(path, '/');
  base = base ? base + 1 : path;
  if (strncmp(base, "lib", 3) == 0) {
    base += 3;
  }
  size_t n = strcspn(base, ".");
  if (n == 0) {
    n = strlen(base);
  }
  snprintf(out, len, "%.*s", (int)n, base);
}

void perf_lib_version_string(int code, char* out, size_t len) {
  /* NCCL_VERSION packs 2.8 and earlier as X*1000+Y*100+Z, later X*10000+Y*100+Z. */
  int major = code >= 10000 ? code / 10000 : code / 1000;
  int minor = code >= 10000 ? (code % 10000) / 100 : (code % 1000) / 100;
  snprintf(out, len, "%d.%d.%d", major, minor, code % 100);
}
