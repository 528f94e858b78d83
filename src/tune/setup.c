/* What executors are set up with: a device communicator's sizes (channels,
 * threads, queues, inboxes, where its queues live and how its regions are
 * made) and how long a waiting rank spins. The variables are read here,
 * never by the executors. */
#define _GNU_SOURCE /* sched_getaffinity */
#include <sched.h>

#include "tune/internal.h"
#include "util/param.h"

static TUTTI_PARAM(max_nchannels, "NCCL_MAX_NCHANNELS", 64,
                   "device: the most channels of a communicator (1 to 64; 4 with peers on "
                   "other hosts)");
static TUTTI_PARAM(nthreads, "NCCL_NTHREADS", 512,
                   "device: threads per block of the kernels (64 to 512, a multiple of 32)");
static TUTTI_PARAM(p2p_disable, "NCCL_P2P_DISABLE", 0,
                   "1: GPUs do not write each other's memory: queues in host memory");
static TUTTI_PARAM(shm_disable, "NCCL_SHM_DISABLE", 0,
                   "1 with NCCL_P2P_DISABLE=1: device calls between GPUs of one host go "
                   "through the network proxy");
static TUTTI_PARAM(cumem_enable, "NCCL_CUMEM_ENABLE", 1,
                   "0: device regions from cudaMalloc, shared with CUDA IPC handles");
static TUTTI_PARAM(rma_direct, "TUTTI_RMA_DIRECT", 1,
                   "device one-sided operations: 1 puts into the windows of this host's peers "
                   "through peer memory; 0 sends every put through the service thread");
static TUTTI_PARAM_STR(net_trace, "TUTTI_NET_TRACE", NULL, "a path prefix",
                       "device buffers across hosts: each rank writes the proxy's timeline of "
                       "every call to PREFIX.<rank> (bench/net_breakdown.py reads it)");
static TUTTI_PARAM_RANGE(comm_memory, "TUTTI_COMM_MEMORY", -1, -1, INT64_MAX,
                         "device: GPU memory of a communicator's region per rank where every "
                         "peer is on this host. -1: lean sizes (at most 32 channels, 2 MB "
                         "queues, no copy-engine inboxes); 0: the sizes of NCCL_MAX_NCHANNELS, "
                         "NCCL_BUFFSIZE and TUTTI_TUNE as they are; N: fitted to N bytes");
static TUTTI_PARAM_RANGE(local_register, "NCCL_LOCAL_REGISTER", 0, 0, 1,
                         "device buffers: 1 keeps the allocations of registered and used buffers "
                         "in the registration cache, exported for this host's peers (in-place "
                         "peer access once the device path is verified on a GPU); 0: every "
                         "buffer staged through the queues");
static TUTTI_PARAM(spin_passes, "TUTTI_SPIN", -1,
                   "idle passes a waiting rank spins before yielding (-1: 8, or 0 when ranks "
                   "outnumber cores)");
static TUTTI_PARAM(yield_passes, "TUTTI_YIELD", -1,
                   "passes a waiting rank then yields before sleeping on a futex (-1: 200, or "
                   "1000 when ranks outnumber cores)");

static int clamp_channels(int64_t ch, const struct tutti_dev_limits* lim) {
  return ch < 1 ? 1 : ch > lim->max_channels ? lim->max_channels : (int)ch;
}

/* The queues of a device communicator: at least 64 KB (a slot per eighth). */
static size_t device_queue(int net) {
  const size_t q = tutti_tune_device_queue_bytes(net);
  return q < 64 * 1024 ? 64 * 1024 : q;
}

void tutti_tune_device_setup(const struct tutti_dev_limits* lim, struct tutti_dev_sizes* s) {
  const int64_t nt = tutti_param_nthreads();
  s->threads = nt < 64 ? 64 : nt > lim->max_threads ? lim->max_threads : (int)(nt / 32 * 32);
  /* Across hosts a few channels fill the network; their queues are pinned
   * host memory. */
  const int64_t ch = tutti_param_max_nchannels();
  s->channels = clamp_channels(ch, lim);
  s->net_channels = clamp_channels(ch > lim->net_channels ? lim->net_channels : ch, lim);
  s->queue_bytes = device_queue(0);
  s->net_queue_bytes = device_queue(1);
  s->mapped_memory = (size_t)tutti_tune_knob(TUTTI_KNOB_MAPPED_MEMORY);
  s->mapped_ll128_memory = (size_t)tutti_tune_knob(TUTTI_KNOB_MAPPED_LL128_MEMORY);
  s->ce_memory = (size_t)tutti_tune_knob(TUTTI_KNOB_CE_MEMORY);
  /* LL128's inboxes only where some size may take its lines. */
  const int proto = tutti_tune_protocols();
  s->wants_ll128 = (proto & TUTTI_PROTO_LL128) &&
                   (tutti_tune_knob(TUTTI_KNOB_MAPPED_LL128) > 0 || !(proto & TUTTI_PROTO_SIMPLE));
  s->host_queues = tutti_param_p2p_disable() != 0;
  s->net_all = s->host_queues && tutti_param_shm_disable() != 0;
  s->cumem = tutti_param_cumem_enable() != 0;
  s->rma_direct = tutti_param_rma_direct() != 0;
  s->rma_landing = (uint64_t)tutti_tune_knob(TUTTI_KNOB_RMA_LANDING);
  s->net_trace = tutti_param_net_trace();
  s->net_poll = tutti_tune_knob(TUTTI_KNOB_NET_POLL) != 0;
  s->net_yield = tutti_tune_knob(TUTTI_KNOB_NET_YIELD) != 0;
  const int64_t budget = tutti_param_comm_memory();
  s->layout = budget < 0 ? TUTTI_LAYOUT_LEAN : budget == 0 ? TUTTI_LAYOUT_WIDE : TUTTI_LAYOUT_FIT;
  s->comm_memory = budget > 0 ? (size_t)budget : 0;
  s->channels_set = tutti_getenv("NCCL_MAX_NCHANNELS") != NULL;
  s->queue_set = tutti_getenv("NCCL_BUFFSIZE") != NULL;
  const struct tutti_tune_override* o = tutti_tune_override();
  s->mapped_set = o->knobs[TUTTI_KNOB_MAPPED_MEMORY] >= 0;
  s->ce_set = o->knobs[TUTTI_KNOB_CE_MEMORY] >= 0;
  for (int i = 0; i < o->nrules; i++) {
    s->ce_set |= o->rules[i].algo == TUTTI_ALGO_CE;
  }
}

int tutti_tune_local_register(void) {
  return tutti_param_local_register() != 0;
}

void tutti_tune_wait(int local_ranks, struct tutti_wait_sizes* w) {
  cpu_set_t set;
  w->cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  /* Spinning answers fastest only while the peer is running; on a loaded
   * machine (other jobs, or more ranks than cores) it burns the time slice
   * the peer needs. sched_yield costs little when nobody else wants the core
   * and hands it over at once when someone does, so spin only briefly, then
   * yield for a good while before sleeping on the futex. */
  const int oversubscribed = local_ranks > w->cores;
  const int64_t spin = tutti_param_spin_passes(), yield = tutti_param_yield_passes();
  /* More ranks than cores: yield from the first idle pass. A pass that
   * found nothing says the peer is not running, and on this core it may be
   * the very rank that must run (4 ranks on 2 cores: 32 B allreduce 4.12
   * against 6.13 us spinning 8 passes first, 2 KB 5.79 against 6.79;
   * docs/history/results-diary.md, "Decisions"). */
  w->spin_max = spin >= 0 ? (int)spin : (oversubscribed ? 0 : 4096);
  w->spin = spin >= 0 ? (int)spin : (oversubscribed ? 0 : 8);
  w->yield = yield >= 0 ? (int)yield : (oversubscribed ? 1000 : 200);
}

void tutti_tune_wait_sockets(struct tutti_wait_sizes* w) {
  /* Each pass is then a recv() per peer waited for, not a load: spinning
   * grown to 4096 passes held the core for milliseconds, and with other
   * jobs on the VM's two cores, where the peer, the kernel's network work
   * and this rank's proxy all need one, calls took 1-2 ms in stretches
   * (allreduce 4-16 KB across two namespace hosts, load 9: 961-1086 us
   * adapting, 20-26 us spinning 8 passes at most, 20-31 us yielding at
   * once; docs/history/results-diary.md, "2026-12-07"). */
  if (tutti_param_spin_passes() < 0 && w->spin_max > 8) {
    w->spin_max = 8;
  }
}
