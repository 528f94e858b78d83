/* Opens the loaded network plugin for one communicator: NCCL_NET's choice,
 * the plugin's init (per communicator from v11 on, once per process before)
 * and its devices; what cannot be used falls back to tutti's transport.
 *
 * Plugins may change the environment in init (aws-ofi-nccl sets
 * NCCL_PROTO): inits run here, one at a time under `lock`, and whatever
 * reads such a variable once (tune/proto.c reads NCCL_PROTO) must first
 * read it after the communicator's tutti_net_open. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "net/plugin/plugin.h"
#include "util/check.h"
#include "util/log.h"
#include "util/param.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct tutti_net_ops ops; /* the adapter's, with finalize below */
static int ops_ready;
static int opens;               /* live opens, for the log */
static int shared_init;         /* before v11, one init for all: 0 not yet, 1 done, -1 failed */
static ncclResult_t shared_res; /* ... and what it returned */
static int warned_net;

static void finalize(struct tutti_net* n) {
  const struct tutti_netplugin* p = tutti_netplugin_load();
  if (p->adapter.finalize != NULL) {
    ncclResult_t res = p->adapter.finalize(p->abi, p->table, n->ctx);
    if (res != ncclSuccess) {
      WARN("NET/Plugin: %s (%s) failed to finalize communicator %#llx's context (error %d)",
           n->name, n->path, (unsigned long long)n->comm_id, (int)res);
    }
  }
  pthread_mutex_lock(&lock);
  opens--;
  pthread_mutex_unlock(&lock);
}

static TUTTI_PARAM_STR(net, "NCCL_NET", NULL,
                       "a network plugin's name (any case); Socket: tutti's own transport",
                       "the network to use (unset: the plugin's when one loads)");

/* Whether NCCL_NET lets this process use the plugin. */
static int net_allows(const struct tutti_netplugin* p) {
  const char* want = tutti_param_net();
  if (want == NULL || *want == '\0') {
    return p != NULL;
  }
  if (strcasecmp(want, "Socket") == 0) {
    if (p != NULL) {
      INFO(TUTTI_INIT | TUTTI_NET, "NET/Plugin: NCCL_NET=%s: tutti's own transport, not %s", want,
           p->name);
    }
    return 0;
  }
  if (p != NULL && strcasecmp(want, p->name) == 0) {
    return 1;
  }
  if (__atomic_exchange_n(&warned_net, 1, __ATOMIC_RELAXED)) {
    /* said once */
  } else if (p != NULL) {
    WARN(
        "NCCL_NET=%s is neither the network of plugin %s (\"%s\") nor tutti's own (Socket): "
        "tutti uses its own transport. Unset NCCL_NET, or point NCCL_NET_PLUGIN at a plugin "
        "for %s",
        want, p->path, p->name, want);
  } else {
    WARN(
        "NCCL_NET=%s names a network, but no network plugin is loaded (NCCL_NET_PLUGIN): tutti "
        "uses its own transport (Socket)",
        want);
  }
  return 0;
}

/* The plugin's init for this open (under `lock`): before v11 only the
 * first open calls it, and later ones get its first result. */
static ncclResult_t plugin_init(const struct tutti_netplugin* p, uint64_t comm_id, void** ctx) {
  *ctx = NULL;
  if (p->adapter.per_comm) {
    return p->adapter.init(p->abi, p->table, comm_id, ctx);
  }
  if (shared_init == 0) {
    void* none = NULL;
    shared_res = p->adapter.init(p->abi, p->table, comm_id, &none);
    shared_init = shared_res == ncclSuccess ? 1 : -1;
  }
  return shared_res;
}

ncclResult_t tutti_net_open(uint64_t comm_id, struct tutti_net** out) {
  *out = NULL;
  const struct tutti_netplugin* p = tutti_netplugin_load();
  if (!net_allows(p)) {
    return ncclSuccess;
  }
  struct tutti_net* n = calloc(1, sizeof *n);
  if (n == NULL) {
    return tutti_error(ncclSystemError, "out of host memory opening network plugin %s", p->path);
  }
  n->ops = &ops;
  memcpy(n->name, p->name, sizeof n->name);
  memcpy(n->path, p->path, sizeof n->path);
  n->abi = p->abi;
  n->table = p->table;
  n->comm_id = comm_id;

  int ndev = 0;
  pthread_mutex_lock(&lock);
  if (!ops_ready) {
    ops = p->adapter.ops;
    ops.finalize = finalize;
    ops_ready = 1;
  }
  const ncclResult_t res = plugin_init(p, comm_id, &n->ctx);
  const ncclResult_t dres = res == ncclSuccess ? ops.devices(n, &ndev) : res;
  const int usable = res == ncclSuccess && dres == ncclSuccess && ndev > 0;
  opens += usable;
  const int live = opens;
  pthread_mutex_unlock(&lock);

  if (usable) {
    INFO(TUTTI_INIT | TUTTI_NET,
         "NET/Plugin: using %s (\"%s\", ABI v%d) for comm %#llx: %d devices (%d open)", n->path,
         n->name, n->abi, (unsigned long long)comm_id, ndev, live);
    *out = n;
    return ncclSuccess;
  }
  if (res == ncclSuccess && p->adapter.finalize != NULL) {
    (void)p->adapter.finalize(p->abi, p->table, n->ctx);
  }
  free(n);
  if (res != ncclSuccess && p->named) {
    return tutti_error(ncclSystemError,
                       "the network plugin %s (\"%s\", ABI v%d) failed to initialize (error %d): "
                       "see its own messages (NCCL_DEBUG=INFO), or set NCCL_NET_PLUGIN=none to "
                       "use tutti's own transport",
                       p->path, p->name, p->abi, (int)res);
  }
  if (res != ncclSuccess) {
    INFO(TUTTI_INIT | TUTTI_NET,
         "NET/Plugin: %s failed to initialize (error %d): tutti's own "
         "transport",
         p->path, (int)res);
  } else if (dres != ncclSuccess) {
    WARN("NET/Plugin: %s could not count its devices (error %d): tutti uses its own transport",
         p->path, (int)dres);
  } else {
    INFO(TUTTI_INIT | TUTTI_NET,
         "NET/Plugin: %s (\"%s\") has no devices here: tutti's own "
         "transport",
         p->path, p->name);
  }
  return ncclSuccess;
}

void tutti_net_close(struct tutti_net* n) {
  if (n != NULL) {
    n->ops->finalize(n);
    free(n);
  }
}
