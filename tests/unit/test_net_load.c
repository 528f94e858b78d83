/* The network-plugin loader (net/net.h) against the mock plugin of every
 * ABI version (tests/net): one scenario per process, named on the command
 * line, since a process loads its plugin once; tests/net/tests.cmake runs
 * each with its NCCL_NET_PLUGIN, LD_LIBRARY_PATH and MOCK_* variables.
 *
 *   abi N         everything through version N's adapters
 *   loads N PATH  the plugin loaded is version N, from PATH
 *   none          no plugin loads, none is used
 *   unset         ... without NCCL_NET_PLUGIN and without libnccl-net.so
 *   fallback      a plugin loads but is not used (its init fails, unnamed)
 *   missing       a named plugin that is not there: one WARN, dlerror's text
 *   netname       NCCL_NET takes or refuses the plugin by its name
 *   ndev0         a plugin without devices is not used, said at INFO
 *   init_fail N   a named plugin whose init fails: an error; its WARN logged
 *   proto         what a plugin's init sets in the environment is seen after
 *   log_info      the plugin's INFO lines with NCCL_DEBUG=INFO, by subsystem
 *   log_off       nothing logged without NCCL_DEBUG
 * Without an argument (the run ctest makes of every unit test): "none",
 * with NCCL_NET_PLUGIN=none. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "mock_net.h"
#include "net/plugin/abi.h"
#include "net/net.h"
#include "topo/nics.h"
#include "net_traffic.h"
#include "tune/tune.h"
#include "util/log.h"

/* Where the mock counts what it saw (it finds it with dlsym). */
struct mock_net_stats mock_net_stats;

static int knob(const char* name, int deflt) {
  const char* v = getenv(name);
  return v != NULL && *v != '\0' ? atoi(v) : deflt;
}

/* This process's NCCL_DEBUG_FILE, read whole ("" when absent). */
static char log_text[1 << 16];
static const char* read_log(int* exists) {
  const char* pattern = getenv("NCCL_DEBUG_FILE");
  char path[1024];
  tutti_log_file_name(pattern != NULL ? pattern : "", tutti_hostname(), (int)getpid(), path,
                      sizeof path);
  log_text[0] = '\0';
  FILE* f = path[0] != '\0' ? fopen(path, "r") : NULL;
  *exists = f != NULL;
  if (f != NULL) {
    log_text[fread(log_text, 1, sizeof log_text - 1, f)] = '\0';
    fclose(f);
    unlink(path);
  }
  return log_text;
}

static int occurrences(const char* text, const char* what) {
  int n = 0;
  for (const char* p = strstr(text, what); p != NULL; p = strstr(p + 1, what)) {
    n++;
  }
  return n;
}

static void check_props(struct tutti_net* n, int abi, int ndev, struct tutti_net_props* props) {
  const int dup = knob("MOCK_DUP", 0), offload = knob("MOCK_OFFLOAD", 0);
  for (int d = 0; d < ndev; d++) {
    struct tutti_net_props* p = &props[d];
    memset(p, 0x5a, sizeof *p); /* what the adapter leaves unset shows */
    CHECK_NCCL(n->ops->props(n, d, p));
    char name[16];
    snprintf(name, sizeof name, "mock%d", d);
    CHECK(strcmp(p->name, name) == 0, "device %d: name \"%.64s\"", d, p->name);
    CHECK(strcmp(p->pci_path, d == 0 ? MOCK_PCI_0 : "") == 0, "device %d: pci_path \"%.256s\"", d,
          p->pci_path);
    CHECK(p->guid == (dup && d == 1 ? MOCK_GUID(0) : MOCK_GUID(d)), "device %d: guid %llx", d,
          (unsigned long long)p->guid);
    CHECK(p->ptr_support == MOCK_PTR(d), "device %d: ptr_support %d", d, p->ptr_support);
    CHECK(p->reg_is_global == (abi >= 8), "device %d: reg_is_global %d", d, p->reg_is_global);
    CHECK(p->force_flush == (abi >= 9 && d == 0), "device %d: force_flush %d", d, p->force_flush);
    CHECK(p->speed == MOCK_SPEED(d) && p->port == MOCK_PORT && p->latency == MOCK_LATENCY &&
              p->max_comms == MOCK_MAX_COMMS && p->max_recvs == MOCK_MAX_RECVS(abi),
          "device %d: speed %d port %d latency %g max_comms %d max_recvs %d", d, p->speed, p->port,
          (double)p->latency, p->max_comms, p->max_recvs);
    const int off = abi >= 7 && offload && d == 1;
    CHECK(p->dev_type == (off ? MOCK_OFFLOAD_TYPE : 0) &&
              p->dev_version == (off ? MOCK_OFFLOAD_VERSION : 0),
          "device %d: dev_type %d dev_version %d", d, p->dev_type, p->dev_version);
    CHECK(p->max_p2p_bytes == (abi >= 9 ? MOCK_P2P_BYTES : (size_t)INT_MAX),
          "device %d: max_p2p_bytes %zu", d, p->max_p2p_bytes);
    const int virt = abi >= 9 && d == 2;
    int rest = 0;
    for (int v = p->nvdevs < 0 ? 0 : p->nvdevs; v < TUTTI_NET_MAX_VDEVS; v++) {
      rest |= p->vdevs[v];
    }
    CHECK(p->nvdevs == (virt ? 2 : 0) && (!virt || (p->vdevs[0] == 0 && p->vdevs[1] == 1)) &&
              rest == 0,
          "device %d: %d virtual parts", d, p->nvdevs);
  }
}

/* The chooser over the plugin's own devices: the fastest (highest index)
 * first, without offloaded ones and second functions of one port. */
static void check_pick(int abi, int ndev, const struct tutti_net_props* props) {
  const int dup = knob("MOCK_DUP", 0), offload = knob("MOCK_OFFLOAD", 0) && abi >= 7;
  int want[4], nwant = 0;
  for (int d = ndev - 1; d >= 0; d--) {
    if (!(d == 1 && (dup || offload))) {
      want[nwant++] = d;
    }
  }
  int devs[4] = {-1, -1, -1, -1}, k = -1;
  CHECK_NCCL(tutti_topo_pick_nics(props, ndev, NULL, 0, devs, 4, &k));
  CHECK(k == nwant && memcmp(devs, want, sizeof(int) * (size_t)nwant) == 0,
        "picked %d devices (%d %d %d), wanted %d", k, devs[0], devs[1], devs[2], nwant);
}

/* Sizes an int-sized version cannot take, messages larger than their
 * receive, and an mhandle that does not cover its buffer. */
static void check_limits(struct tutti_net* n, int abi, const struct net_pair* p) {
  static char buf[256], other[64];
  void *mh = NULL, *rmh = NULL, *omh = NULL, *req = NULL, *sreq = NULL;
  CHECK_NCCL(n->ops->reg_mr(n, p->send, buf, sizeof buf, TUTTI_NET_PTR_HOST, &mh));
  CHECK_NCCL(n->ops->reg_mr(n, p->recv, buf, sizeof buf, TUTTI_NET_PTR_HOST, &rmh));
  const size_t huge = (size_t)INT_MAX + 1; /* never touched: refused first */
  const int isends = mock_net_stats.isends, irecvs = mock_net_stats.irecvs;
  const int regs = mock_net_stats.regs;
  if (abi <= 8) {
    ncclResult_t r = n->ops->isend(n, p->send, buf, huge, 0, mh, &req);
    CHECK(r == ncclInternalError && mock_net_stats.isends == isends &&
              strstr(ncclGetLastError(NULL), "max_p2p_bytes") != NULL,
          "v%d: an isend of 2^31 bytes is refused before the plugin (%d): %s", abi, (int)r,
          ncclGetLastError(NULL));
    void* data = buf;
    size_t size = huge;
    int tag = 0;
    r = n->ops->irecv(n, p->recv, 1, &data, &size, &tag, &rmh, &req);
    CHECK(r == ncclInternalError && mock_net_stats.irecvs == irecvs,
          "v%d: an irecv of 2^31 bytes is refused before the plugin (%d)", abi, (int)r);
  } else {
    const size_t big = ((size_t)1 << 32) + 5; /* cut to int it would be 5 */
    ncclResult_t r = n->ops->isend(n, p->send, buf, big, 0, mh, &req);
    CHECK(r != ncclSuccess && mock_net_stats.isends == isends + 1,
          "v%d: 4 GiB + 5 bytes reach the plugin whole, which refuses them (%d)", abi, (int)r);
  }
  void* r_mh = NULL;
  ncclResult_t r = n->ops->reg_mr(n, p->send, buf, huge, TUTTI_NET_PTR_HOST, &r_mh);
  CHECK(abi <= 7 ? r == ncclInternalError && mock_net_stats.regs == regs
                 : r == ncclSuccess && mock_net_stats.regs == regs + 1,
        "v%d: registering 2^31 bytes: %d", abi, (int)r);
  if (r == ncclSuccess) {
    CHECK_NCCL(n->ops->dereg_mr(n, p->send, r_mh));
  }

  void* data = buf;
  size_t size = 100;
  int tag = 3;
  CHECK_NCCL(n->ops->irecv(n, p->recv, 1, &data, &size, &tag, &rmh, &req));
  CHECK_NCCL(n->ops->isend(n, p->send, buf + 100, 150, 3, mh, &sreq));
  CHECK(req != NULL && sreq != NULL, "both posted");
  if (req != NULL && sreq != NULL) {
    CHECK(net_wait(n, req, NULL) != ncclSuccess, "150 bytes into a receive of 100 fail it");
    CHECK(net_wait(n, sreq, NULL) != ncclSuccess, "... and the send");
  }

  CHECK_NCCL(n->ops->reg_mr(n, p->send, other, sizeof other, TUTTI_NET_PTR_HOST, &omh));
  const int bad = mock_net_stats.bad_mhandle;
  r = n->ops->isend(n, p->send, buf, 100, 0, omh, &req);
  CHECK(r != ncclSuccess && mock_net_stats.bad_mhandle == bad + 1,
        "the mhandle reaches the plugin: one of another buffer is refused (%d)", (int)r);
  CHECK_NCCL(n->ops->dereg_mr(n, p->send, omh));

  if (MOCK_HAS_DMABUF(abi)) {
    void* dmh = NULL;
    CHECK(n->ops->reg_mr_dmabuf != NULL, "v%d: the plugin's reg_mr_dmabuf is offered", abi);
    if (n->ops->reg_mr_dmabuf != NULL) {
      CHECK_NCCL(
          n->ops->reg_mr_dmabuf(n, p->send, buf, sizeof buf, TUTTI_NET_PTR_CUDA, 4096, 77, &dmh));
      CHECK(mock_net_stats.dmabuf_regs == 1 && mock_net_stats.dmabuf_fd == 77 &&
                mock_net_stats.dmabuf_offset == 4096,
            "reg_mr_dmabuf passed fd and offset");
      CHECK_NCCL(n->ops->dereg_mr(n, p->send, dmh));
    }
  } else {
    CHECK(n->ops->reg_mr_dmabuf == NULL, "v%d: no reg_mr_dmabuf, as the plugin has none", abi);
  }

  void* freq = (void*)1;
  int isize = 10;
  CHECK_NCCL(n->ops->iflush(n, p->recv, 1, &data, &isize, &rmh, &freq));
  CHECK(freq == NULL, "iflush: nothing to wait for");
  CHECK_NCCL(n->ops->dereg_mr(n, p->send, mh));
  CHECK_NCCL(n->ops->dereg_mr(n, p->recv, rmh));
}

static void scenario_abi(int abi) {
  const struct tutti_net* l = tutti_net_loaded();
  char suffix[64];
  snprintf(suffix, sizeof suffix, "/libnccl-net-mock%d.so", abi);
  CHECK(l != NULL && l->abi == abi && strcmp(l->name, MOCK_NAME) == 0 && l->ops == NULL,
        "v%d loaded", abi);
  if (l == NULL) {
    return;
  }
  const size_t len = strlen(l->path), sl = strlen(suffix);
  CHECK(l->path[0] == '/' && len > sl && strcmp(l->path + len - sl, suffix) == 0,
        "the loaded library's own path: %s", l->path);

  struct tutti_net* n = NULL;
  CHECK_NCCL(tutti_net_open(0x1111, &n));
  CHECK(n != NULL, "v%d opened", abi);
  if (n == NULL) {
    return;
  }
  CHECK(n->abi == abi && strcmp(n->path, l->path) == 0 && strcmp(n->name, MOCK_NAME) == 0 &&
            n->comm_id == 0x1111,
        "the open network says what it is");
  CHECK(mock_net_stats.inits == 1, "init once: %d", mock_net_stats.inits);
  if (abi >= 11) {
    CHECK(n->ctx != NULL && n->ctx == mock_net_stats.ctx && mock_net_stats.comm_id == 0x1111,
          "init's context and communicator");
  } else {
    CHECK(n->ctx == NULL, "no context before v11");
  }
  if (abi >= 10) {
    CHECK(mock_net_stats.profiler_ok, "the profiler callback sets no event");
  }
  int ndev = 0;
  CHECK_NCCL(n->ops->devices(n, &ndev));
  CHECK(ndev == knob("MOCK_NDEV", MOCK_NDEV_DEFAULT) && ndev <= 3, "%d devices", ndev);
  struct tutti_net_props props[3];
  ndev = ndev < 3 ? ndev : 3;
  check_props(n, abi, ndev, props);
  check_pick(abi, ndev, props);

  struct net_pair ab, ba;
  net_pair_open(n, 0, &ab);
  if (abi >= 11) {
    CHECK(mock_net_stats.listen_ctx == n->ctx && mock_net_stats.connect_ctx == n->ctx,
          "listen and connect got init's context");
  }
  if (abi >= 10) {
    CHECK(mock_net_stats.traffic_class == TUTTI_NET_ABI_TRAFFIC_CLASS_UNDEF,
          "the config carries no traffic class: %d", mock_net_stats.traffic_class);
  }
  CHECK(abi >= 7 ? mock_net_stats.dev_handles >= 4 && mock_net_stats.bad_dev_handles == 0
                 : mock_net_stats.dev_handles == 0,
        "v%d: connect and accept got pointers to NULL device handles (%d, %d bad)", abi,
        mock_net_stats.dev_handles, mock_net_stats.bad_dev_handles);
  net_pair_open(n, ndev - 1, &ba);
  size_t sizes[TUTTI_NET_MAX_REQUESTS];
  const size_t kinds[4] = {0, 1, 4097, 1 << 20};
  for (int i = 0; i < TUTTI_NET_MAX_REQUESTS; i++) {
    sizes[i] = kinds[i % 4];
  }
  net_round_trip(n, &ab, &ba, sizes, TUTTI_NET_MAX_REQUESTS);
  if (MOCK_MAX_RECVS(abi) >= 3) {
    net_grouped(n, &ab);
  }
  CHECK(mock_net_stats.largest_group == (MOCK_MAX_RECVS(abi) >= 3 ? 3 : 1), "grouped receives: %d",
        mock_net_stats.largest_group);
  check_limits(n, abi, &ab);
  net_pair_close(n, &ab);
  net_pair_close(n, &ba);
  CHECK(mock_net_stats.regs == mock_net_stats.deregs, "%d registrations, %d undone",
        mock_net_stats.regs, mock_net_stats.deregs);

  struct tutti_net* m = NULL;
  CHECK_NCCL(tutti_net_open(0x2222, &m));
  CHECK(m != NULL, "a second open");
  if (abi >= 11) {
    CHECK(mock_net_stats.inits == 2 && m != NULL && m->ctx != n->ctx &&
              m->ctx == mock_net_stats.ctx && mock_net_stats.comm_id == 0x2222,
          "v%d: init per communicator: %d", abi, mock_net_stats.inits);
  } else {
    CHECK(mock_net_stats.inits == 1, "v%d: init once per process: %d", abi, mock_net_stats.inits);
  }
  if (m != NULL) {
    net_pair_open(m, 0, &ab);
    CHECK(abi < 11 || mock_net_stats.listen_ctx == m->ctx, "the second open's context");
    net_round_trip(m, &ab, &ab, kinds, 4);
    net_pair_close(m, &ab);
    void* mctx = m->ctx;
    tutti_net_close(m);
    CHECK(abi < 11 || (mock_net_stats.finalizes == 1 && mock_net_stats.finalize_ctx == mctx),
          "finalize got the second context");
  }
  void* nctx = n->ctx;
  tutti_net_close(n);
  CHECK(abi >= 11 ? mock_net_stats.finalizes == 2 && mock_net_stats.finalize_ctx == nctx
                  : mock_net_stats.finalizes == 0,
        "v%d: %d finalizes", abi, mock_net_stats.finalizes);
  CHECK(mock_net_stats.bad_ctx == 0 && mock_net_stats.bad_mhandle == 1,
        "no wrong context (%d), one wrong mhandle (%d, on purpose)", mock_net_stats.bad_ctx,
        mock_net_stats.bad_mhandle);
}

/* Opens the plugin expected to be used and closes it: 1 if it was there. */
static int open_close(void) {
  struct tutti_net* n = NULL;
  CHECK_NCCL(tutti_net_open(7, &n));
  tutti_net_close(n);
  return n != NULL;
}

static void scenario_none(void) {
  struct tutti_net* n = (struct tutti_net*)&n;
  CHECK(tutti_net_loaded() == NULL, "nothing loaded");
  CHECK_NCCL(tutti_net_open(7, &n));
  CHECK(n == NULL, "nothing opened");
}

static void scenario_loads(int abi, const char* path) {
  const struct tutti_net* l = tutti_net_loaded();
  char want[PATH_MAX], got[PATH_MAX];
  CHECK(l != NULL && l->abi == abi, "v%d loaded (%d)", abi, l != NULL ? l->abi : 0);
  CHECK(l != NULL && realpath(path, want) != NULL && realpath(l->path, got) != NULL &&
            strcmp(want, got) == 0,
        "from %s (%s)", path, l != NULL ? l->path : "nothing");
  CHECK(open_close(), "and it opens");
  CHECK(mock_net_stats.inits == 1, "one init: %d", mock_net_stats.inits);
}

static void scenario_unset(void) {
  const struct tutti_net* l = tutti_net_loaded();
  if (l != NULL) {
    /* Absent here, truly: nothing can show what an unset NCCL_NET_PLUGIN
     * loads without a plugin of the machine's own in the way. */
    printf("SKIPPED: this machine has a libnccl-net.so of its own (%s)\n", l->path);
    exit(77);
  }
  scenario_none();
}

static void scenario_fallback(void) {
  CHECK(tutti_net_loaded() != NULL, "the plugin loads");
  CHECK(!open_close(), "its init fails: not used, and no error");
  CHECK(mock_net_stats.inits == 1, "init was called: %d", mock_net_stats.inits);
}

static void scenario_missing(void) {
  scenario_none();
  scenario_none();
  int exists = 0;
  const char* log = read_log(&exists);
  CHECK(occurrences(log, "NCCL_NET_PLUGIN=\"nosuchplugin\"") == 1 &&
            strstr(log, "libnccl-net-nosuchplugin.so") != NULL &&
            strstr(log, "cannot open shared object file") != NULL &&
            strstr(log, "own transport") != NULL,
        "one WARN with dlerror's text: %s", log);
}

static void scenario_netname(void) {
  const char* refused[] = {"Socket", "socket", "IB"};
  for (int i = 0; i < 3; i++) {
    setenv("NCCL_NET", refused[i], 1);
    CHECK(!open_close(), "NCCL_NET=%s: not the plugin", refused[i]);
  }
  CHECK(mock_net_stats.inits == 0, "no init for a plugin not used: %d", mock_net_stats.inits);
  setenv("NCCL_NET", "mOcK", 1);
  CHECK(open_close(), "NCCL_NET=mOcK: the plugin named Mock");
}

static void scenario_ndev0(void) {
  CHECK(!open_close(), "no devices: not used");
  CHECK(mock_net_stats.inits == 1 && mock_net_stats.finalizes == 1,
        "its context was finalized (%d inits, %d finalizes)", mock_net_stats.inits,
        mock_net_stats.finalizes);
  int exists = 0;
  const char* log = read_log(&exists);
  CHECK(strstr(log, "NCCL INFO NET/Plugin: ") != NULL && strstr(log, "has no devices") != NULL,
        "said at INFO: %s", log);
}

static void scenario_init_fail(int abi) {
  for (int i = 0; i < 2; i++) {
    struct tutti_net* n = (struct tutti_net*)&n;
    ncclResult_t r = tutti_net_open(9, &n);
    const char* text = ncclGetLastError(NULL);
    CHECK(r == ncclSystemError && n == NULL, "open %d: %d", i, (int)r);
    char lib[64];
    snprintf(lib, sizeof lib, "libnccl-net-mock%d.so", abi);
    CHECK(strstr(text, lib) != NULL && strstr(text, "NCCL_NET_PLUGIN=none") != NULL &&
              strstr(text, "failed to initialize") != NULL,
          "the error names the library and the way out: %s", text);
  }
  CHECK(mock_net_stats.inits == (abi >= 11 ? 2 : 1), "v%d: %d inits", abi, mock_net_stats.inits);
  int exists = 0;
  const char* log = read_log(&exists);
  char info[32];
  snprintf(info, sizeof info, "mock v%d: init 1", abi);
  CHECK(strstr(log, "mock_plugin.c:") != NULL && strstr(log, "NCCL WARN mock v") != NULL &&
            strstr(log, "init refused (MOCK_INIT_FAIL)") != NULL,
        "the plugin's WARN, with its file and line: %s", log);
  CHECK(strstr(log, info) == NULL, "not its INFO line, at NCCL_DEBUG=WARN");
}

static void scenario_proto(void) {
  const char* before = getenv("NCCL_PROTO");
  CHECK(before == NULL || strcmp(before, "Simple") != 0, "NCCL_PROTO not set yet");
  CHECK(open_close(), "opened");
  const char* after = getenv("NCCL_PROTO");
  CHECK(after != NULL && strcmp(after, "Simple") == 0, "the plugin set NCCL_PROTO=Simple");
  CHECK(tutti_tune_protocols() == TUTTI_PROTO_SIMPLE, "and tune, asked after, sees it");
}

static void scenario_log(int on) {
  CHECK(open_close(), "opened");
  int exists = 0;
  const char* log = read_log(&exists);
  if (!on) {
    CHECK(!exists, "no log file without NCCL_DEBUG");
    return;
  }
  CHECK(strstr(log, "NCCL INFO mock v12: init 1") != NULL, "the plugin's INIT|NET line: %s", log);
  CHECK(strstr(log, "a GRAPH line") == NULL, "not its GRAPH line (NCCL_DEBUG_SUBSYS=NET)");
  CHECK(strstr(log, "NET/Plugin: loaded /") != NULL && strstr(log, "ncclNetPlugin_v12") != NULL &&
            strstr(log, "libnccl-net-mock12.so") != NULL,
        "the loader says what it loaded, from where");
}

int main(int argc, char** argv) {
  const char* s = argc > 1 ? argv[1] : "none";
  const int abi = argc > 2 ? atoi(argv[2]) : 0;
  if (argc == 1) {
    setenv("NCCL_NET_PLUGIN", "none", 1);
  }
  if (strcmp(s, "abi") == 0) {
    scenario_abi(abi);
  } else if (strcmp(s, "loads") == 0 && argc > 3) {
    scenario_loads(abi, argv[3]);
  } else if (strcmp(s, "none") == 0) {
    scenario_none();
  } else if (strcmp(s, "unset") == 0) {
    scenario_unset();
  } else if (strcmp(s, "fallback") == 0) {
    scenario_fallback();
  } else if (strcmp(s, "missing") == 0) {
    scenario_missing();
  } else if (strcmp(s, "netname") == 0) {
    scenario_netname();
  } else if (strcmp(s, "ndev0") == 0) {
    scenario_ndev0();
  } else if (strcmp(s, "init_fail") == 0) {
    scenario_init_fail(abi);
  } else if (strcmp(s, "proto") == 0) {
    scenario_proto();
  } else if (strcmp(s, "log_info") == 0 || strcmp(s, "log_off") == 0) {
    scenario_log(strcmp(s, "log_info") == 0);
  } else {
    fprintf(stderr, "test_net_load: no scenario \"%s\"\n", s);
    return 2;
  }
  return test_summary("net_load");
}
