/* A call's plan, as tune hands it to the executor that runs it, and what
 * executors tell tune to plan with: data only. The executors include this
 * header and no other of tune's: they run the plan and decide nothing. */
#ifndef TUTTI_TUNE_PLAN_H
#define TUTTI_TUNE_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "algo/algo.h"

/* Protocols (NCCL_PROTO), as masks. */
enum { TUTTI_PROTO_LL = 1, TUTTI_PROTO_SIMPLE = 2, TUTTI_PROTO_LL128 = 4, TUTTI_PROTO_ALL = 7 };

/* The path that runs a call: a schedule (on the host executor, or the
 * schedules' kernel for device buffers), the mapped kernel, or the copy
 * engines. */
enum { TUTTI_PATH_SCHEDULE, TUTTI_PATH_MAPPED, TUTTI_PATH_COPY_ENGINES };

/* One call's plan: made once, by tune (tune/plan.c), from the one table. */
struct tutti_plan {
  int path;                /* TUTTI_PATH_* */
  enum tutti_algo_id algo; /* the schedule's algorithm; TUTTI_ALGO_MAPPED / _CE on those paths */
  const char* why;         /* a static sentence: the table's row, TUTTI_TUNE, NCCL_ALGO */
  /* Device buffers: the protocol and how the path cuts the call. */
  int proto;          /* TUTTI_PROTO_* */
  int threads;        /* per block (a launch of the schedules' kernel: the same for all) */
  int channels;       /* the schedules' kernel: blocks per lane */
  int blocks;         /* the mapped kernel's blocks; the copy engines': per whole piece */
  int last_blocks;    /* the copy engines: blocks of the last piece */
  size_t round_bytes; /* the mapped kernel: data bytes per channel and round */
  size_t slot_bytes;  /* the mapped kernel, LL128: bytes of lines per inbox slot */
  int slots;          /* the mapped kernel: rounds a channel's inbox holds */
  size_t piece_bytes; /* the copy engines: bytes per piece */
};

/* What the device executor holds at most, fixed when it was built
 * (src/device: tutti_dev_limits). */
struct tutti_dev_limits {
  int max_channels;     /* channels of a communicator */
  int net_channels;     /* the same with peers through the network proxy */
  int max_threads;      /* threads per block */
  int op_ctas;          /* blocks one operation of the schedules' kernel may use */
  int loop_channels;    /* channels a rank's sends to itself may use */
  int launch_ctas;      /* blocks one launch's parameters describe */
  int mapped_max_ranks; /* the most ranks the mapped kernel and the copy engines take */
  int mapped_channels;  /* inbox channels per peer of the mapped kernel's simple rounds */
  int mapped_ll_channels;
  int mapped_ll_round; /* data bytes of an LL round: half an LL inbox channel */
  int ll128_line;      /* bytes of an LL128 line, */
  int ll128_data;      /* of which data */
};

/* What a device communicator offers a launch (src/device:
 * tutti_dev_comm_caps): its setup, and the launch's stream. */
struct tutti_dev_caps {
  struct tutti_dev_limits lim;
  unsigned colls;   /* the collectives the mapped kernel and the copy engines implement */
  int one_process;  /* every peer's memory belongs to this process */
  int net;          /* some peer is reached through the network proxy */
  int channels;     /* channels set up */
  int all_channels; /* of them, those on which every peer has queues (0: all) */
  int threads;      /* threads per block set up */
  int ctas;         /* blocks of the schedules' kernel resident at once (this rank's share) */
  int mapped_ctas;  /* the same for the mapped kernel */
  int capturing;    /* the launch's stream is being captured into a graph */
  int spare;        /* zero: no padding before the sizes (plans are cached by these bytes) */
  uint64_t mapped_chan_bytes; /* the mapped kernel's inbox per channel (0: none) */
  uint64_t ll128_chan_bytes;  /* its LL128 inbox per channel (0: none) */
  uint64_t ce_slot_bytes;     /* the copy engines' inbox slot (0: none) */
};

/* How a device region's sizes are chosen (TUTTI_COMM_MEMORY). */
enum tutti_layout { TUTTI_LAYOUT_LEAN, TUTTI_LAYOUT_WIDE, TUTTI_LAYOUT_FIT };

/* A device communicator's sizes: tune's answer at its setup
 * (tutti_tune_device_setup). */
struct tutti_dev_sizes {
  int channels;                        /* channels with every peer on this host */
  int net_channels;                    /* with some peer through the network proxy */
  int threads;                         /* per block */
  size_t queue_bytes, net_queue_bytes; /* per connection queue, likewise */
  size_t mapped_memory, mapped_ll128_memory, ce_memory; /* inboxes per rank */
  /* Where every peer is on this host and GPU memory holds the region
   * (TUTTI_COMM_MEMORY, device/layout.cu): the lean sizes, the sizes above
   * as they are, or sizes fitted to comm_memory bytes per rank. */
  enum tutti_layout layout;
  size_t comm_memory;
  /* Given by the user, so the lean sizes keep them: NCCL_MAX_NCHANNELS,
   * NCCL_BUFFSIZE, TUTTI_TUNE's mapped.memory, and the copy engines (a row
   * naming them, or ce.memory). */
  int channels_set, queue_set, mapped_set, ce_set;
  int wants_ll128;       /* some size may take LL128 lines: their inboxes are worth it */
  int host_queues;       /* NCCL_P2P_DISABLE: queues in host memory */
  int net_all;           /* with NCCL_SHM_DISABLE too: every peer through the network proxy */
  int cumem;             /* regions from cuMem (NCCL_CUMEM_ENABLE), else cudaMalloc */
  int rma_direct;        /* one-sided puts through peer memory on this host (TUTTI_RMA_DIRECT) */
  uint64_t rma_landing;  /* pinned bytes one-sided data may wait in (TUTTI_TUNE rma.landing) */
  const char* net_trace; /* TUTTI_NET_TRACE: the proxy's timeline to PREFIX.<rank>, else NULL */
  int net_poll;  /* TUTTI_TUNE net.poll: 1 tests receives on the running kernel's channels */
  int net_yield; /* TUTTI_TUNE net.yield: 1 yields between idle passes while kernels run */
};

#endif
