/* The registration cache: which allocations of this rank its peers may map,
 * and what this rank mapped of its peers' allocations, keyed by the
 * allocation's identity (CU_POINTER_ATTRIBUTE_BUFFER_ID, base, size), so
 * that an address reused by a new allocation never reaches a stale mapping.
 *
 * Plain C with no CUDA call inside: the driver is a table of functions
 * (device/peer/regdrv.cu over CUDA; a unit test's fake), so the identity
 * rules, reference counts and eviction are tested on the CPU. One mutex
 * guards a cache; every function may be called from any thread. */
#ifndef TUTTI_DEVICE_PEER_REGCACHE_H
#define TUTTI_DEVICE_PEER_REGCACHE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "nccl.h"

/* What kind of memory holds a pointer: only the first two are mapped by
 * peers; the others are staged. */
enum tutti_reg_kind {
  TUTTI_REG_KIND_CUMEM = 1,       /* cuMemCreate (VMM): exported as a POSIX fd */
  TUTTI_REG_KIND_MALLOC = 2,      /* cudaMalloc: a CUDA IPC handle of its base */
  TUTTI_REG_KIND_MANAGED = 3,     /* cudaMallocManaged: pages move, no IPC */
  TUTTI_REG_KIND_HOST_PINNED = 4, /* cudaHostAlloc / registered host memory */
  TUTTI_REG_KIND_HOST = 5,        /* pageable host memory, unknown to CUDA */
  TUTTI_REG_KIND_UNMAPPABLE = 6,  /* device memory with no handle a peer can import */
};

/* An allocation as the driver names it. Two allocations are the same only
 * when all three of buffer_id, base and size are. */
struct tutti_reg_ident {
  uint64_t buffer_id; /* CU_POINTER_ATTRIBUTE_BUFFER_ID: unique for the process's life */
  uintptr_t base;     /* CU_POINTER_ATTRIBUTE_RANGE_START */
  size_t size;        /* CU_POINTER_ATTRIBUTE_RANGE_SIZE */
};

struct tutti_reg_alloc {
  struct tutti_reg_ident id;
  int kind; /* enum tutti_reg_kind */
};

/* Why a range takes the staged path (TUTTI_REG_IN_PLACE: it does not). */
enum tutti_reg_reason {
  TUTTI_REG_IN_PLACE = 0,
  TUTTI_REG_OFF,        /* NCCL_LOCAL_REGISTER=0 */
  TUTTI_REG_NOT_CUDA,   /* host memory CUDA does not know */
  TUTTI_REG_MANAGED,    /* managed memory */
  TUTTI_REG_PINNED,     /* pinned host memory */
  TUTTI_REG_UNMAPPABLE, /* no handle a peer can import */
  TUTTI_REG_SPANS,      /* the range leaves its allocation (two allocations) */
  TUTTI_REG_EXPORT,     /* the driver refused to export the allocation */
  TUTTI_REG_FULL,       /* every entry is referenced: nothing to evict */
  TUTTI_REG_EMPTY,      /* zero bytes: nothing to map */
};
/* The reason in words, for the log ("managed memory"). */
const char* tutti_regcache_reason(enum tutti_reg_reason r);

/* The driver. Every function returns 0 on success, else non-zero. */
struct tutti_regcache_driver {
  void* ctx;
  /* The allocation holding `ptr`. Host memory CUDA does not know is
   * success with kind TUTTI_REG_KIND_HOST; non-zero only on a driver error. */
  int (*query)(void* ctx, const void* ptr, struct tutti_reg_alloc* out);
  /* Makes `a` importable by peers: *handle is the driver's (an fd, an IPC
   * handle), released with unexport. */
  int (*export_alloc)(void* ctx, const struct tutti_reg_alloc* a, void** handle);
  void (*unexport)(void* ctx, void* handle);
  /* Maps peer `peer`'s allocation `a` from what the peer sent (`blob`):
   * *mapped is where this rank reaches a->id.base, *token what unmap
   * takes back. */
  int (*import_alloc)(void* ctx, int peer, const struct tutti_reg_alloc* a, const void* blob,
                      size_t blob_len, void** mapped, void** token);
  void (*unmap)(void* ctx, int peer, void* token);
};

struct tutti_regcache;
struct tutti_reg_entry;

/* A cache over `drv` (copied) holding at most `max_entries` local entries
 * and as many imports per peer of `npeers`; unreferenced entries beyond
 * that are evicted, least recently used first. */
ncclResult_t tutti_regcache_create(const struct tutti_regcache_driver* drv, int npeers,
                                   int max_entries, struct tutti_regcache** out);
/* Releases every export and every import, whatever holds them. */
void tutti_regcache_destroy(struct tutti_regcache* rc);

/* What a lookup or a registration found for (ptr, bytes). */
struct tutti_reg_view {
  enum tutti_reg_reason reason;  /* TUTTI_REG_IN_PLACE, or why staged */
  struct tutti_reg_alloc alloc;  /* the allocation (kind 0 when the driver failed) */
  size_t offset;                 /* of ptr inside the allocation */
  void* handle;                  /* the driver's export, when in place */
  struct tutti_reg_entry* entry; /* when in place: for deregister / graph pins */
};

/* ncclCommRegister, ncclMemAlloc, a window: takes a reference on the entry
 * of the allocation holding (ptr, bytes), made (and exported) if needed.
 * *v says whether it can run in place; a staged range holds no reference
 * (v->entry NULL). Fails only when the driver does. */
ncclResult_t tutti_regcache_register(struct tutti_regcache* rc, const void* ptr, size_t bytes,
                                     struct tutti_reg_view* v);
/* Drops a reference register took; the last one (no graph holding it)
 * releases the export. */
void tutti_regcache_deregister(struct tutti_regcache* rc, struct tutti_reg_entry* e);
/* A call's buffer: the entry covering (ptr, bytes) only if the allocation
 * there is still the one the entry was made for; an entry at that address
 * of another allocation (freed, allocated again) is dropped first. A miss
 * makes an entry the cache holds until evicted (first use). */
ncclResult_t tutti_regcache_lookup(struct tutti_regcache* rc, const void* ptr, size_t bytes,
                                   struct tutti_reg_view* v);
/* ncclMemFree: the allocation at `base` is going. Its entry is never
 * found again and the cache lets go of it; registrations still holding it
 * keep a dead entry until they deregister. */
void tutti_regcache_forget(struct tutti_regcache* rc, const void* base);
/* A captured graph holds (+1) or lets go of (-1) an entry: while held,
 * neither deregistration nor eviction releases its export. */
void tutti_regcache_graph_hold(struct tutti_regcache* rc, struct tutti_reg_entry* e, int delta);

/* Peer side: maps peer `peer`'s allocation `a` (with the blob the peer
 * sent), or finds it already mapped under the same identity, and takes a
 * reference; an import of another allocation at that base is unmapped
 * first. *mapped: the local address of a->id.base. */
ncclResult_t tutti_regcache_import(struct tutti_regcache* rc, int peer,
                                   const struct tutti_reg_alloc* a, const void* blob,
                                   size_t blob_len, void** mapped);
/* Drops an import's reference; unreferenced imports stay mapped until
 * evicted, released or their peer's next identity at that base. */
void tutti_regcache_import_put(struct tutti_regcache* rc, int peer,
                               const struct tutti_reg_ident* id);
/* The peer deregistered (or freed) `id`: unmapped now, whatever holds it. */
void tutti_regcache_import_drop(struct tutti_regcache* rc, int peer,
                                const struct tutti_reg_ident* id);
/* Peer death: every import of `peer` unmapped. */
void tutti_regcache_peer_gone(struct tutti_regcache* rc, int peer);
/* ncclCommSuspend: every import unmapped, every entry only the cache holds
 * evicted; registered entries keep their reference and are exported again
 * at their next use. Entries a graph holds stay as they are. */
void tutti_regcache_suspend(struct tutti_regcache* rc);

struct tutti_regcache_stats {
  uint64_t entries;      /* local entries, referenced or cached */
  uint64_t exported;     /* of them, exported now */
  uint64_t export_bytes; /* their allocations' bytes */
  uint64_t imports;      /* peers' allocations mapped here */
  uint64_t import_bytes; /* mapped peer memory (the peers' own, not this rank's) */
  uint64_t hits, misses, stale, evictions;
};
void tutti_regcache_stats(struct tutti_regcache* rc, struct tutti_regcache_stats* s);

#ifdef __cplusplus
}
#endif

#endif
