/* What the host hands the device executor's kernel: the schedules of one
 * launch, flattened into the kernel's parameters (so a captured graph keeps
 * them), and the layout of the memory every rank exposes to its peers.
 *
 * A launch runs every lane of every operation on every channel as one block
 * (CTA). Channels cut each step's bytes into equal, 16-byte aligned parts;
 * a lane moves its parts in rounds of half a connection's queue, as the
 * host's ring builders do, so no cycle of ranks can fill its queues. */
#ifndef TUTTI_DEVICE_WORK_H
#define TUTTI_DEVICE_WORK_H

#include <stddef.h>
#include <stdint.h>

#include "device/device.h"

#define TD_SLOTS 8         /* slots per connection queue */
#define TD_LINE 128        /* bytes between counters, so peers never share a line */
#define TD_MAX_CHANNELS 64 /* channels any operation may use */
#define TD_CE_SLOTS 4      /* inbox slots per peer of the copy-engine path (launch/ce.h) */
#define TD_LOOP_CHANNELS 8 /* channels a rank's sends to itself may use (loopback queues) */
#define TD_OP_CTAS 128     /* blocks one operation may use (channels x lanes) */
#define TD_SOLE 1          /* td_work.flags */

/* A communicator's flags, in pinned host memory mapped to the device
 * (tutti_dev_comm.host_flags[TD_FLAG_*]; the kernels see abort_flag, error
 * and kstate in the same memory). */
enum {
  TD_FLAG_ABORT = 0,    /* non-zero: every wait ends (ncclCommAbort, a stop below) */
  TD_FLAG_STOP = 1,     /* why device work stopped: enum td_stop */
  TD_FLAG_RANK = 2,     /* the rank a stop names (lost, failed) */
  TD_FLAG_STARTED = 3,  /* kernels started */
  TD_FLAG_FINISHED = 4, /* kernels finished */
  TD_FLAG_CHANNELS = 5, /* channels the last kernel started uses (a hint to the network proxy) */
  TD_FLAG_RUNNING = 8   /* [8..9]: the RAS operation of the last kernel started (64 bits) */
};

/* Why a communicator's device work stopped (host_flags[TD_FLAG_STOP]). */
enum td_stop {
  TD_STOP_NONE = 0,
  TD_STOP_ABORT = 1,       /* ncclCommAbort */
  TD_STOP_TIMEOUT = 2,     /* a wait outlasted TUTTI_TIMEOUT */
  TD_STOP_NO_TICKET = 3,   /* the launcher gave a lane no queue ticket: a bug */
  TD_STOP_PEER_EXITED = 4, /* the process of rank TD_FLAG_RANK exited */
  TD_STOP_NET = 5,         /* the network proxy's connection to TD_FLAG_RANK broke */
  TD_STOP_PEER_FAILED = 6, /* rank TD_FLAG_RANK's communicator failed first */
  TD_STOP_MISMATCH = 7,    /* the late comparison of calls found a difference */
  TD_STOP_RMA = 8          /* a one-sided put to rank TD_FLAG_RANK failed (dev_comm.rma->why) */
};

/* The low-latency protocol: a slot is TD_LL_LINES lines of 16 bytes, each
 * carrying 8 bytes of data and the slot's flag twice, written by one store;
 * the receiver polls the lines themselves, so no fence and no tail. */
#define TD_LL_LINES 512
#define TD_LL_SLOT_BYTES (TD_LL_LINES * 16)        /* bytes per LL slot */
#define TD_LL_PAYLOAD (TD_LL_LINES * 8)            /* data bytes per LL slot */
#define TD_LL_CHUNK (TD_LL_PAYLOAD * TD_SLOTS / 2) /* an LL round: half the LL queue */

/* One step, as algo/algo.h's struct tutti_step, packed. */
struct td_step {
  uint8_t kind;
  uint8_t flags;
  uint8_t src_buf;
  uint8_t dst_buf;
  int16_t send_peer;
  int16_t recv_peer;
  int16_t wait_lane; /* index into the launch's lanes, -1 none */
  uint16_t pad;
  uint32_t pad2;
  uint64_t src_off;
  uint64_t dst_off;
  uint64_t bytes;
};

/* One operation of the launch. */
struct td_op {
  void* bufs[4];          /* enum tutti_buf: none, send, recv, scratch */
  const void* scalar_dev; /* PreMulSum scalar read on the device, or NULL */
  uint64_t scalar_bits;   /* PreMulSum scalar (host immediate), low bytes */
  uint64_t divisor;       /* SumPostDiv divisor */
  uint8_t type;           /* ncclDataType_t */
  uint8_t kind;           /* enum tutti_red_kind */
  uint8_t elem_size;
  uint8_t nch; /* channels this operation runs on */
  uint8_t ll;  /* low-latency protocol (else simple) */
  uint8_t pad[7];
};

struct td_lane {
  uint16_t op;
  uint16_t first_step;
  uint16_t nsteps;
  uint16_t done_idx; /* counter of finished channels (for WAIT_LANE) */
};

/* One block: a lane on a channel, with its places in the connection queues. */
struct td_cta {
  uint16_t lane;
  uint8_t channel;
  uint8_t nticket;
  uint16_t first_ticket;
  uint16_t pad;
};

/* A lane takes its turn on a connection: conn = dir * nranks + peer (dir 0
 * send, 1 receive); turn = how many blocks of this launch use it before. */
struct td_ticket {
  uint16_t conn;
  uint16_t turn;
};

/* The launch, passed by value. Two sizes: a small one for the common case
 * (fast to launch) and a large one for big groups and many ranks. */
template <int STEPS, int OPS, int LANES, int CTAS, int TICKETS>
struct td_work {
  struct td_devcomm* comm;
  uint32_t ncta;
  uint32_t nlanes;
  uint32_t chunk_bytes; /* round size per channel: half a queue */
  uint32_t slot_bytes;
  /* TD_SOLE: every (channel, connection) has one block and no lane waits
   * for another, so blocks hand nothing to each other within the launch. */
  uint32_t flags;
  uint32_t nch; /* the most channels of any operation: kstate[2] for the network proxy */
  uint64_t tag; /* the launch's RAS operation (TD_FLAG_RUNNING while it runs) */
  struct td_op ops[OPS];
  struct td_lane lanes[LANES];
  struct td_cta ctas[CTAS];
  struct td_ticket tickets[TICKETS];
  struct td_step steps[STEPS];
};

typedef td_work<48, 4, 24, 64, 128> td_work_small;
typedef td_work<320, TUTTI_DEV_MAX_OPS, 160, 128, 896> td_work_large;

/* Each rank's shared region, mapped into every peer (GPU memory exported as
 * cuMem file descriptors or CUDA IPC handles, or host shared memory mapped
 * into every GPU when peers cannot reach each other's memory):
 *   tail[ch][src]   slots `src` has posted into my queue (written by src)
 *   head[ch][dst]   slots `dst` has freed of my sends to it (written by dst)
 *   len[ch][src]    bytes of each slot (written by src with the tail; read
 *                   only by the proxy that forwards slots across hosts)
 *   queue[ch][src]  TD_SLOTS slots each, for the n - 1 peers, on the first
 *                   td_all_peer_channels(n) channels (every operation but a
 *                   ring runs on no more: launch/launch.cu)
 *   ring[ch]        the same from the ring's previous rank only, on the
 *                   channels beyond those (a ring's lanes hear from it alone)
 *   loop[ch]        the same for this rank's sends to itself, on the first
 *                   loop_nch channels only (td_queue_off)
 *   ll[ch][src]     TD_SLOTS LL slots each (positions shared with the queue)
 *   dflag[src][chan], dack[dst][chan], inbox[src][parity][chan],
 *   ll_inbox[src][parity][chan] and ll128_inbox[src][chan][slot]: the
 *                   mapped kernel's (kernels/mapped.h; src and dst count peers
 *                   only; inboxes on mapped_nch / ll_nch channels, counters
 *                   on TD_MAPPED_CHANNELS)
 * and its private region, always in its own GPU's memory:
 *   sent[ch][dst], recvd[ch][src], served[ch][conn] turns, done counters,
 *   the count of finished blocks, and (beside it) of kernels started and
 *   finished, mirrored to host memory for the watchdog; dseq[chan], the
 *   mapped kernel's rounds per channel. */
struct td_layout {
  uint64_t tail_off, head_off, len_off, queue_off, queue_bytes, all_nch, ring_off, loop_off, ll_off;
  uint64_t dflag_off, dack_off, inbox_off, chan_bytes, ll_inbox_off, ll128_inbox_off,
      ll128_chan_bytes;
  uint64_t ce_flag_off, ce_inbox_off, ce_slot_bytes, total;
  /* Channels set up, those with loopback queues, with the mapped kernel's simple and LL128
   * inboxes, with its LL inboxes: the most blocks each may use. */
  uint64_t nch, loop_nch, mapped_nch, ll_nch;
  uint64_t sent_off, recvd_off, served_off, done_off, finished_off, dseq_off, priv_total;
};

/* Lives in device memory; the kernel reads it through work.comm. */
struct td_devcomm {
  int rank;
  int nranks;
  int nch;
  int net;             /* some regions are shadows forwarded by a proxy: slots carry their length */
  uint64_t timeout_ns; /* a wait longer than this stops the kernel (TUTTI_TIMEOUT) */
  struct td_layout lay;
  volatile int* abort_flag; /* host memory mapped to the device: set by ncclCommAbort */
  int* error;               /* same memory: the kernel's report, 0 none */
  int* kstate;              /* same memory: [0] kernels started, [1] kernels finished,
                               TD_FLAG_RUNNING's words: the RAS operation of the last
                               kernel started */
  char* priv;               /* this rank's private region */
  char* base[1];            /* [nranks]: every rank's shared region as this rank sees it */
};

/* Byte offset of counter [ch][idx] of an array at `off` with `width` entries per channel. */
__host__ __device__ static inline uint64_t td_ctr(uint64_t off, int ch, int idx, int width) {
  return off + ((uint64_t)ch * (uint64_t)width + (uint64_t)idx) * TD_LINE;
}

/* Index of rank `src` among the peers of rank `dst` (itself left out). */
__host__ __device__ static inline int td_peer_slot(int src, int dst) {
  return src - (src > dst);
}

/* Channels on which every peer may send to a rank of `n`: the most any
 * operation but a ring may use (launch/launch.cu). */
__host__ __device__ static inline int td_all_peer_channels(int n) {
  const int k = TD_OP_CTAS / (2 * n);
  return k < 1 ? 1 : k;
}

/* Byte offset of the queue rank `from` fills on channel `ch` in rank `at`'s
 * region (`n` ranks): a peer's queue[ch][from], the ring's previous rank's
 * ring[ch], or at's own loopback queue. */
__host__ __device__ static inline uint64_t td_queue_off(const struct td_layout* l, int ch, int from,
                                                        int at, int n) {
  if (from == at) {
    return l->loop_off + (uint64_t)ch * l->queue_bytes;
  }
  if ((uint64_t)ch >= l->all_nch) {
    return l->ring_off + ((uint64_t)ch - l->all_nch) * l->queue_bytes;
  }
  return l->queue_off +
         ((uint64_t)ch * (uint64_t)(n - 1) + (uint64_t)td_peer_slot(from, at)) * l->queue_bytes;
}

#endif
