/* A network plugin of ABI version MOCK_ABI (6 ... 12) over the mock network
 * (mock_core.c), exporting exactly net/plugin/abi.h's table of that version as
 * ncclNetPlugin_v<MOCK_ABI> and nothing else: built once per version, it
 * checks the loader's adapters against each layout. Environment, for what
 * real plugins do: MOCK_NDEV (devices, default 2; 0 as a plugin refuses a
 * machine without its NIC), MOCK_DUP (devices 0 and 1 are one NIC port),
 * MOCK_OFFLOAD (device 1 is not host-driven), MOCK_INIT_FAIL,
 * MOCK_SETENV_PROTO (init sets NCCL_PROTO=Simple, as aws-ofi-nccl does). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "mock_core.h"
#include "net/plugin/abi.h"

#ifndef MOCK_ABI
#error "build with -DMOCK_ABI=6 ... 12"
#endif

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define NEGATIVE(x) ((long long)(x) < 0)

typedef struct CAT(tutti_net_abi_v, MOCK_ABI) table_t;
#if MOCK_ABI >= 12
typedef struct tutti_net_abi_props_v12 props_t;
#elif MOCK_ABI == 11
typedef struct tutti_net_abi_props_v11 props_t;
#elif MOCK_ABI >= 9
typedef struct tutti_net_abi_props_v9 props_t;
#else
typedef struct CAT(tutti_net_abi_props_v, MOCK_ABI) props_t;
#endif
#if MOCK_ABI >= 9
typedef size_t msg_size; /* isend / irecv */
#else
typedef int msg_size;
#endif
#if MOCK_ABI >= 8
typedef size_t reg_size; /* reg_mr */
#else
typedef int reg_size;
#endif

static tutti_net_abi_logger log_fn;
/* The counters and the context table are shared by every thread that calls
 * the plugin (ranks as threads): updated under this lock. */
static pthread_mutex_t stats_mu = PTHREAD_MUTEX_INITIALIZER;
static int ndev = MOCK_NDEV_DEFAULT, dup, offload;

#define LOG(level, flags, ...) log_fn((level), (flags), __FILE__, __LINE__, __VA_ARGS__)

static int env_int(const char* name, int deflt) {
  const char* v = getenv(name);
  return v != NULL && *v != '\0' ? atoi(v) : deflt;
}

/* What every version's init does. */
static ncclResult_t start(void) {
  struct mock_net_stats* s = mock_stats();
  pthread_mutex_lock(&stats_mu);
  s->inits++;
  /* Once: later inits (v11+, one per communicator) may run while other
   * threads read these. */
  static int configured;
  if (!configured) {
    configured = 1;
    ndev = env_int("MOCK_NDEV", MOCK_NDEV_DEFAULT);
    dup = env_int("MOCK_DUP", 0);
    offload = env_int("MOCK_OFFLOAD", 0);
    mock_max_recvs = MOCK_MAX_RECVS(MOCK_ABI);
    mock_max_bytes = MOCK_ABI >= 9 ? MOCK_P2P_BYTES : 0x7fffffff;
  }
  pthread_mutex_unlock(&stats_mu);
  LOG(3, 0x1 | 0x10, "mock v%d: init %d", MOCK_ABI, s->inits); /* INIT|NET */
  LOG(3, 0x20, "mock v%d: a GRAPH line", MOCK_ABI);
  if (env_int("MOCK_INIT_FAIL", 0)) {
    LOG(2, ~0ul, "mock v%d: init refused (MOCK_INIT_FAIL)", MOCK_ABI);
    return ncclSystemError;
  }
  if (env_int("MOCK_SETENV_PROTO", 0)) {
    setenv("NCCL_PROTO", "Simple", 1);
  }
  return ncclSuccess;
}

#if MOCK_ABI >= 10
static void check_profiler(tutti_net_abi_profiler prof) {
  void* event = &event;
  const int ok = prof != NULL && prof(&event, 0, NULL, 0, NULL) == ncclSuccess && event == NULL;
  pthread_mutex_lock(&stats_mu);
  mock_stats()->profiler_ok = ok;
  pthread_mutex_unlock(&stats_mu);
}
#endif

#if MOCK_ABI >= 11
/* Contexts live in a table, never freed, so that a stale one is caught
 * (not read after free). */
#define MAGIC_CTX 0x43545821u
static struct ctx {
  uint32_t magic;
  uint64_t comm_id;
} ctxs[64];
static int nctx;

static int good_ctx(void* ctx, void** seen) {
  const struct ctx* c = ctx;
  pthread_mutex_lock(&stats_mu);
  *seen = ctx;
  const int good = c >= ctxs && c < ctxs + nctx && c->magic == MAGIC_CTX;
  mock_stats()->bad_ctx += !good;
  pthread_mutex_unlock(&stats_mu);
  return good;
}

static ncclResult_t m_init(void** ctx, uint64_t comm_id, struct tutti_net_abi_config* config,
                           tutti_net_abi_logger log, tutti_net_abi_profiler prof) {
  log_fn = log;
  check_profiler(prof);
  ncclResult_t res = start();
  if (res != ncclSuccess || nctx == 64) {
    return res != ncclSuccess ? res : ncclSystemError;
  }
  pthread_mutex_lock(&stats_mu);
  struct ctx* c = &ctxs[nctx++];
  *c = (struct ctx){MAGIC_CTX, comm_id};
  struct mock_net_stats* s = mock_stats();
  s->ctx = c;
  s->comm_id = comm_id;
  s->traffic_class = config != NULL ? config->traffic_class : -2;
  pthread_mutex_unlock(&stats_mu);
  *ctx = c;
  return ncclSuccess;
}

static ncclResult_t m_finalize(void* ctx) {
  struct mock_net_stats* s = mock_stats();
  if (!good_ctx(ctx, &s->finalize_ctx)) {
    return ncclInternalError;
  }
  pthread_mutex_lock(&stats_mu);
  ((struct ctx*)ctx)->magic = 0;
  s->finalizes++;
  pthread_mutex_unlock(&stats_mu);
  return ncclSuccess;
}
#elif MOCK_ABI == 10
static ncclResult_t m_init(tutti_net_abi_logger log, tutti_net_abi_profiler prof) {
  log_fn = log;
  check_profiler(prof);
  return start();
}
#else
static ncclResult_t m_init(tutti_net_abi_logger log) {
  log_fn = log;
  return start();
}
#endif

static ncclResult_t m_devices(int* n) {
  *n = ndev;
  return ncclSuccess;
}

static ncclResult_t m_props(int dev, props_t* p) {
  static char names[3][8] = {"mock0", "mock1", "mock2"};
  static char pci0[] = MOCK_PCI_0;
  if (dev < 0 || dev >= ndev || dev > 2) {
    return ncclInvalidArgument;
  }
  memset(p, 0, sizeof *p);
  p->name = names[dev];
  p->pci_path = dev == 0 ? pci0 : NULL;
  p->guid = dup && dev == 1 ? MOCK_GUID(0) : MOCK_GUID(dev);
  p->ptr_support = MOCK_PTR(dev);
  p->speed = MOCK_SPEED(dev);
  p->port = MOCK_PORT;
  p->latency = MOCK_LATENCY;
  p->max_comms = MOCK_MAX_COMMS;
  p->max_recvs = MOCK_MAX_RECVS(MOCK_ABI);
#if MOCK_ABI >= 7
  p->dev_type = offload && dev == 1 ? MOCK_OFFLOAD_TYPE : 0;
  p->dev_version = offload && dev == 1 ? MOCK_OFFLOAD_VERSION : 0;
#endif
#if MOCK_ABI >= 8
  p->reg_is_global = 1;
#endif
#if MOCK_ABI >= 9
  p->force_flush = dev == 0;
  p->vprops.ndevs = dev == 2 ? 2 : 1;
  p->vprops.devs[0] = dev == 2 ? 0 : dev;
  p->vprops.devs[1] = dev == 2 ? 1 : 0;
  p->max_p2p_bytes = MOCK_P2P_BYTES;
  p->max_coll_bytes = MOCK_P2P_BYTES;
#endif
#if MOCK_ABI >= 11
  p->max_multi_request_size = 1;
#endif
#if MOCK_ABI >= 12
  p->rail_id = (int16_t)dev;
#endif
  return ncclSuccess;
}

static ncclResult_t listen_dev(int dev, void* handle, void** listen_comm) {
  return dev < 0 || dev >= ndev ? ncclInvalidArgument : mock_listen(dev, handle, listen_comm);
}

#if MOCK_ABI >= 7
/* NCCL passes a pointer to a NULL handle when it wants no offload. */
static void seen_dev_handle(struct tutti_net_abi_dev_handle** h) {
  pthread_mutex_lock(&stats_mu);
  mock_stats()->dev_handles++;
  mock_stats()->bad_dev_handles += h == NULL || *h != NULL;
  pthread_mutex_unlock(&stats_mu);
}
#endif

#if MOCK_ABI >= 11
static ncclResult_t m_listen(void* ctx, int dev, void* handle, void** listen_comm) {
  if (!good_ctx(ctx, &mock_stats()->listen_ctx)) {
    return ncclInternalError;
  }
  return listen_dev(dev, handle, listen_comm);
}
static ncclResult_t m_connect(void* ctx, int dev, void* handle, void** send_comm,
                              struct tutti_net_abi_dev_handle** h) {
  seen_dev_handle(h);
  if (!good_ctx(ctx, &mock_stats()->connect_ctx)) {
    return ncclInternalError;
  }
  return dev < 0 || dev >= ndev ? ncclInvalidArgument : mock_connect(handle, send_comm);
}
#else
static ncclResult_t m_listen(int dev, void* handle, void** listen_comm) {
  return listen_dev(dev, handle, listen_comm);
}
#if MOCK_ABI == 10
static ncclResult_t m_connect(int dev, struct tutti_net_abi_config* config, void* handle,
                              void** send_comm, struct tutti_net_abi_dev_handle** h) {
  pthread_mutex_lock(&stats_mu);
  mock_stats()->traffic_class = config != NULL ? config->traffic_class : -2;
  pthread_mutex_unlock(&stats_mu);
#elif MOCK_ABI >= 7
static ncclResult_t m_connect(int dev, void* handle, void** send_comm,
                              struct tutti_net_abi_dev_handle** h) {
#else
static ncclResult_t m_connect(int dev, void* handle, void** send_comm) {
#endif
#if MOCK_ABI >= 7
  seen_dev_handle(h);
#endif
  return dev < 0 || dev >= ndev ? ncclInvalidArgument : mock_connect(handle, send_comm);
}
#endif

#if MOCK_ABI >= 7
static ncclResult_t m_accept(void* listen_comm, void** recv_comm,
                             struct tutti_net_abi_dev_handle** h) {
  seen_dev_handle(h);
  return mock_accept(listen_comm, recv_comm);
}
#else
static ncclResult_t m_accept(void* listen_comm, void** recv_comm) {
  return mock_accept(listen_comm, recv_comm);
}
#endif

static ncclResult_t m_reg_mr(void* comm, void* data, reg_size size, int type, void** mhandle) {
  if (NEGATIVE(size) || (type != 0x1 && type != 0x2)) {
    return ncclInternalError;
  }
  return mock_reg(comm, data, (size_t)size, 0, -1, 0, mhandle);
}

#if MOCK_HAS_DMABUF(MOCK_ABI)
static ncclResult_t m_reg_mr_dmabuf(void* comm, void* data, size_t size, int type, uint64_t offset,
                                    int fd, void** mhandle) {
  (void)type;
  return mock_reg(comm, data, size, 1, fd, offset, mhandle);
}
#endif

static ncclResult_t m_dereg_mr(void* comm, void* mhandle) {
  return mock_dereg(comm, mhandle);
}

#if MOCK_ABI >= 10
static ncclResult_t m_isend(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                            void* phandle, void** request) {
  (void)phandle;
#else
static ncclResult_t m_isend(void* send_comm, void* data, msg_size size, int tag, void* mhandle,
                            void** request) {
#endif
  if (NEGATIVE(size)) {
    return ncclInternalError;
  }
  return mock_isend(send_comm, data, (size_t)size, tag, mhandle, request);
}

#if MOCK_ABI >= 10
static ncclResult_t m_irecv(void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                            void** mhandles, void** phandles, void** request) {
  if (phandles == NULL) { /* NCCL always passes one per buffer */
    return ncclInternalError;
  }
#else
static ncclResult_t m_irecv(void* recv_comm, int n, void** data, msg_size* sizes, int* tags,
                            void** mhandles, void** request) {
#endif
  size_t sz[8];
  if (n < 1 || n > 8) {
    return ncclInternalError;
  }
  for (int i = 0; i < n; i++) {
    if (NEGATIVE(sizes[i])) {
      return ncclInternalError;
    }
    sz[i] = (size_t)sizes[i];
  }
  return mock_irecv(recv_comm, n, data, sz, tags, mhandles, request);
}

/* Host memory: nothing to flush. */
static ncclResult_t m_iflush(void* recv_comm, int n, void** data, int* sizes, void** mhandles,
                             void** request) {
  (void)recv_comm, (void)n, (void)data, (void)sizes, (void)mhandles;
  *request = NULL;
  return ncclSuccess;
}

__attribute__((visibility("default"))) const table_t CAT(ncclNetPlugin_v, MOCK_ABI) = {
  .name = MOCK_NAME,
  .init = m_init,
  .devices = m_devices,
  .get_properties = m_props,
  .listen = m_listen,
  .connect = m_connect,
  .accept = m_accept,
  .reg_mr = m_reg_mr,
#if MOCK_HAS_DMABUF(MOCK_ABI)
  .reg_mr_dmabuf = m_reg_mr_dmabuf,
#endif
  .dereg_mr = m_dereg_mr,
  .isend = m_isend,
  .irecv = m_irecv,
  .iflush = m_iflush,
  .test = mock_test,
  .close_send = mock_close,
  .close_recv = mock_close,
  .close_listen = mock_close_listen,
#if MOCK_ABI >= 11
  .finalize = m_finalize,
#endif
};
