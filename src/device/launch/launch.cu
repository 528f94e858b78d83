/* From plans to one kernel launch: operations, lanes and steps are
 * flattened into the kernel's parameters; every lane of every operation runs
 * on each of the channels its plan gives (tune/device.c) as one block; each
 * block gets its turn on the connections it uses, in the order the
 * operations were issued (the order peers issued the matching ones), as the
 * host executor's tickets. Also what a communicator offers a launch, for
 * tune to plan with. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "device/dev_comm.h"
#include "device/launch/ce.h"
#include "device/net/devnet.h"
#include "device/kernels/mapped.h"
#include "device/kernels/kernel.h"

extern "C" {
#include "algo/pattern.h"
#include "util/check.h"
}

/* Blocks one launch's parameters describe. */
static int launch_ctas(void) {
  return (int)(sizeof(((td_work_large*)0)->ctas) / sizeof(struct td_cta));
}

extern "C" void tutti_dev_comm_caps(struct tutti_dev_comm* dc, cudaStream_t stream,
                                    struct tutti_dev_caps* c) {
  memset(c, 0, sizeof *c); /* tune caches plans by these bytes */
  tutti_dev_limits(&c->lim);
  for (int k = 0; k < TUTTI_COLL_COUNT; k++) {
    c->colls |= td_dcoll(k) >= 0 ? 1u << k : 0;
  }
  c->one_process = 1;
  for (int p = 0; p < dc->nranks; p++) {
    c->one_process &= dc->mapped[p].kind == TD_REGION_NONE;
  }
  c->net = dc->net;
  c->channels = dc->nch;
  c->threads = dc->nthreads;
  c->ctas = dc->max_ctas;
  c->mapped_ctas = dc->mapped_ctas;
  c->mapped_chan_bytes = dc->lay.chan_bytes;
  c->ll128_chan_bytes = dc->lay.ll128_chan_bytes;
  c->ce_slot_bytes = dc->lay.ce_slot_bytes;
  /* What this communicator's layout holds (layout.cu fits it to its budget). */
  c->all_channels = (int)dc->lay.all_nch;
  c->lim.loop_channels = (int)dc->lay.loop_nch;
  c->lim.mapped_channels = dc->lay.mapped_nch > 0 ? (int)dc->lay.mapped_nch : 1;
  c->lim.mapped_ll_channels = dc->lay.ll_nch > 0 ? (int)dc->lay.ll_nch : 1;
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &cs) != cudaSuccess) {
    (void)cudaGetLastError(); /* the launch's ordering asks again and says why */
    cs = cudaStreamCaptureStatusNone;
  }
  c->capturing = cs == cudaStreamCaptureStatusActive;
  /* Copy-engine copies name peers' regions: a graph would keep addresses
   * of cudaMalloc regions, which a suspend changes (kernels find regions
   * through d_comm, whose address stays). */
  if (c->capturing && dc->own.kind == TD_REGION_MALLOC) {
    c->ce_slot_bytes = 0;
  }
}

struct td_counts {
  int ops, lanes, steps, ctas, tickets;
};

/* The connections lane `l` of `s` uses (conn = dir * n + peer), each once. */
static int lane_conns(const struct tutti_schedule* s, int l, int n, uint16_t* conns, int cap) {
  int k = 0;
  const struct tutti_lane* ln = &s->lanes[l];
  for (int j = 0; j < ln->nsteps; j++) {
    const struct tutti_step* st = &s->steps[ln->first_step + j];
    int cs[2] = {st->send_peer >= 0 ? st->send_peer : -1,
                 st->recv_peer >= 0 ? n + st->recv_peer : -1};
    for (int d = 0; d < 2; d++) {
      int dup = cs[d] < 0;
      for (int i = 0; i < k && !dup; i++) {
        dup = conns[i] == cs[d];
      }
      if (!dup && k < cap) {
        conns[k++] = (uint16_t)cs[d];
      } else if (!dup) {
        return -1;
      }
    }
  }
  return k;
}

template <class W>
static int fits(const struct td_counts& c) {
  W* w = NULL;
  return c.ops <= (int)(sizeof w->ops / sizeof w->ops[0]) &&
         c.lanes <= (int)(sizeof w->lanes / sizeof w->lanes[0]) &&
         c.steps <= (int)(sizeof w->steps / sizeof w->steps[0]) &&
         c.ctas <= (int)(sizeof w->ctas / sizeof w->ctas[0]) &&
         c.tickets <= (int)(sizeof w->tickets / sizeof w->tickets[0]);
}

template <class W>
static void fill(W* w, struct tutti_dev_comm* dc, const struct tutti_dev_op* ops, int nops,
                 const int* nch, uint16_t* turns) {
  const int n = dc->nranks;
  memset(turns, 0, (size_t)TD_MAX_CHANNELS * 2 * (size_t)n * sizeof *turns);
  w->comm = dc->d_comm;
  w->ncta = 0;
  w->nlanes = 0;
  w->slot_bytes = (uint32_t)dc->slot_bytes;
  w->chunk_bytes = (uint32_t)(dc->slot_bytes * TD_SLOTS / 2);
  w->nch = 0;
  w->tag = ops[0].ras_op;
  int nsteps = 0, ntickets = 0;
  for (int i = 0; i < nops; i++) {
    const struct tutti_dev_op* o = &ops[i];
    const struct tutti_schedule* s = o->sched;
    struct td_op* wo = &w->ops[i];
    for (int b = 0; b < 4; b++) {
      wo->bufs[b] = b == TUTTI_BUF_SCRATCH ? dc->scratch : o->bufs[b];
    }
    wo->scalar_dev = o->scalar_dev;
    wo->scalar_bits = o->redop.scalar.u64;
    wo->divisor = o->redop.divisor ? o->redop.divisor : 1;
    wo->type = (uint8_t)o->redop.type;
    wo->kind = (uint8_t)o->redop.kind;
    wo->elem_size = (uint8_t)o->args->elem_size;
    wo->nch = (uint8_t)nch[i];
    w->nch = (uint32_t)nch[i] > w->nch ? (uint32_t)nch[i] : w->nch;
    wo->ll = (uint8_t)(o->plan->proto == TUTTI_PROTO_LL);
    const int lane_base = (int)w->nlanes;
    for (int l = 0; l < s->nlanes; l++) {
      struct td_lane* wl = &w->lanes[lane_base + l];
      wl->op = (uint16_t)i;
      wl->first_step = (uint16_t)(nsteps + s->lanes[l].first_step);
      wl->nsteps = (uint16_t)s->lanes[l].nsteps;
      wl->done_idx = (uint16_t)(lane_base + l);
    }
    for (int j = 0; j < s->nsteps; j++) {
      const struct tutti_step* st = &s->steps[j];
      struct td_step* ws = &w->steps[nsteps + j];
      memset(ws, 0, sizeof *ws);
      ws->kind = st->kind;
      ws->flags = st->flags;
      ws->src_buf = st->src_buf;
      ws->dst_buf = st->dst_buf;
      ws->send_peer = (int16_t)st->send_peer;
      ws->recv_peer = (int16_t)st->recv_peer;
      ws->wait_lane = (int16_t)(st->wait_lane >= 0 ? lane_base + st->wait_lane : -1);
      ws->src_off = st->src_off;
      ws->dst_off = st->dst_off;
      ws->bytes = st->bytes;
    }
    nsteps += s->nsteps;
    w->nlanes += (uint32_t)s->nlanes;
    for (int c = 0; c < nch[i]; c++) {
      for (int l = 0; l < s->nlanes; l++) {
        uint16_t conns[TD_CTA_TICKETS];
        int k = lane_conns(s, l, n, conns, TD_CTA_TICKETS);
        struct td_cta* cta = &w->ctas[w->ncta++];
        cta->lane = (uint16_t)(lane_base + l);
        cta->channel = (uint8_t)c;
        cta->nticket = (uint8_t)k;
        cta->first_ticket = (uint16_t)ntickets;
        for (int t = 0; t < k; t++) {
          w->tickets[ntickets].conn = conns[t];
          w->tickets[ntickets].turn = turns[(size_t)c * 2 * (size_t)n + conns[t]]++;
          ntickets++;
        }
      }
    }
  }
  /* Sole: no lane waits for another, and each connection of each channel
   * has one block; the kernel then skips the hand-over between blocks. */
  int sole = 1;
  for (int j = 0; j < nsteps && sole; j++) {
    sole = w->steps[j].kind != TUTTI_STEP_WAIT_LANE;
  }
  for (uint32_t c = 0; c < w->ncta && sole; c++) {
    const struct td_cta* cta = &w->ctas[c];
    for (int t = 0; t < cta->nticket && sole; t++) {
      const uint16_t conn = w->tickets[cta->first_ticket + t].conn;
      sole = turns[(size_t)cta->channel * 2 * (size_t)n + conn] == 1;
    }
  }
  w->flags = sole ? TD_SOLE : 0;
}

static ncclResult_t cuda_fail(cudaError_t e, const char* what) {
  return tutti_error(ncclUnhandledCudaError, "%s failed: %s (%s)", what, cudaGetErrorString(e),
                     cudaGetErrorName(e));
}

static ncclResult_t ensure_scratch(struct tutti_dev_comm* dc, size_t bytes, cudaStream_t stream) {
  if (bytes <= dc->scratch_cap) {
    return ncclSuccess;
  }
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  cudaStreamIsCapturing(stream, &cs);
  if (cs != cudaStreamCaptureStatusNone) {
    return tutti_error(ncclInvalidUsage,
                       "this collective needs %zu bytes of device scratch, which cannot be "
                       "allocated while the stream is captured: run it once before capturing",
                       bytes);
  }
  /* Stream-ordered, after the last launch that used the old buffer: a
   * device-wide wait (cudaFree) would stall on the kernels of other ranks
   * of this process on the same GPU, which wait for the launch being made. */
  cudaError_t e = dc->scratch_ev == NULL
                      ? cudaEventCreateWithFlags(&dc->scratch_ev, cudaEventDisableTiming)
                      : cudaSuccess;
  if (e == cudaSuccess && dc->scratch != NULL && dc->scratch_in_graph) {
    /* A captured graph replays with this address: keep it to the end. */
    void** r = (void**)realloc(dc->retired, (size_t)(dc->nretired + 1) * sizeof *r);
    if (r == NULL) {
      return tutti_error(ncclSystemError, "out of host memory");
    }
    dc->retired = r;
    dc->retired[dc->nretired++] = dc->scratch;
    dc->retired_bytes += dc->scratch_cap;
  } else if (e == cudaSuccess && dc->scratch != NULL) {
    e = cudaStreamWaitEvent(stream, dc->scratch_ev, 0);
    e = e == cudaSuccess ? cudaFreeAsync(dc->scratch, stream) : e;
    if (e == cudaErrorNotSupported) {
      e = cudaFree(dc->scratch); /* no memory pools on this device */
    }
  }
  dc->scratch = NULL;
  dc->scratch_cap = 0;
  dc->scratch_in_graph = 0;
  if (e == cudaSuccess) {
    e = cudaMallocAsync(&dc->scratch, bytes, stream);
    e = e == cudaErrorNotSupported ? cudaMalloc(&dc->scratch, bytes) : e;
  }
  if (e != cudaSuccess) {
    return cuda_fail(e, "allocating device scratch");
  }
  dc->scratch_cap = bytes;
  return ncclSuccess;
}

/* Whether every connection of `op` on `nch` channels has a queue (work.h):
 * to itself on the first loop_nch channels, with any peer on the
 * first all_nch, beyond them with the ring's neighbours only. The caps of
 * tune's channels (tune/device.c) keep every schedule within this; one that
 * is not is a bug. */
static ncclResult_t check_queues(const struct tutti_dev_comm* dc, const struct tutti_dev_op* op,
                                 int nch) {
  const int n = dc->nranks, me = dc->rank;
  if ((uint64_t)nch <= dc->lay.loop_nch && (uint64_t)nch <= dc->lay.all_nch) {
    return ncclSuccess;
  }
  const struct tutti_schedule* s = op->sched;
  for (int j = 0; j < s->nsteps; j++) {
    const int sp = s->steps[j].send_peer, rp = s->steps[j].recv_peer;
    const int self = sp == me || rp == me;
    const int off_ring = (sp >= 0 && sp != me && sp != tutti_ring_next(me, n)) ||
                         (rp >= 0 && rp != me && rp != tutti_ring_prev(me, n));
    if ((self && (uint64_t)nch > dc->lay.loop_nch) ||
        (off_ring && (uint64_t)nch > dc->lay.all_nch)) {
      return tutti_error(ncclInternalError,
                         "%s (%s) on %d channels: rank %d sends to %d or hears from %d where "
                         "no queue exists (loopback queues on %d channels, any peer's on %d)",
                         tutti_coll_name((enum tutti_coll)op->args->coll),
                         tutti_algo_get((enum tutti_algo_id)s->algo)->name, nch, me, sp, rp,
                         (int)dc->lay.loop_nch, (int)dc->lay.all_nch);
    }
  }
  return ncclSuccess;
}

/* The schedules' kernel for `ops`, on ops[0].stream. */
static ncclResult_t launch_schedules(struct tutti_dev_comm* dc, const struct tutti_dev_op* ops,
                                     int nops) {
  struct td_counts c = {nops, 0, 0, 0, 0};
  int nch_stack[TUTTI_DEV_MAX_OPS];
  int* nch = nops <= TUTTI_DEV_MAX_OPS ? nch_stack : NULL;
  size_t scratch = 0;
  if (nch == NULL) {
    return tutti_error(ncclInvalidUsage,
                       "a group of %d device operations on one communicator: at most %d run in "
                       "one launch",
                       nops, TUTTI_DEV_MAX_OPS);
  }
  for (int i = 0; i < nops; i++) {
    const struct tutti_schedule* s = ops[i].sched;
    nch[i] = ops[i].plan->channels; /* tune's, shared among the launch's calls */
    c.lanes += s->nlanes;
    c.steps += s->nsteps;
    c.ctas += nch[i] * s->nlanes;
    for (int l = 0; l < s->nlanes; l++) {
      uint16_t conns[TD_CTA_TICKETS];
      int k = lane_conns(s, l, dc->nranks, conns, TD_CTA_TICKETS);
      if (k < 0) {
        return tutti_error(ncclInvalidUsage, "a lane of %s uses more than %d connections",
                           tutti_coll_name(ops[i].args->coll), TD_CTA_TICKETS);
      }
      c.tickets += k * nch[i];
    }
    scratch = s->scratch_bytes > scratch ? s->scratch_bytes : scratch;
    NCCLCHECK(check_queues(dc, &ops[i], nch[i]));
  }
  const int large = !fits<td_work_small>(c);
  if ((large && !fits<td_work_large>(c)) || c.ctas > launch_ctas() || c.ctas > dc->max_ctas) {
    return tutti_error(ncclInvalidUsage,
                       "a group of %d device operations needs %d lanes, %d steps and %d blocks: "
                       "more than one launch holds (split the group)",
                       nops, c.lanes, c.steps, c.ctas);
  }
  struct td_launch_bufs* bufs = (struct td_launch_bufs*)dc->launch_bufs;
  uint16_t* turns = dc->turns;
  struct td_dev_guard g;
  td_dev_enter(&g, dc->dev);
  ncclResult_t res = ensure_scratch(dc, scratch, ops[0].stream);
  if (res == ncclSuccess) {
    const void* work;
    if (large) {
      fill(&bufs->large, dc, ops, nops, nch, turns);
      work = &bufs->large;
    } else {
      fill(&bufs->small, dc, ops, nops, nch, turns);
      work = &bufs->small;
    }
    const int nt = ops[0].plan->threads; /* the launch's, the same in every plan */
    int e = td_kernel_launch(work, large, nt, ops[0].stream);
    res = e == 0 ? ncclSuccess : cuda_fail((cudaError_t)e, "launching the collective kernel");
  }
  if (res == ncclSuccess && scratch > 0) {
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    cudaError_t e = cudaStreamIsCapturing(ops[0].stream, &cs);
    if (e == cudaSuccess && cs != cudaStreamCaptureStatusNone) {
      dc->scratch_in_graph = 1;
    } else if (e == cudaSuccess) {
      e = cudaEventRecord(dc->scratch_ev, ops[0].stream);
    }
    res = e == cudaSuccess ? ncclSuccess : cuda_fail(e, "recording the scratch's last use");
  }
  td_dev_leave(&g);
  return res;
}

static uint64_t launched[TUTTI_DEV_PATHS][TUTTI_DEV_PROTOS];

extern "C" void tutti_dev_launch_counts(uint64_t counts[TUTTI_DEV_PATHS][TUTTI_DEV_PROTOS]) {
  for (int p = 0; p < TUTTI_DEV_PATHS; p++) {
    for (int q = 0; q < TUTTI_DEV_PROTOS; q++) {
      counts[p][q] = __atomic_load_n(&launched[p][q], __ATOMIC_RELAXED);
    }
  }
}

/* Counts a launch by its plan (tutti_dev_launch_counts). */
static void count_launch(const struct tutti_plan* plan) {
  const int proto = plan->proto == TUTTI_PROTO_LL ? 0 : plan->proto == TUTTI_PROTO_LL128 ? 2 : 1;
  if (plan->path >= 0 && plan->path < TUTTI_DEV_PATHS) {
    __atomic_add_fetch(&launched[plan->path][proto], 1, __ATOMIC_RELAXED);
  }
}

extern "C" ncclResult_t tutti_dev_launch(struct tutti_dev_comm* dc, const struct tutti_dev_op* ops,
                                         int nops) {
  NCCLCHECK(tutti_dev_comm_error(dc));
  if (dc->suspended) {
    /* Its memory is gone: a kernel would fault. The API refuses such calls
     * first; this guards the device whatever the caller. */
    return tutti_error(ncclInvalidUsage,
                       "rank %d: the communicator is suspended: call ncclCommResume before using "
                       "it",
                       dc->rank);
  }
  td_net_mark(dc, 'E');
  struct td_dev_guard g;
  td_dev_enter(&g, dc->dev);
  struct td_order_at at;
  ncclResult_t res = td_order_begin(dc, ops, nops, &at);
  if (res == ncclSuccess) {
    const int path = ops[0].plan->path; /* the device paths take single calls */
    res = path == TUTTI_PATH_COPY_ENGINES ? td_ce_run(dc, &ops[0])
          : path == TUTTI_PATH_MAPPED     ? td_mapped_run(dc, &ops[0])
                                          : launch_schedules(dc, ops, nops);
    if (res == ncclSuccess) {
      count_launch(ops[0].plan);
      td_net_mark(dc, 'L');
    }
    /* Whatever was enqueued, the next launch comes after it. */
    ncclResult_t ores = td_order_end(dc, ops, nops, &at);
    res = res != ncclSuccess ? res : ores;
  }
  td_dev_leave(&g);
  return res;
}
