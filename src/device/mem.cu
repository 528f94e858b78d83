/* What a device communicator holds in GPU memory and pinned host memory,
 * allocation by allocation, counted as cudaMemGetInfo and the system see it:
 * ncclCommMemStats reports it, NCCL_DEBUG_SUBSYS=ALLOC logs it at init. */
#include <stdio.h>

#include "device/dev_comm.h"
#include "device/rma/rma.h"
#include "device/net/devnet.h"
#include "device/net/link.h"

extern "C" {
#include "util/check.h"
#include "util/log.h"
}

#define PAGE_2M ((uint64_t)2 << 20)
#define PAGE_4K ((uint64_t)4096)

static uint64_t round_up(uint64_t v, uint64_t to) {
  return (v + to - 1) / to * to;
}

/* One allocation: where, how many bytes, whether a suspend gives it back. */
struct td_mem_item {
  const char* what;
  uint64_t bytes;
  int host;
  int keep;
};

/* A cuMem region is its mapped size (a multiple of the granularity) and is
 * given back; cudaMalloc's come in 2 MiB pages and are given back too
 * (their addresses change) unless a captured graph holds them (`held`). */
static struct td_mem_item region_item(const char* what, const struct td_region* r, int held) {
  struct td_mem_item it = {what, 0, 0, 0};
  if (r->kind == TD_REGION_CUMEM) {
    it.bytes = r->size;
  } else if (r->kind == TD_REGION_MALLOC) {
    it.bytes = round_up(r->size, PAGE_2M);
    it.keep = held;
  }
  return it;
}

/* Every allocation of `dc` into out[] (at most `max`); returns how many. */
static int mem_items(const struct tutti_dev_comm* dc, struct td_mem_item* out, int max) {
  int k = 0;
  /* What this rank knows of graphs (a suspend asks every rank's). */
  const int held = dc->keep_malloc || td_graphs_hold_regions(dc);
  if (!dc->host_mode && k < max) {
    out[k++] = region_item("queues and inboxes (GPU)", &dc->own, held);
  }
  if (k < max) {
    out[k++] = region_item("counters and device communicator (GPU)", &dc->pvt, held);
  }
  if (dc->scratch_cap > 0 && k < max) {
    /* A graph captured with it replays with its address. */
    out[k++] = {"scratch (GPU)", round_up(dc->scratch_cap, PAGE_2M), 0, dc->scratch_in_graph};
  }
  if (dc->retired_bytes > 0 && k < max) {
    out[k++] = {"scratch held by graphs (GPU)", round_up(dc->retired_bytes, PAGE_2M), 0, 1};
  }
  if (k < max) {
    out[k++] = {"flags (pinned host)", PAGE_4K, 1, 1};
  }
  if (dc->host_mode && dc->hosts != NULL && dc->hosts[dc->rank].host != NULL && k < max) {
    out[k++] = {"queues (pinned host, shared)", round_up(dc->hosts[dc->rank].bytes, PAGE_4K), 1, 0};
  }
  const struct td_rma* r = dc->rma;
  if (r != NULL && k + 1 < max) {
    /* One-sided operations: two allocations of counters in cudaMalloc's pages
     * (kept: peers map them), pinned staging and the landing. */
    const uint64_t ctrs = (uint64_t)r->nctx * (uint64_t)r->nsig * (uint64_t)r->nranks * 8;
    out[k++] = {"one-sided signal counters (GPU)", 2 * round_up(ctrs, PAGE_2M), 0, 1};
    const uint64_t pinned = round_up(ctrs, PAGE_4K) + PAGE_4K +
                            (uint64_t)r->nstages * TD_RMA_STAGE_BYTES + td_land_bytes(&r->land);
    out[k++] = {"one-sided staging and counters (pinned host)", pinned, 1, 1};
  }
  const struct td_net* nt = dc->netp;
  if (nt != NULL && nt->nlinks > 0 && k < max) {
    const uint64_t one =
        dc->lay.total + (TD_NET_CTL_SENDS + TD_NET_CTL_RECVS) * sizeof(struct td_ctl);
    out[k++] = {"network peers' shadows (pinned host)",
                round_up(one, PAGE_4K) * (uint64_t)nt->nlinks, 1, 0};
  }
  return k;
}

extern "C" void tutti_dev_comm_mem(struct tutti_dev_comm* dc, struct tutti_dev_mem* m) {
  *m = {0, 0, 0, 0};
  if (dc == NULL) {
    return;
  }
  if (dc->suspended) {
    *m = dc->held;
    return;
  }
  struct td_mem_item it[10];
  const int k = mem_items(dc, it, 10);
  for (int i = 0; i < k; i++) {
    uint64_t* into = it[i].host ? (it[i].keep ? &m->host_persist : &m->host_suspend)
                                : (it[i].keep ? &m->dev_persist : &m->dev_suspend);
    *into += it[i].bytes;
  }
}

void td_mem_log(struct tutti_dev_comm* dc) {
  if (!tutti_log_wants(TUTTI_LOG_INFO, TUTTI_ALLOC)) {
    return;
  }
  struct td_mem_item it[10];
  const int k = mem_items(dc, it, 10);
  for (int i = 0; i < k; i++) {
    INFO(TUTTI_ALLOC, "rank %d: %s: %.2f MiB, %s", dc->rank, it[i].what,
         (double)it[i].bytes / (1 << 20),
         it[i].keep ? "kept while suspended" : "given back by a suspend");
  }
  struct tutti_dev_mem m;
  tutti_dev_comm_mem(dc, &m);
  INFO(TUTTI_ALLOC,
       "rank %d: GPU %d memory %.2f MiB (%.2f MiB given back by ncclCommSuspend), pinned host "
       "memory %.2f MiB (%.2f MiB given back)",
       dc->rank, dc->dev, (double)(m.dev_suspend + m.dev_persist) / (1 << 20),
       (double)m.dev_suspend / (1 << 20), (double)(m.host_suspend + m.host_persist) / (1 << 20),
       (double)m.host_suspend / (1 << 20));
}
