/* The registration cache (device/peer/regcache.h) over a fake driver: hits
 * and misses, an address freed and allocated again (a new buffer id) never
 * reaching the old entry, ranges spanning allocations and memory peers
 * cannot map staged with their reason, reference counts, LRU eviction under
 * the bound, graph holds, suspend, peer death, destroy, and threads
 * hammering one cache (run under TSan too). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "device/peer/regcache.h"
#include "harness.h"

/* ---- the fake driver: allocations in a table, exports and maps counted ---- */

#define MAX_ALLOCS 64
#define MAX_LIVE 4096

struct fake {
  pthread_mutex_t mu;
  struct tutti_reg_alloc allocs[MAX_ALLOCS];
  int nallocs;
  uint64_t next_id;
  int exports, unexports, imports, unmaps;
  int fail_export;
  /* The handles not yet unexported and the mappings not yet unmapped:
   * each must go exactly once. */
  void* live_exports[MAX_LIVE];
  int nlive_exports;
  int double_release;
};

static struct fake F;

static void fake_reset(void) {
  pthread_mutex_destroy(&F.mu);
  memset(&F, 0, sizeof F);
  pthread_mutex_init(&F.mu, NULL);
  F.next_id = 100;
}

/* An allocation of `size` bytes at `base` (replacing any there). */
static struct tutti_reg_alloc fake_alloc(uintptr_t base, size_t size, int kind) {
  pthread_mutex_lock(&F.mu);
  int i = 0;
  while (i < F.nallocs && F.allocs[i].id.base != base) {
    i++;
  }
  if (i == F.nallocs) {
    F.nallocs++;
  }
  F.allocs[i] = (struct tutti_reg_alloc){{F.next_id++, base, size}, kind};
  const struct tutti_reg_alloc a = F.allocs[i];
  pthread_mutex_unlock(&F.mu);
  return a;
}

static int q_query(void* ctx, const void* ptr, struct tutti_reg_alloc* out) {
  (void)ctx;
  const uintptr_t p = (uintptr_t)ptr;
  pthread_mutex_lock(&F.mu);
  *out = (struct tutti_reg_alloc){{0, 0, 0}, TUTTI_REG_KIND_HOST};
  for (int i = 0; i < F.nallocs; i++) {
    if (p >= F.allocs[i].id.base && p < F.allocs[i].id.base + F.allocs[i].id.size) {
      *out = F.allocs[i];
    }
  }
  pthread_mutex_unlock(&F.mu);
  return 0;
}

static int q_export(void* ctx, const struct tutti_reg_alloc* a, void** handle) {
  (void)ctx;
  pthread_mutex_lock(&F.mu);
  int rc = -1;
  if (!F.fail_export && F.nlive_exports < MAX_LIVE) {
    *handle = (void*)(uintptr_t)(a->id.buffer_id * 16 + 1);
    F.live_exports[F.nlive_exports++] = *handle;
    F.exports++;
    rc = 0;
  }
  pthread_mutex_unlock(&F.mu);
  return rc;
}

static void q_unexport(void* ctx, void* handle) {
  (void)ctx;
  pthread_mutex_lock(&F.mu);
  int i = 0;
  while (i < F.nlive_exports && F.live_exports[i] != handle) {
    i++;
  }
  if (i == F.nlive_exports) {
    F.double_release++;
  } else {
    F.live_exports[i] = F.live_exports[--F.nlive_exports];
  }
  F.unexports++;
  pthread_mutex_unlock(&F.mu);
}

static int q_import(void* ctx, int peer, const struct tutti_reg_alloc* a, const void* blob,
                    size_t blob_len, void** mapped, void** token) {
  (void)ctx;
  (void)blob;
  (void)blob_len;
  pthread_mutex_lock(&F.mu);
  /* A fake local address that names the peer and the buffer id. */
  *mapped = (void*)(uintptr_t)(((uint64_t)(peer + 1) << 40) | (a->id.buffer_id << 12));
  *token = *mapped;
  F.imports++;
  pthread_mutex_unlock(&F.mu);
  return 0;
}

static void q_unmap(void* ctx, int peer, void* token) {
  (void)ctx;
  (void)peer;
  (void)token;
  pthread_mutex_lock(&F.mu);
  F.unmaps++;
  pthread_mutex_unlock(&F.mu);
}

static const struct tutti_regcache_driver DRV = {NULL,       q_query,  q_export,
                                                 q_unexport, q_import, q_unmap};

static struct tutti_regcache* make(int npeers, int max) {
  struct tutti_regcache* rc = NULL;
  CHECK_NCCL(tutti_regcache_create(&DRV, npeers, max, &rc));
  return rc;
}

static const void* P(uintptr_t a) {
  return (const void*)a;
}

#define MB ((size_t)1 << 20)
#define A1 ((uintptr_t)0x10000000)
#define A2 ((uintptr_t)0x20000000)

static void test_hit_miss(void) {
  fake_reset();
  struct tutti_regcache* rc = make(2, 8);
  fake_alloc(A1, 4 * MB, TUTTI_REG_KIND_CUMEM);
  struct tutti_reg_view v;
  CHECK_NCCL(tutti_regcache_lookup(rc, P(A1 + 4096), MB, &v));
  CHECK(v.reason == TUTTI_REG_IN_PLACE, "first use: %s", tutti_regcache_reason(v.reason));
  CHECK(v.offset == 4096 && v.entry != NULL, "offset %zu", v.offset);
  struct tutti_reg_view w;
  CHECK_NCCL(tutti_regcache_lookup(rc, P(A1 + 2 * MB), 2 * MB, &w));
  CHECK(w.entry == v.entry && w.handle == v.handle, "the same allocation: the same entry");
  struct tutti_regcache_stats s;
  tutti_regcache_stats(rc, &s);
  CHECK(s.misses == 1 && s.hits == 1 && s.entries == 1, "misses %llu hits %llu entries %llu",
        (unsigned long long)s.misses, (unsigned long long)s.hits, (unsigned long long)s.entries);
  CHECK(F.exports == 1, "exported once, not %d times", F.exports);
  CHECK(s.export_bytes == 4 * MB, "export bytes %llu", (unsigned long long)s.export_bytes);
  tutti_regcache_destroy(rc);
  CHECK(F.nlive_exports == 0 && F.double_release == 0, "destroy unexports once");
}

/* PyTorch's caching allocator: freed, and another allocation at the
 * same address. */
static void test_identity_change(void) {
  fake_reset();
  struct tutti_regcache* rc = make(2, 8);
  const struct tutti_reg_alloc old = fake_alloc(A1, 4 * MB, TUTTI_REG_KIND_CUMEM);
  struct tutti_reg_view v;
  CHECK_NCCL(tutti_regcache_lookup(rc, P(A1), MB, &v));
  void* old_handle = v.handle;
  const struct tutti_reg_alloc neu = fake_alloc(A1, 4 * MB, TUTTI_REG_KIND_CUMEM);
  CHECK(neu.id.buffer_id != old.id.buffer_id, "the fake gives a new buffer id");
  struct tutti_reg_view w;
  CHECK_NCCL(tutti_regcache_lookup(rc, P(A1), MB, &w));
  CHECK(w.reason == TUTTI_REG_IN_PLACE && w.handle != old_handle,
        "a new allocation at the same address must not get the old export");
  CHECK(w.alloc.id.buffer_id == neu.id.buffer_id, "the view names the new buffer");
  CHECK(F.exports == 2 && F.unexports == 1, "the stale export released: %d exports, %d unexports",
        F.exports, F.unexports);
  struct tutti_regcache_stats s;
  tutti_regcache_stats(rc, &s);
  CHECK(s.stale == 1 && s.entries == 1, "stale %llu entries %llu", (unsigned long long)s.stale,
        (unsigned long long)s.entries);
  /* The same address, a larger allocation, the same id would be a driver
   * bug; a different size alone still counts as another allocation. */
  pthread_mutex_lock(&F.mu);
  F.allocs[0].id.size = 8 * MB;
  pthread_mutex_unlock(&F.mu);
  CHECK_NCCL(tutti_regcache_lookup(rc, P(A1), MB, &v));
  CHECK(v.handle != w.handle || F.exports == 3, "a size change is another allocation");
  CHECK(F.exports == 3, "exported again after a size change: %d", F.exports);
  tutti_regcache_destroy(rc);
  CHECK(F.nlive_exports == 0 && F.double_release == 0, "every export released once");
}

/* A registered buffer freed under its registration: the next use at that
 * address gets the new allocation; the old registration holds a dead entry
 * whose export is gone, until it is deregistered. */
static void test_registered_then_freed(void) {
  fake_reset();
  struct tutti_regcache* rc = make(1, 8);
  fake_alloc(A1, 2 * MB, TUTTI_REG_KIND_MALLOC);
  struct tutti_reg_view r;
  CHECK_NCCL(tutti_regcache_register(rc, P(A1), 2 * MB, &r));
  fake_alloc(A1, 2 * MB, TUTTI_REG_KIND_MALLOC);
  struct tutti_reg_view v;
  CHECK_NCCL(tutti_regcache_lookup(rc, P(A1), MB, &v));
  CHECK(v.entry != r.entry && v.handle != r.handle, "the dead registration is never returned");
  CHECK(F.nlive_exports == 1, "only the new allocation is exported: %d", F.nlive_exports);
  tutti_regcache_deregister(rc, r.entry);
  CHECK(F.double_release == 0, "deregistering the dead entry releases nothing twice");
  struct tutti_regcache_stats s;
  tutti_regcache_stats(rc, &s);
  CHECK(s.entries == 1, "the dead entry is gone: %llu entries", (unsigned long long)s.entries);
  tutti_regcache_destroy(rc);
}

/* ncclMemAlloc fills ahead (the cache's hold), ncclMemFree forgets. */
static void test_forget(void) {
  fake_reset();
  struct tutti_regcache* rc = make(1, 8);
  fake_alloc(A1, 2 * MB, TUTTI_REG_KIND_CUMEM);
  struct tutti_reg_view u, r;
  CHECK_NCCL(tutti_regcache_lookup(rc, P(A1), MB, &u));
  CHECK_NCCL(tutti_regcache_register(rc, P(A1), MB, &r));
  tutti_regcache_forget(rc, P(A1));
  CHECK(F.nlive_exports == 0, "a freed allocation's export goes at once: %d", F.nlive_exports);
  struct tutti_reg_view v;
  CHECK_NCCL(tutti_regcache_lookup(rc, P(A1), MB, &v));
  CHECK(v.entry != r.entry && F.exports == 2, "the same allocation is a new entry after forget");
  tutti_regcache_deregister(rc, r.entry);
  struct tutti_regcache_stats s;
  tutti_regcache_stats(rc, &s);
  CHECK(s.entries == 1 && F.double_release == 0, "the dead registration went: %llu",
        (unsigned long long)s.entries);
  tutti_regcache_forget(rc, P(A2)); /* nothing there: nothing happens */
  tutti_regcache_destroy(rc);
  CHECK(F.nlive_exports == 0, "destroy releases the rest");
}

static void test_staged(void) {
  fake_reset();
  struct tutti_regcache* rc = make(1, 8);
  fake_alloc(A1, 2 * MB, TUTTI_REG_KIND_CUMEM);
  fake_alloc(A1 + 2 * MB, 2 * MB, TUTTI_REG_KIND_CUMEM); /* adjacent */
  fake_alloc(A2, MB, TUTTI_REG_KIND_MANAGED);
  fake_alloc(A2 + 4 * MB, MB, TUTTI_REG_KIND_HOST_PINNED);
  fake_alloc(A2 + 8 * MB, MB, TUTTI_REG_KIND_UNMAPPABLE);
  struct {
    uintptr_t at;
    size_t bytes;
    enum tutti_reg_reason want;
  } cases[] = {
      {A1 + MB, 2 * MB, TUTTI_REG_SPANS},      /* across the two allocations */
      {A1, 2 * MB + 1, TUTTI_REG_SPANS},       /* one byte past the first */
      {A1 + MB, MB, TUTTI_REG_IN_PLACE},       /* at an offset, inside */
      {A2, 64, TUTTI_REG_MANAGED},             /* managed */
      {A2 + 4 * MB, 64, TUTTI_REG_PINNED},     /* pinned host */
      {A2 + 8 * MB, 64, TUTTI_REG_UNMAPPABLE}, /* no handle */
      {0x7000000, 64, TUTTI_REG_NOT_CUDA},     /* pageable host */
      {A1, 0, TUTTI_REG_EMPTY},                /* nothing */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct tutti_reg_view v;
    CHECK_NCCL(tutti_regcache_lookup(rc, P(cases[i].at), cases[i].bytes, &v));
    CHECK(v.reason == cases[i].want, "case %zu: %s, not %s", i, tutti_regcache_reason(v.reason),
          tutti_regcache_reason(cases[i].want));
    CHECK((v.entry != NULL) == (cases[i].want == TUTTI_REG_IN_PLACE),
          "case %zu: an entry only in place", i);
  }
  CHECK(strstr(tutti_regcache_reason(TUTTI_REG_MANAGED), "managed") != NULL, "reason text");
  struct tutti_regcache_stats s;
  tutti_regcache_stats(rc, &s);
  CHECK(s.entries == 1 && F.exports == 1, "only the in-place case made an entry");
  /* The driver refusing to export stages, and leaves no entry. */
  F.fail_export = 1;
  struct tutti_reg_view v;
  CHECK_NCCL(tutti_regcache_register(rc, P(A1 + 2 * MB), MB, &v));
  CHECK(v.reason == TUTTI_REG_EXPORT && v.entry == NULL, "export refused: %s",
        tutti_regcache_reason(v.reason));
  tutti_regcache_stats(rc, &s);
  CHECK(s.entries == 1, "no entry for a refused export: %llu", (unsigned long long)s.entries);
  tutti_regcache_destroy(rc);
}

static void test_refcounts(void) {
  fake_reset();
  struct tutti_regcache* rc = make(1, 8);
  fake_alloc(A1, 2 * MB, TUTTI_REG_KIND_CUMEM);
  struct tutti_reg_view a, b;
  CHECK_NCCL(tutti_regcache_register(rc, P(A1), MB, &a));
  CHECK_NCCL(tutti_regcache_register(rc, P(A1 + MB), MB, &b));
  CHECK(a.entry == b.entry, "two registrations of one allocation share its entry");
  tutti_regcache_deregister(rc, a.entry);
  CHECK(F.nlive_exports == 1, "registered twice, deregistered once: still exported");
  tutti_regcache_deregister(rc, b.entry);
  CHECK(F.nlive_exports == 0 && F.unexports == 1, "the last deregistration releases it");
  /* First use, then register and deregister: deregistration lets go of
   * the cache's hold too. */
  struct tutti_reg_view u, r;
  CHECK_NCCL(tutti_regcache_lookup(rc, P(A1), MB, &u));
  CHECK_NCCL(tutti_regcache_register(rc, P(A1), MB, &r));
  tutti_regcache_deregister(rc, r.entry);
  CHECK(F.nlive_exports == 0, "deregistered: released although it was used");
  tutti_regcache_destroy(rc);
  CHECK(F.double_release == 0, "no double release");
}

static void test_eviction(void) {
  fake_reset();
  struct tutti_regcache* rc = make(1, 3);
  const uintptr_t base[5] = {A1, A1 + 4 * MB, A1 + 8 * MB, A1 + 12 * MB, A1 + 16 * MB};
  for (int i = 0; i < 5; i++) {
    fake_alloc(base[i], MB, TUTTI_REG_KIND_CUMEM);
  }
  struct tutti_reg_view v, held;
  CHECK_NCCL(tutti_regcache_register(rc, P(base[0]), MB, &held)); /* referenced: never evicted */
  CHECK_NCCL(tutti_regcache_lookup(rc, P(base[1]), MB, &v));
  CHECK_NCCL(tutti_regcache_lookup(rc, P(base[2]), MB, &v));
  CHECK_NCCL(tutti_regcache_lookup(rc, P(base[1]), MB, &v)); /* 1 used more recently than 2 */
  CHECK_NCCL(tutti_regcache_lookup(rc, P(base[3]), MB, &v)); /* evicts 2, the LRU */
  struct tutti_regcache_stats s;
  tutti_regcache_stats(rc, &s);
  CHECK(s.entries == 3 && s.evictions == 1, "entries %llu evictions %llu",
        (unsigned long long)s.entries, (unsigned long long)s.evictions);
  const int exports = F.exports;
  CHECK_NCCL(tutti_regcache_lookup(rc, P(base[1]), MB, &v));
  CHECK(F.exports == exports, "entry 1 survived (no new export)");
  CHECK_NCCL(tutti_regcache_lookup(rc, P(base[0]), MB, &v));
  CHECK(F.exports == exports && v.entry == held.entry, "the registered entry survived");
  CHECK_NCCL(tutti_regcache_lookup(rc, P(base[2]), MB, &v));
  CHECK(F.exports == exports + 1, "entry 2 was the one evicted: exported again");
  /* Every entry referenced: a further allocation is staged, not forced in. */
  struct tutti_reg_view r1, r2;
  CHECK_NCCL(tutti_regcache_register(rc, P(base[1]), MB, &r1));
  CHECK_NCCL(tutti_regcache_register(rc, P(base[2]), MB, &r2));
  CHECK_NCCL(tutti_regcache_lookup(rc, P(base[4]), MB, &v));
  CHECK(v.reason == TUTTI_REG_FULL, "full of references: %s", tutti_regcache_reason(v.reason));
  tutti_regcache_stats(rc, &s);
  CHECK(s.entries == 3, "the bound holds: %llu", (unsigned long long)s.entries);
  tutti_regcache_destroy(rc);
  CHECK(F.nlive_exports == 0 && F.double_release == 0, "destroy releases all, once");
}

static void test_graph_hold(void) {
  fake_reset();
  struct tutti_regcache* rc = make(1, 2);
  fake_alloc(A1, MB, TUTTI_REG_KIND_CUMEM);
  fake_alloc(A2, MB, TUTTI_REG_KIND_CUMEM);
  fake_alloc(A2 + 4 * MB, MB, TUTTI_REG_KIND_CUMEM);
  struct tutti_reg_view r;
  CHECK_NCCL(tutti_regcache_register(rc, P(A1), MB, &r));
  tutti_regcache_graph_hold(rc, r.entry, 1);
  tutti_regcache_deregister(rc, r.entry);
  CHECK(F.nlive_exports == 1, "a captured graph keeps a deregistered buffer exported");
  struct tutti_reg_view v;
  CHECK_NCCL(tutti_regcache_lookup(rc, P(A2), MB, &v));
  CHECK_NCCL(tutti_regcache_lookup(rc, P(A2 + 4 * MB), MB, &v)); /* bound 2: must evict A2 */
  CHECK(F.nlive_exports == 2, "eviction skips the graph's entry: %d live", F.nlive_exports);
  tutti_regcache_suspend(rc);
  CHECK(F.nlive_exports == 1, "suspend keeps the graph's entry only: %d live", F.nlive_exports);
  tutti_regcache_graph_hold(rc, r.entry, -1);
  CHECK(F.nlive_exports == 0, "released when the graph goes");
  struct tutti_regcache_stats s;
  tutti_regcache_stats(rc, &s);
  CHECK(s.entries == 0, "no entry left: %llu", (unsigned long long)s.entries);
  tutti_regcache_destroy(rc);
  CHECK(F.double_release == 0, "no double release");
}

static void test_suspend_registered(void) {
  fake_reset();
  struct tutti_regcache* rc = make(1, 4);
  fake_alloc(A1, MB, TUTTI_REG_KIND_CUMEM);
  struct tutti_reg_view r, v;
  CHECK_NCCL(tutti_regcache_register(rc, P(A1), MB, &r));
  tutti_regcache_suspend(rc);
  CHECK(F.nlive_exports == 0, "suspend releases a registered buffer's export");
  CHECK_NCCL(tutti_regcache_lookup(rc, P(A1), MB, &v));
  CHECK(v.entry == r.entry && F.nlive_exports == 1, "the registration stays; exported again");
  tutti_regcache_deregister(rc, r.entry);
  CHECK(F.nlive_exports == 0, "and released at deregistration");
  tutti_regcache_destroy(rc);
}

static void test_imports(void) {
  fake_reset();
  struct tutti_regcache* rc = make(3, 2);
  struct tutti_reg_alloc a = {{7, A1, 2 * MB}, TUTTI_REG_KIND_CUMEM};
  void *m1 = NULL, *m2 = NULL, *m3 = NULL;
  CHECK_NCCL(tutti_regcache_import(rc, 1, &a, "fd", 2, &m1));
  CHECK_NCCL(tutti_regcache_import(rc, 1, &a, "fd", 2, &m2));
  CHECK(m1 != NULL && m1 == m2 && F.imports == 1, "the same identity is mapped once");
  CHECK_NCCL(tutti_regcache_import(rc, 2, &a, "fd", 2, &m3));
  CHECK(m3 != m1 && F.imports == 2, "another peer's allocation is another import");
  /* The peer freed and allocated again at the same base. */
  struct tutti_reg_alloc b = {{8, A1, 2 * MB}, TUTTI_REG_KIND_CUMEM};
  void* mb = NULL;
  CHECK_NCCL(tutti_regcache_import(rc, 1, &b, "fd", 2, &mb));
  CHECK(mb != m1 && F.imports == 3 && F.unmaps == 1, "a new identity unmaps the old import");
  struct tutti_regcache_stats s;
  tutti_regcache_stats(rc, &s);
  CHECK(s.imports == 2 && s.import_bytes == 4 * MB, "imports %llu bytes %llu",
        (unsigned long long)s.imports, (unsigned long long)s.import_bytes);
  /* Bound 2 per peer: a third unreferenced-LRU eviction, then full. */
  struct tutti_reg_alloc c = {{9, A2, MB}, TUTTI_REG_KIND_CUMEM};
  struct tutti_reg_alloc d = {{10, A2 + 4 * MB, MB}, TUTTI_REG_KIND_CUMEM};
  void* mx = NULL;
  CHECK_NCCL(tutti_regcache_import(rc, 1, &c, "fd", 2, &mx));
  CHECK_NCCL(tutti_regcache_import(rc, 1, &d, "fd", 2, &mx));
  CHECK(mx == NULL, "every import of the peer referenced: staged (NULL)");
  tutti_regcache_import_put(rc, 1, &b.id);
  CHECK_NCCL(tutti_regcache_import(rc, 1, &d, "fd", 2, &mx));
  CHECK(mx != NULL && F.unmaps == 2, "an unreferenced import is evicted: %d unmaps", F.unmaps);
  tutti_regcache_import_drop(rc, 1, &c.id);
  CHECK(F.unmaps == 3, "a peer's deregistration unmaps whatever holds it");
  tutti_regcache_peer_gone(rc, 1);
  CHECK(F.unmaps == 4, "peer death unmaps its imports: %d", F.unmaps);
  tutti_regcache_stats(rc, &s);
  CHECK(s.imports == 1, "peer 2's import stays: %llu", (unsigned long long)s.imports);
  tutti_regcache_destroy(rc);
  CHECK(F.unmaps == 5 && F.imports == 5, "destroy unmaps the rest: %d of %d", F.unmaps, F.imports);
}

/* ---- threads ---- */

struct hammer {
  struct tutti_regcache* rc;
  int idx;
  int bad;
};

static void* hammer_main(void* arg) {
  struct hammer* h = arg;
  uint64_t s = 0x9e3779b97f4a7c15ull * (uint64_t)(h->idx + 1);
  for (int it = 0; it < 4000; it++) {
    const uintptr_t base = A1 + (test_xorshift(&s) % 8) * 4 * MB;
    struct tutti_reg_view v;
    const int op = (int)(test_xorshift(&s) % 4);
    if (op == 0 && h->idx == 0) {
      fake_alloc(base, 4 * MB, TUTTI_REG_KIND_CUMEM); /* free and allocate again */
      continue;
    }
    if (op == 1) {
      if (tutti_regcache_register(h->rc, P(base + 64), 1024, &v) != ncclSuccess) {
        h->bad++;
      }
      tutti_regcache_graph_hold(h->rc, v.entry, 1);
      tutti_regcache_graph_hold(h->rc, v.entry, -1);
      tutti_regcache_deregister(h->rc, v.entry);
      continue;
    }
    if (op == 2) {
      struct tutti_reg_alloc a = {{(uint64_t)it, base, MB}, TUTTI_REG_KIND_CUMEM};
      void* m = NULL;
      if (tutti_regcache_import(h->rc, h->idx % 2, &a, NULL, 0, &m) != ncclSuccess) {
        h->bad++;
      }
      tutti_regcache_import_put(h->rc, h->idx % 2, &a.id);
      continue;
    }
    if (tutti_regcache_lookup(h->rc, P(base + 128), 512, &v) != ncclSuccess) {
      h->bad++;
    }
    /* An in-place answer carries the export of the very allocation it
     * names (the fake's handle encodes the buffer id): never a stale one. */
    if (v.reason == TUTTI_REG_IN_PLACE &&
        (v.alloc.id.base != base || (uintptr_t)v.handle != v.alloc.id.buffer_id * 16 + 1)) {
      h->bad++;
    }
    if (v.reason != TUTTI_REG_IN_PLACE && v.reason != TUTTI_REG_FULL) {
      h->bad++;
    }
  }
  return NULL;
}

static void test_threads(void) {
  fake_reset();
  for (int i = 0; i < 8; i++) {
    fake_alloc(A1 + (uintptr_t)i * 4 * MB, 4 * MB, TUTTI_REG_KIND_CUMEM);
  }
  struct tutti_regcache* rc = make(2, 5);
  enum { N = 4 };
  pthread_t t[N];
  struct hammer h[N];
  for (int i = 0; i < N; i++) {
    h[i] = (struct hammer){rc, i, 0};
    CHECK(pthread_create(&t[i], NULL, hammer_main, &h[i]) == 0, "thread %d", i);
  }
  for (int i = 0; i < N; i++) {
    pthread_join(t[i], NULL);
    CHECK(h[i].bad == 0, "thread %d saw %d wrong answers", i, h[i].bad);
  }
  struct tutti_regcache_stats s;
  tutti_regcache_stats(rc, &s);
  CHECK(s.entries <= 5, "the bound holds under threads: %llu", (unsigned long long)s.entries);
  CHECK(s.hits + s.misses > 0, "the threads did look things up");
  tutti_regcache_destroy(rc);
  CHECK(F.nlive_exports == 0 && F.double_release == 0, "every export released once (%d live)",
        F.nlive_exports);
  CHECK(F.imports == F.unmaps, "every import unmapped: %d of %d", F.unmaps, F.imports);
}

int main(void) {
  pthread_mutex_init(&F.mu, NULL);
  struct tutti_regcache* rc = NULL;
  struct tutti_regcache_driver bad = DRV;
  bad.unmap = NULL;
  CHECK(tutti_regcache_create(&bad, 1, 4, &rc) != ncclSuccess && rc == NULL,
        "an incomplete driver table is refused");
  test_hit_miss();
  test_identity_change();
  test_registered_then_freed();
  test_forget();
  test_staged();
  test_refcounts();
  test_eviction();
  test_graph_hold();
  test_suspend_registered();
  test_imports();
  test_threads();
  return test_summary("regcache");
}
