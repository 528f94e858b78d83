/* libnccl-net-tutti.so as NCCL sees it: loaded with dlopen, driven through
 * its ncclNetPlugin_v11 and ncclNetPlugin_v8 tables with exactly the
 * structs of net/plugin/abi.h; it exports those tables and nothing else, and its
 * log lines reach the logger given to init.
 *   test_net_plugin PLUGIN.so NM */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "net/plugin/abi.h"

static char lines[64][512];
static int levels[64];
static int nlines;

static void logger(int level, unsigned long flags, const char* file, int line, const char* fmt,
                   ...) {
  (void)flags;
  (void)file;
  (void)line;
  if (nlines < 64) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(lines[nlines], sizeof lines[0], fmt, ap);
    va_end(ap);
    levels[nlines++] = level;
  }
}

static int logged(int level, const char* text) {
  for (int i = 0; i < nlines; i++) {
    if (levels[i] == level && strstr(lines[i], text) != NULL) {
      return 1;
    }
  }
  return 0;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void test_exports(const char* path, const char* nm) {
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "%s -D --defined-only %s", nm, path);
  FILE* p = popen(cmd, "r");
  CHECK(p != NULL, "running %s", cmd);
  if (p == NULL) {
    return;
  }
  char line[512], sym[256];
  int tables = 0, others = 0;
  while (fgets(line, sizeof line, p) != NULL) {
    char kind;
    if (sscanf(line, "%*s %c %255s", &kind, sym) != 2) {
      continue;
    }
    if (strncmp(sym, "ncclNetPlugin_v", 15) == 0 && strchr("891", sym[15]) != NULL) {
      tables++;
    } else {
      others++;
      fprintf(stderr, "exported beyond the tables: %s", line);
    }
  }
  CHECK(pclose(p) == 0, "%s succeeded", cmd);
  CHECK(tables == 4 && others == 0, "%d tables and %d other symbols exported", tables, others);
}

/* A round trip of `n` bytes: v11 when t11 is set, else v8. */
static void round_trip(const struct tutti_net_abi_v11* t11, const struct tutti_net_abi_v8* t8,
                       void* ctx, size_t n) {
  char handle[TUTTI_NET_ABI_HANDLE_MAXSIZE];
  void *l = NULL, *s = NULL, *r = NULL;
  struct tutti_net_abi_dev_handle dummy;
  struct tutti_net_abi_dev_handle *sdev = &dummy, *rdev = &dummy;
  CHECK((t11 ? t11->listen(ctx, 0, handle, &l) : t8->listen(0, handle, &l)) == ncclSuccess,
        "listen");
  const double end = now() + 10;
  while ((s == NULL || r == NULL) && now() < end) {
    if (s == NULL) {
      ncclResult_t res = t11 ? t11->connect(ctx, 0, handle, &s, &sdev)
                             : t8->connect(0, handle, &s, NULL); /* a NULL out-param is allowed */
      CHECK(res == ncclSuccess, "connect: %d", (int)res);
    }
    if (r == NULL) {
      ncclResult_t res = t11 ? t11->accept(l, &r, &rdev) : t8->accept(l, &r, &rdev);
      CHECK(res == ncclSuccess, "accept: %d", (int)res);
    }
  }
  CHECK(s != NULL && r != NULL, "connected");
  CHECK((t11 == NULL || sdev == NULL) && rdev == NULL, "no device handles");
  if (s == NULL || r == NULL) {
    return;
  }
  unsigned char* in = malloc(n + 1);
  unsigned char* out = calloc(1, n + 1);
  for (size_t i = 0; i < n; i++) {
    in[i] = (unsigned char)(i * 7 + 3);
  }
  void *smh = NULL, *rmh = NULL, *sreq = NULL, *rreq = NULL;
  CHECK((t11 ? t11->reg_mr(s, in, n, TUTTI_NET_ABI_PTR_HOST, &smh)
             : t8->reg_mr(s, in, n, TUTTI_NET_ABI_PTR_HOST, &smh)) == ncclSuccess,
        "reg_mr");
  CHECK((t11 ? t11->reg_mr(r, out, n, TUTTI_NET_ABI_PTR_HOST, &rmh)
             : t8->reg_mr(r, out, n, TUTTI_NET_ABI_PTR_HOST, &rmh)) == ncclSuccess,
        "reg_mr");
  void* data = out;
  int tag = 3, isize = (int)n;
  size_t size = n;
  while (rreq == NULL && now() < end) {
    CHECK((t11 ? t11->irecv(r, 1, &data, &size, &tag, &rmh, NULL, &rreq)
               : t8->irecv(r, 1, &data, &isize, &tag, &rmh, &rreq)) == ncclSuccess,
          "irecv");
  }
  while (sreq == NULL && now() < end) {
    CHECK((t11 ? t11->isend(s, in, n, tag, smh, NULL, &sreq)
               : t8->isend(s, in, (int)n, tag, smh, &sreq)) == ncclSuccess,
          "isend");
  }
  int sdone = sreq == NULL, rdone = rreq == NULL, ssize = -1, rsize = -1;
  while ((!sdone || !rdone) && now() < end) {
    if (!sdone) {
      CHECK((t11 ? t11->test(sreq, &sdone, &ssize) : t8->test(sreq, &sdone, &ssize)) == ncclSuccess,
            "test");
    }
    if (!rdone) {
      CHECK((t11 ? t11->test(rreq, &rdone, &rsize) : t8->test(rreq, &rdone, &rsize)) == ncclSuccess,
            "test");
    }
  }
  CHECK(sdone && rdone && ssize == (int)n && rsize == (int)n, "%zu bytes: done %d %d, sizes %d %d",
        n, sdone, rdone, ssize, rsize);
  CHECK(memcmp(in, out, n) == 0 && out[n] == 0, "%zu bytes arrived whole", n);
  if (t8 != NULL) {
    void* req = NULL;
    CHECK(t8->isend(s, in, -5, 0, smh, &req) == ncclInternalError && req == NULL,
          "v8 refuses a negative size");
  }
  const struct tutti_net_abi_v8* t = t8;
  CHECK((t11 ? t11->dereg_mr(s, smh) : t->dereg_mr(s, smh)) == ncclSuccess, "dereg_mr");
  CHECK((t11 ? t11->dereg_mr(r, rmh) : t->dereg_mr(r, rmh)) == ncclSuccess, "dereg_mr");
  CHECK((t11 ? t11->close_send(s) : t->close_send(s)) == ncclSuccess, "close_send");
  CHECK((t11 ? t11->close_recv(r) : t->close_recv(r)) == ncclSuccess, "close_recv");
  CHECK((t11 ? t11->close_listen(l) : t->close_listen(l)) == ncclSuccess, "close_listen");
  free(in);
  free(out);
}

static void test_v11(void* lib) {
  const struct tutti_net_abi_v11* t = dlsym(lib, "ncclNetPlugin_v11");
  CHECK(t != NULL, "ncclNetPlugin_v11 found");
  if (t == NULL) {
    return;
  }
  CHECK(strcmp(t->name, "tutti") == 0, "name %s", t->name);
  CHECK(t->make_vdevice == NULL && t->set_net_attr == NULL && t->reg_mr_dmabuf == NULL,
        "not offered: NULL");
  struct tutti_net_abi_config config = {TUTTI_NET_ABI_TRAFFIC_CLASS_UNDEF};
  void* ctx = NULL;
  CHECK(t->init(&ctx, 42, &config, logger, NULL) == ncclSuccess && ctx != NULL, "init");
  CHECK(logged(3, "NET/tutti"), "init's INFO line reached the logger (%d lines)", nlines);
  int ndev = 0;
  CHECK(t->devices(&ndev) == ncclSuccess && ndev >= 1, "%d devices", ndev);
  struct tutti_net_abi_props_v11 p;
  memset(&p, 0x5a, sizeof p);
  CHECK(t->get_properties(0, &p) == ncclSuccess, "properties");
  CHECK(p.name != NULL && strcmp(p.name, "lo") == 0 && p.pci_path == NULL, "lo without PCI path");
  CHECK(p.ptr_support == TUTTI_NET_ABI_PTR_HOST && p.reg_is_global == 1 && p.max_recvs == 8 &&
            p.vprops.ndevs == 1 && p.vprops.devs[0] == 0 && p.max_p2p_bytes >= (1ull << 30) &&
            p.max_multi_request_size == 1 && p.dev_type == TUTTI_NET_ABI_DEVICE_HOST,
        "properties as documented");
  void* mh = NULL;
  char buf[16];
  CHECK(t->reg_mr(NULL, buf, sizeof buf, TUTTI_NET_ABI_PTR_CUDA, &mh) == ncclInvalidArgument,
        "GPU memory refused");
  CHECK(logged(2, "host memory only"), "the refusal is a WARN line at the logger");
  CHECK(t->get_device_mr(NULL, NULL, NULL) == ncclInternalError, "no device offload");
  round_trip(t, NULL, ctx, 100);
  round_trip(t, NULL, ctx, (3 << 20) + 5);
  CHECK(t->finalize(ctx) == ncclSuccess, "finalize");
}

static void test_v8(void* lib) {
  const struct tutti_net_abi_v8* t = dlsym(lib, "ncclNetPlugin_v8");
  CHECK(t != NULL, "ncclNetPlugin_v8 found");
  if (t == NULL) {
    return;
  }
  CHECK(t->init(logger) == ncclSuccess && t->init(logger) == ncclSuccess, "init, twice");
  struct tutti_net_abi_props_v8 p;
  CHECK(t->get_properties(0, &p) == ncclSuccess && strcmp(p.name, "lo") == 0 &&
            p.reg_is_global == 1 && p.max_recvs == 8,
        "v8 properties");
  round_trip(NULL, t, NULL, 5000);
  round_trip(NULL, t, NULL, (1 << 20) + 1);
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: test_net_plugin PLUGIN.so NM\n");
    return 2;
  }
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  setenv("NCCL_SOCKET_NTHREADS", "2", 0); /* workers in the plugin too, whatever the cores */
  test_exports(argv[1], argv[2]);
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  CHECK(lib != NULL, "dlopen %s: %s", argv[1], dlerror());
  if (lib != NULL) {
    test_v11(lib);
    test_v8(lib);
    CHECK(dlsym(lib, "tutti_error") == NULL && dlsym(lib, "ncclGetErrorString") == NULL,
          "internal names stay hidden");
  }
  return test_summary("net_plugin");
}
