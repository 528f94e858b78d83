/* The registration cache (see regcache.h): local entries in a hash by
 * allocation base, each peer's imports in a small array, all under one
 * mutex. The driver is called with the mutex held: an export or an import
 * is rare (once per allocation) and holding the lock keeps two threads
 * from exporting one allocation twice. */
#include "device/peer/regcache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "util/check.h"

#define NBUCKETS 256

struct tutti_reg_entry {
  struct tutti_reg_alloc alloc;
  void* handle;
  int exported;
  /* References: register / ncclMemAlloc / windows, plus one the cache
   * itself holds after a first use (`cached`), which eviction drops. */
  int refs;
  int cached;
  int graphs; /* captured graphs holding it: its export outlives its references */
  int live;   /* in the hash: nothing says its address holds another allocation */
  uint64_t used;
  struct tutti_reg_entry* hnext;       /* bucket chain (live entries) */
  struct tutti_reg_entry *prev, *next; /* every entry, live or not */
};

struct reg_import {
  struct tutti_reg_alloc alloc;
  void* mapped;
  void* token;
  int refs;
  uint64_t used;
};

struct peer_imports {
  struct reg_import* v;
  int n, cap;
};

struct tutti_regcache {
  pthread_mutex_t mu;
  struct tutti_regcache_driver drv;
  int npeers, max;
  struct tutti_reg_entry* buckets[NBUCKETS];
  struct tutti_reg_entry* all;
  int nentries;
  struct peer_imports* peers; /* [npeers] */
  uint64_t tick;
  struct tutti_regcache_stats st;
};

static const char* const reasons[] = {
    [TUTTI_REG_IN_PLACE] = "in place",
    [TUTTI_REG_OFF] = "local registration is off (NCCL_LOCAL_REGISTER=0)",
    [TUTTI_REG_NOT_CUDA] = "host memory CUDA does not know",
    [TUTTI_REG_MANAGED] = "managed memory (its pages move; peers cannot map it)",
    [TUTTI_REG_PINNED] = "pinned host memory",
    [TUTTI_REG_UNMAPPABLE] = "device memory with no handle a peer can import",
    [TUTTI_REG_SPANS] = "the range leaves its allocation (it spans two allocations)",
    [TUTTI_REG_EXPORT] = "the driver could not export the allocation",
    [TUTTI_REG_FULL] = "the registration cache is full of referenced entries",
    [TUTTI_REG_EMPTY] = "no bytes",
};

const char* tutti_regcache_reason(enum tutti_reg_reason r) {
  return (unsigned)r < sizeof reasons / sizeof reasons[0] && reasons[r] ? reasons[r] : "unknown";
}

static unsigned bucket(uintptr_t base) {
  return (unsigned)((base >> 12) ^ (base >> 24)) % NBUCKETS;
}

static int same_ident(const struct tutti_reg_ident* a, const struct tutti_reg_ident* b) {
  return a->buffer_id == b->buffer_id && a->base == b->base && a->size == b->size;
}

ncclResult_t tutti_regcache_create(const struct tutti_regcache_driver* drv, int npeers,
                                   int max_entries, struct tutti_regcache** out) {
  *out = NULL;
  if (drv == NULL || drv->query == NULL || drv->export_alloc == NULL || drv->unexport == NULL ||
      drv->import_alloc == NULL || drv->unmap == NULL || npeers < 0 || max_entries < 1) {
    return tutti_error(ncclInternalError, "registration cache: an incomplete driver table");
  }
  struct tutti_regcache* rc = calloc(1, sizeof *rc);
  struct peer_imports* peers = calloc(npeers > 0 ? (size_t)npeers : 1, sizeof *peers);
  if (rc == NULL || peers == NULL) {
    free(rc);
    free(peers);
    return tutti_error(ncclSystemError, "registration cache: out of host memory");
  }
  pthread_mutex_init(&rc->mu, NULL);
  rc->drv = *drv;
  rc->npeers = npeers;
  rc->max = max_entries;
  rc->peers = peers;
  *out = rc;
  return ncclSuccess;
}

static void unhash(struct tutti_regcache* rc, struct tutti_reg_entry* e) {
  if (!e->live) {
    return;
  }
  struct tutti_reg_entry** p = &rc->buckets[bucket(e->alloc.id.base)];
  while (*p != e) {
    p = &(*p)->hnext;
  }
  *p = e->hnext;
  e->hnext = NULL;
  e->live = 0;
}

static void unexport(struct tutti_regcache* rc, struct tutti_reg_entry* e) {
  if (e->exported) {
    rc->drv.unexport(rc->drv.ctx, e->handle);
    e->exported = 0;
    e->handle = NULL;
  }
}

static void entry_free(struct tutti_regcache* rc, struct tutti_reg_entry* e) {
  unhash(rc, e);
  unexport(rc, e);
  if (e->prev != NULL) {
    e->prev->next = e->next;
  } else {
    rc->all = e->next;
  }
  if (e->next != NULL) {
    e->next->prev = e->prev;
  }
  rc->nentries--;
  free(e);
}

/* Frees `e` once nothing holds it. */
static void settle(struct tutti_regcache* rc, struct tutti_reg_entry* e) {
  if (e->refs == 0 && e->graphs == 0) {
    entry_free(rc, e);
  }
}

/* The cache's own reference goes (eviction, a stale address, suspend). */
static void drop_cached(struct tutti_regcache* rc, struct tutti_reg_entry* e) {
  if (e->cached) {
    e->cached = 0;
    e->refs--;
  }
  settle(rc, e);
}

/* Another allocation lives at e's address: e is never found again, and
 * its export goes now unless a graph holds it; whoever registered it
 * still holds the (dead) entry until deregistering. */
static void retire(struct tutti_regcache* rc, struct tutti_reg_entry* e) {
  rc->st.stale++;
  unhash(rc, e);
  if (e->graphs == 0) {
    unexport(rc, e);
  }
  drop_cached(rc, e);
}

/* Evicts the least recently used entry only the cache holds: 1, or 0
 * when every entry is referenced. */
static int evict_one(struct tutti_regcache* rc) {
  struct tutti_reg_entry* lru = NULL;
  for (struct tutti_reg_entry* e = rc->all; e != NULL; e = e->next) {
    if (e->refs == e->cached && e->graphs == 0 && (lru == NULL || e->used < lru->used)) {
      lru = e;
    }
  }
  if (lru == NULL) {
    return 0;
  }
  rc->st.evictions++;
  drop_cached(rc, lru);
  return 1;
}

static struct tutti_reg_entry* find(struct tutti_regcache* rc, uintptr_t base) {
  for (struct tutti_reg_entry* e = rc->buckets[bucket(base)]; e != NULL; e = e->hnext) {
    if (e->alloc.id.base == base) {
      return e;
    }
  }
  return NULL;
}

static enum tutti_reg_reason kind_reason(int kind) {
  switch (kind) {
    case TUTTI_REG_KIND_CUMEM:
    case TUTTI_REG_KIND_MALLOC:
      return TUTTI_REG_IN_PLACE;
    case TUTTI_REG_KIND_MANAGED:
      return TUTTI_REG_MANAGED;
    case TUTTI_REG_KIND_HOST_PINNED:
      return TUTTI_REG_PINNED;
    case TUTTI_REG_KIND_HOST:
      return TUTTI_REG_NOT_CUDA;
    default:
      return TUTTI_REG_UNMAPPABLE;
  }
}

/* The entry for (ptr, bytes), made and exported if needed; takes a user
 * reference (`user`) or the cache's own. */
static ncclResult_t resolve(struct tutti_regcache* rc, const void* ptr, size_t bytes, int user,
                            struct tutti_reg_view* v) {
  memset(v, 0, sizeof *v);
  if (bytes == 0) {
    v->reason = TUTTI_REG_EMPTY;
    return ncclSuccess;
  }
  struct tutti_reg_alloc a;
  memset(&a, 0, sizeof a);
  if (rc->drv.query(rc->drv.ctx, ptr, &a) != 0) {
    return tutti_error(ncclUnhandledCudaError,
                       "registration cache: the CUDA driver could not say which allocation "
                       "holds %p; set NCCL_LOCAL_REGISTER=0 to stage every buffer",
                       ptr);
  }
  v->alloc = a;
  v->reason = kind_reason(a.kind);
  if (v->reason != TUTTI_REG_IN_PLACE) {
    return ncclSuccess;
  }
  const uintptr_t p = (uintptr_t)ptr;
  if (p < a.id.base || p - a.id.base >= a.id.size || bytes > a.id.size - (p - a.id.base)) {
    v->reason = TUTTI_REG_SPANS;
    return ncclSuccess;
  }
  v->offset = p - a.id.base;
  pthread_mutex_lock(&rc->mu);
  struct tutti_reg_entry* e = find(rc, a.id.base);
  if (e != NULL && !same_ident(&e->alloc.id, &a.id)) {
    retire(rc, e);
    e = NULL;
  }
  int made = 0;
  if (e != NULL) {
    rc->st.hits++;
  } else {
    rc->st.misses++;
    if (rc->nentries >= rc->max && !evict_one(rc)) {
      pthread_mutex_unlock(&rc->mu);
      v->reason = TUTTI_REG_FULL;
      return ncclSuccess;
    }
    e = calloc(1, sizeof *e);
    if (e == NULL) {
      pthread_mutex_unlock(&rc->mu);
      return tutti_error(ncclSystemError, "registration cache: out of host memory");
    }
    e->alloc = a;
    e->live = 1;
    const unsigned b = bucket(a.id.base);
    e->hnext = rc->buckets[b];
    rc->buckets[b] = e;
    e->next = rc->all;
    if (rc->all != NULL) {
      rc->all->prev = e;
    }
    rc->all = e;
    rc->nentries++;
    made = 1;
  }
  if (!e->exported) {
    if (rc->drv.export_alloc(rc->drv.ctx, &e->alloc, &e->handle) != 0) {
      e->handle = NULL;
      if (made) {
        entry_free(rc, e);
      }
      pthread_mutex_unlock(&rc->mu);
      v->reason = TUTTI_REG_EXPORT;
      return ncclSuccess;
    }
    e->exported = 1;
  }
  if (user) {
    e->refs++;
  } else if (!e->cached) {
    e->cached = 1;
    e->refs++;
  }
  e->used = ++rc->tick;
  v->entry = e;
  v->handle = e->handle;
  pthread_mutex_unlock(&rc->mu);
  return ncclSuccess;
}

ncclResult_t tutti_regcache_register(struct tutti_regcache* rc, const void* ptr, size_t bytes,
                                     struct tutti_reg_view* v) {
  return resolve(rc, ptr, bytes, 1, v);
}

ncclResult_t tutti_regcache_lookup(struct tutti_regcache* rc, const void* ptr, size_t bytes,
                                   struct tutti_reg_view* v) {
  return resolve(rc, ptr, bytes, 0, v);
}

void tutti_regcache_deregister(struct tutti_regcache* rc, struct tutti_reg_entry* e) {
  if (e == NULL) {
    return;
  }
  pthread_mutex_lock(&rc->mu);
  if (e->refs > e->cached) {
    e->refs--;
  }
  /* The caller is done with the buffer: the cache lets it go too. */
  if (e->refs == e->cached) {
    drop_cached(rc, e);
  } else {
    settle(rc, e);
  }
  pthread_mutex_unlock(&rc->mu);
}

void tutti_regcache_forget(struct tutti_regcache* rc, const void* base) {
  pthread_mutex_lock(&rc->mu);
  struct tutti_reg_entry* e = find(rc, (uintptr_t)base);
  if (e != NULL) {
    retire(rc, e);
  }
  pthread_mutex_unlock(&rc->mu);
}

void tutti_regcache_graph_hold(struct tutti_regcache* rc, struct tutti_reg_entry* e, int delta) {
  if (e == NULL) {
    return;
  }
  pthread_mutex_lock(&rc->mu);
  e->graphs += delta;
  if (e->graphs < 0) {
    e->graphs = 0;
  }
  if (e->graphs == 0 && !e->live) {
    unexport(rc, e); /* its address holds another allocation now */
  }
  settle(rc, e);
  pthread_mutex_unlock(&rc->mu);
}

/* ---- peer side ---- */

static void import_unmap(struct tutti_regcache* rc, int peer, struct peer_imports* pi, int i) {
  rc->drv.unmap(rc->drv.ctx, peer, pi->v[i].token);
  pi->v[i] = pi->v[--pi->n];
}

static int import_find(const struct peer_imports* pi, uintptr_t base) {
  for (int i = 0; i < pi->n; i++) {
    if (pi->v[i].alloc.id.base == base) {
      return i;
    }
  }
  return -1;
}

ncclResult_t tutti_regcache_import(struct tutti_regcache* rc, int peer,
                                   const struct tutti_reg_alloc* a, const void* blob,
                                   size_t blob_len, void** mapped) {
  *mapped = NULL;
  if (peer < 0 || peer >= rc->npeers) {
    return tutti_error(ncclInternalError, "registration cache: peer %d of %d", peer, rc->npeers);
  }
  pthread_mutex_lock(&rc->mu);
  struct peer_imports* pi = &rc->peers[peer];
  int i = import_find(pi, a->id.base);
  if (i >= 0 && !same_ident(&pi->v[i].alloc.id, &a->id)) {
    rc->st.stale++;
    import_unmap(rc, peer, pi, i);
    i = -1;
  }
  if (i < 0) {
    if (pi->n >= rc->max) {
      int lru = -1;
      for (int k = 0; k < pi->n; k++) {
        if (pi->v[k].refs == 0 && (lru < 0 || pi->v[k].used < pi->v[lru].used)) {
          lru = k;
        }
      }
      if (lru < 0) {
        pthread_mutex_unlock(&rc->mu);
        return ncclSuccess; /* *mapped NULL: staged */
      }
      rc->st.evictions++;
      import_unmap(rc, peer, pi, lru);
    }
    if (pi->n == pi->cap) {
      const int cap = pi->cap == 0 ? 8 : pi->cap * 2;
      struct reg_import* nv = realloc(pi->v, (size_t)cap * sizeof *nv);
      if (nv == NULL) {
        pthread_mutex_unlock(&rc->mu);
        return tutti_error(ncclSystemError, "registration cache: out of host memory");
      }
      pi->v = nv;
      pi->cap = cap;
    }
    void *m = NULL, *token = NULL;
    if (rc->drv.import_alloc(rc->drv.ctx, peer, a, blob, blob_len, &m, &token) != 0) {
      pthread_mutex_unlock(&rc->mu);
      return tutti_error(ncclUnhandledCudaError,
                         "registration cache: could not map rank %d's buffer at %#lx (%zu "
                         "bytes); set NCCL_LOCAL_REGISTER=0 to stage every buffer",
                         peer, (unsigned long)a->id.base, a->id.size);
    }
    i = pi->n++;
    pi->v[i] = (struct reg_import){*a, m, token, 0, 0};
    rc->st.misses++;
  } else {
    rc->st.hits++;
  }
  pi->v[i].refs++;
  pi->v[i].used = ++rc->tick;
  *mapped = pi->v[i].mapped;
  pthread_mutex_unlock(&rc->mu);
  return ncclSuccess;
}

void tutti_regcache_import_put(struct tutti_regcache* rc, int peer,
                               const struct tutti_reg_ident* id) {
  if (peer < 0 || peer >= rc->npeers) {
    return;
  }
  pthread_mutex_lock(&rc->mu);
  struct peer_imports* pi = &rc->peers[peer];
  const int i = import_find(pi, id->base);
  if (i >= 0 && same_ident(&pi->v[i].alloc.id, id) && pi->v[i].refs > 0) {
    pi->v[i].refs--;
  }
  pthread_mutex_unlock(&rc->mu);
}

void tutti_regcache_import_drop(struct tutti_regcache* rc, int peer,
                                const struct tutti_reg_ident* id) {
  if (peer < 0 || peer >= rc->npeers) {
    return;
  }
  pthread_mutex_lock(&rc->mu);
  struct peer_imports* pi = &rc->peers[peer];
  const int i = import_find(pi, id->base);
  if (i >= 0 && same_ident(&pi->v[i].alloc.id, id)) {
    import_unmap(rc, peer, pi, i);
  }
  pthread_mutex_unlock(&rc->mu);
}

static void peer_unmap_all(struct tutti_regcache* rc, int peer) {
  struct peer_imports* pi = &rc->peers[peer];
  while (pi->n > 0) {
    import_unmap(rc, peer, pi, pi->n - 1);
  }
}

void tutti_regcache_peer_gone(struct tutti_regcache* rc, int peer) {
  if (peer < 0 || peer >= rc->npeers) {
    return;
  }
  pthread_mutex_lock(&rc->mu);
  peer_unmap_all(rc, peer);
  pthread_mutex_unlock(&rc->mu);
}

void tutti_regcache_suspend(struct tutti_regcache* rc) {
  pthread_mutex_lock(&rc->mu);
  for (int p = 0; p < rc->npeers; p++) {
    peer_unmap_all(rc, p);
  }
  struct tutti_reg_entry* next = NULL;
  for (struct tutti_reg_entry* e = rc->all; e != NULL; e = next) {
    next = e->next;
    if (e->graphs > 0) {
      continue;
    }
    if (e->refs == e->cached) {
      drop_cached(rc, e);
    } else {
      unexport(rc, e);
    }
  }
  pthread_mutex_unlock(&rc->mu);
}

void tutti_regcache_stats(struct tutti_regcache* rc, struct tutti_regcache_stats* s) {
  pthread_mutex_lock(&rc->mu);
  *s = rc->st;
  s->entries = (uint64_t)rc->nentries;
  for (struct tutti_reg_entry* e = rc->all; e != NULL; e = e->next) {
    if (e->exported) {
      s->exported++;
      s->export_bytes += e->alloc.id.size;
    }
  }
  for (int p = 0; p < rc->npeers; p++) {
    for (int i = 0; i < rc->peers[p].n; i++) {
      s->imports++;
      s->import_bytes += rc->peers[p].v[i].alloc.id.size;
    }
  }
  pthread_mutex_unlock(&rc->mu);
}

void tutti_regcache_destroy(struct tutti_regcache* rc) {
  if (rc == NULL) {
    return;
  }
  pthread_mutex_lock(&rc->mu);
  for (int p = 0; p < rc->npeers; p++) {
    peer_unmap_all(rc, p);
    free(rc->peers[p].v);
  }
  while (rc->all != NULL) {
    entry_free(rc, rc->all);
  }
  pthread_mutex_unlock(&rc->mu);
  pthread_mutex_destroy(&rc->mu);
  free(rc->peers);
  free(rc);
}
