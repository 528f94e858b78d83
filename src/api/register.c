/* Local registration (NCCL_LOCAL_REGISTER, see register.h): each
 * communicator's registration cache over the device executor's driver
 * table, the references NCCL's calls take on it, and the per-call verdict
 * in the log. No collective reads a peer's buffer in place yet: every call
 * is still staged, and the INFO line says whether it could have run in
 * place. */
#include "api/register.h"

#include <pthread.h>
#include <stdlib.h>

#include "api/comm.h"
#include "device/device.h"
#include "device/peer/regcache.h"
#include "tune/tune.h"
#include "util/check.h"
#include "util/cuda.h"
#include "util/log.h"

/* Local entries a communicator keeps (and imports per peer): PyTorch's
 * caching allocator registers each of its segments, hundreds at most. */
#define REG_MAX_ENTRIES 1024

struct reg_hold {
  const void* key;
  struct tutti_reg_entry* e;
};

struct tutti_reg_comm {
  struct tutti_regcache* rc;
  pthread_mutex_t mu; /* the windows' holds */
  struct reg_hold* holds;
  int nholds, cap;
};

static struct tutti_reg_comm* reg_of(struct ncclComm* comm) {
  return __atomic_load_n(&comm->reg, __ATOMIC_ACQUIRE);
}

void tutti_reg_open(struct ncclComm* comm) {
  if (!tutti_tune_local_register() || comm->dev == NULL) {
    return;
  }
  struct tutti_regcache_driver drv;
  if (!tutti_dev_regcache_driver(comm->dev, &drv)) {
    return;
  }
  struct tutti_reg_comm* r = calloc(1, sizeof *r);
  if (r == NULL ||
      tutti_regcache_create(&drv, comm->nranks, REG_MAX_ENTRIES, &r->rc) != ncclSuccess) {
    free(r);
    WARN(
        "rank %d: NCCL_LOCAL_REGISTER=1, but the registration cache could not be made (%s): "
        "every buffer is staged",
        comm->rank, ncclGetLastError(NULL));
    return;
  }
  pthread_mutex_init(&r->mu, NULL);
  __atomic_store_n(&comm->reg, r, __ATOMIC_RELEASE);
  INFO(TUTTI_INIT | TUTTI_REG,
       "rank %d: registration cache on (NCCL_LOCAL_REGISTER=1, at most %d allocations): "
       "buffers are registered and checked; calls are still staged",
       comm->rank, REG_MAX_ENTRIES);
}

void tutti_reg_close(struct ncclComm* comm) {
  struct tutti_reg_comm* r = reg_of(comm);
  if (r == NULL) {
    return;
  }
  __atomic_store_n(&comm->reg, NULL, __ATOMIC_RELEASE);
  tutti_regcache_destroy(r->rc);
  pthread_mutex_destroy(&r->mu);
  free(r->holds);
  free(r);
}

void tutti_reg_suspend(struct ncclComm* comm) {
  struct tutti_reg_comm* r = reg_of(comm);
  if (r != NULL) {
    tutti_regcache_suspend(r->rc);
  }
}

static void log_view(const struct ncclComm* comm, const char* what, const void* p, size_t bytes,
                     const struct tutti_reg_view* v) {
  INFO(TUTTI_REG, "rank %d: %s %p (%zu bytes): %s%s", comm->rank, what, p, bytes,
       v->reason == TUTTI_REG_IN_PLACE ? "registered, peers may map it" : "staged: ",
       v->reason == TUTTI_REG_IN_PLACE ? "" : tutti_regcache_reason(v->reason));
}

ncclResult_t tutti_reg_register(struct ncclComm* comm, const void* buff, size_t size,
                                struct tutti_reg_entry** e) {
  *e = NULL;
  struct tutti_reg_comm* r = reg_of(comm);
  if (r == NULL) {
    return ncclSuccess;
  }
  struct tutti_reg_view v;
  NCCLCHECK(tutti_regcache_register(r->rc, buff, size, &v));
  log_view(comm, "ncclCommRegister", buff, size, &v);
  *e = v.entry;
  return ncclSuccess;
}

void tutti_reg_deregister(struct ncclComm* comm, struct tutti_reg_entry* e) {
  struct tutti_reg_comm* r = reg_of(comm);
  if (r != NULL && e != NULL) {
    tutti_regcache_deregister(r->rc, e);
  }
}

void tutti_reg_window(struct ncclComm* comm, const void* win, const void* buff, size_t size) {
  struct tutti_reg_comm* r = reg_of(comm);
  struct tutti_reg_view v;
  if (r == NULL || tutti_regcache_register(r->rc, buff, size, &v) != ncclSuccess) {
    return; /* staged; a window works without the cache */
  }
  log_view(comm, "ncclCommWindowRegister", buff, size, &v);
  if (v.entry == NULL) {
    return;
  }
  pthread_mutex_lock(&r->mu);
  if (r->nholds == r->cap) {
    const int cap = r->cap ? 2 * r->cap : 8;
    struct reg_hold* n = realloc(r->holds, (size_t)cap * sizeof *n);
    if (n == NULL) {
      pthread_mutex_unlock(&r->mu);
      tutti_regcache_deregister(r->rc, v.entry);
      return;
    }
    r->holds = n;
    r->cap = cap;
  }
  r->holds[r->nholds++] = (struct reg_hold){win, v.entry};
  pthread_mutex_unlock(&r->mu);
}

void tutti_reg_window_release(struct ncclComm* comm, const void* win) {
  struct tutti_reg_comm* r = reg_of(comm);
  if (r == NULL) {
    return;
  }
  struct tutti_reg_entry* e = NULL;
  pthread_mutex_lock(&r->mu);
  for (int i = 0; i < r->nholds; i++) {
    if (r->holds[i].key == win) {
      e = r->holds[i].e;
      r->holds[i] = r->holds[--r->nholds];
      break;
    }
  }
  pthread_mutex_unlock(&r->mu);
  if (e != NULL) {
    tutti_regcache_deregister(r->rc, e);
  }
}

struct mem_arg {
  const void* ptr;
  size_t size;
  int dev;
};

static void mem_alloc_one(struct ncclComm* comm, void* arg) {
  const struct mem_arg* m = arg;
  struct tutti_reg_comm* r = reg_of(comm);
  struct tutti_reg_view v;
  if (r != NULL && comm->cuda_dev == m->dev) {
    (void)tutti_regcache_lookup(r->rc, m->ptr, m->size, &v); /* staged is no failure */
  }
}

static void mem_free_one(struct ncclComm* comm, void* arg) {
  const struct mem_arg* m = arg;
  struct tutti_reg_comm* r = reg_of(comm);
  if (r != NULL) {
    tutti_regcache_forget(r->rc, m->ptr);
  }
}

void tutti_reg_mem_alloc(const void* ptr, size_t size) {
  if (!tutti_tune_local_register()) {
    return;
  }
  struct mem_arg m = {ptr, size, tutti_cuda_current_device()};
  tutti_comm_for_each(mem_alloc_one, &m);
}

void tutti_reg_mem_free(const void* ptr) {
  if (!tutti_tune_local_register()) {
    return;
  }
  struct mem_arg m = {ptr, 0, -1};
  tutti_comm_for_each(mem_free_one, &m);
}

/* One buffer of a call: its verdict in *v (EMPTY where there is none). */
static void look(struct tutti_reg_comm* r, const void* p, size_t bytes, struct tutti_reg_view* v) {
  if (p == NULL || bytes == 0 || tutti_regcache_lookup(r->rc, p, bytes, v) != ncclSuccess) {
    v->reason = bytes == 0 || p == NULL ? TUTTI_REG_EMPTY : TUTTI_REG_UNMAPPABLE;
  }
}

void tutti_reg_call(struct ncclComm* comm, const char* fn, uint64_t seq, const void* send,
                    size_t send_bytes, const void* recv, size_t recv_bytes) {
  struct tutti_reg_comm* r = reg_of(comm);
  if (r == NULL) {
    /* The level first: an inline compare, no call, when INFO is off. */
    if (TUTTI_LOG_ENABLED(TUTTI_LOG_INFO) &&
        tutti_log_wants(TUTTI_LOG_INFO, TUTTI_COLL | TUTTI_REG)) {
      INFO(TUTTI_COLL | TUTTI_REG, "%s #%llu: staged: %s", fn, (unsigned long long)seq,
           tutti_tune_local_register()
               ? "no registration cache on this communicator (see its init lines)"
               : tutti_regcache_reason(TUTTI_REG_OFF));
    }
    return;
  }
  struct tutti_reg_view s, d;
  look(r, send, send_bytes, &s);
  look(r, recv, recv_bytes, &d);
  if (!TUTTI_LOG_ENABLED(TUTTI_LOG_INFO) ||
      !tutti_log_wants(TUTTI_LOG_INFO, TUTTI_COLL | TUTTI_REG)) {
    return;
  }
  const int ok = (s.reason == TUTTI_REG_IN_PLACE || s.reason == TUTTI_REG_EMPTY) &&
                 (d.reason == TUTTI_REG_IN_PLACE || d.reason == TUTTI_REG_EMPTY);
  INFO(TUTTI_COLL | TUTTI_REG, "%s #%llu: %s: send %s, recv %s", fn, (unsigned long long)seq,
       ok ? "staged (in place once the device path reads peers' buffers)" : "staged",
       tutti_regcache_reason(s.reason), tutti_regcache_reason(d.reason));
}

uint64_t tutti_reg_peer_mapped(struct ncclComm* comm) {
  struct tutti_reg_comm* r = reg_of(comm);
  if (r == NULL) {
    return 0;
  }
  struct tutti_regcache_stats st;
  tutti_regcache_stats(r->rc, &st);
  return st.import_bytes;
}
