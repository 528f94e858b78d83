/* The sizes that cut a call once its path is chosen (blocks, rounds,
 * pieces, channels), where a protocol stops, and what memory a path's
 * inboxes take: each with its default, where that was measured, and its
 * name in TUTTI_TUNE ("mapped.round=32k;ce.piece=8m", override.c).
 * Executors get them from tune (the plan, tutti_tune_knob); none reads the
 * environment. */
#include <stdint.h>
#include <strings.h>

#include "tune/tune.h"

#define KB ((int64_t)1 << 10)
#define MB ((int64_t)1 << 20)

struct knob {
  const char* name; /* in TUTTI_TUNE */
  int64_t deflt;
  int64_t lo, hi;
};

/* Measured on 2 x H200 (NV18) unless said otherwise (bench/RESULTS.md, "GPU:
 * device buffers, 2 × H200"; the diary, docs/history/, has every sweep). */
static const struct knob knobs[TUTTI_KNOB_COUNT] = {
    /* The schedules' kernel: LL lines up to 8 KB (below, the flag round
     * trip of simple lines costs more than LL's doubled bytes); one
     * channel per 64 KB of the call. */
    [TUTTI_KNOB_LL] = {"ll", 8 * KB, 0, INT64_MAX},
    [TUTTI_KNOB_CHANNEL] = {"channel", 64 * KB, 4 * KB, INT64_MAX},
    /* The mapped kernel's lines: LL up to 1 MB per rank (no fence, no flag
     * round trip); LL128 only when asked (its inboxes cost memory and it
     * was not faster than the simple rounds on NVLink). */
    [TUTTI_KNOB_MAPPED_LL] = {"mapped.ll", 1 * MB, 0, INT64_MAX},
    [TUTTI_KNOB_MAPPED_LL128] = {"mapped.ll128", 0, 0, INT64_MAX},
    /* Bytes per block: fewer bytes per block, more blocks for mid sizes. */
    [TUTTI_KNOB_MAPPED_BLOCK] = {"mapped.block", 32 * KB, 1 * KB, INT64_MAX},
    [TUTTI_KNOB_MAPPED_LL_BLOCK] = {"mapped.ll_block", 2 * KB, 1 * KB, INT64_MAX},
    [TUTTI_KNOB_MAPPED_LL_THREADS] = {"mapped.ll_threads", 256, 32, 1024},
    [TUTTI_KNOB_MAPPED_LL128_BLOCK] = {"mapped.ll128_block", 32 * KB, 1 * KB, INT64_MAX},
    /* Bytes of lines per LL128 round (a slot of a channel's inbox). */
    [TUTTI_KNOB_MAPPED_LL128_ROUND] = {"mapped.ll128_round", 32 * KB, 512, INT64_MAX},
    /* Bytes per simple round, each pushed while the previous one is
     * combined: a block of 32 KB moves in one round (16 KB rounds took
     * 31.9 against 25.0 us at 2 MB). */
    [TUTTI_KNOB_MAPPED_ROUND] = {"mapped.round", 64 * KB, 1 * KB, INT64_MAX},
    /* Inboxes per rank, split over its peers' channels: the simple rounds'
     * and the LL128 lines' (made only where LL128 may run, on NVLink). */
    [TUTTI_KNOB_MAPPED_MEMORY] = {"mapped.memory", 64 * MB, 0, INT64_MAX},
    [TUTTI_KNOB_MAPPED_LL128_MEMORY] = {"mapped.ll128_memory", 16 * MB, 0, INT64_MAX},
    /* The copy engines' combining kernel keeps up with the link only on
     * (nearly) every SM: in 4 MB pieces a 256 MB allreduce took 2003 us at
     * 256 KB per block, 1165 us at 32 KB. A piece's kernel overlaps the
     * next piece's copies, but each piece costs a copy and a kernel of its
     * own: 16 MB measured best. */
    [TUTTI_KNOB_CE_BLOCK] = {"ce.block", 32 * KB, 4 * KB, INT64_MAX},
    [TUTTI_KNOB_CE_PIECE] = {"ce.piece", 16 * MB, 4 * KB, INT64_MAX},
    [TUTTI_KNOB_CE_MEMORY] = {"ce.memory", 64 * MB, 0, INT64_MAX},
    /* Host buffers, measured on this project's 2-core VM (and a 16-core
     * host). Out-of-place outputs of 4 MB (twice a core's L2) and more are
     * written with streaming stores: the lines are not cached (no step read
     * them) and a plain store would first read each one; 2 ranks,
     * allreduce: 1.1-1.25x faster from 8 MB alone, 1.08-1.13x at 16-64 MB
     * with the caller reading its output after each call. 0: never. */
    [TUTTI_KNOB_STREAM] = {"stream", 4 * MB, 0, INT64_MAX},
    /* The board's gathers from 1 MB of output: 4 ranks on 2 cores, 1-4 MB,
     * 1.4-1.5x faster than plain copies, whose lines the ranks sharing a
     * core evict from each other anyway; below, plain copies were up to 2x
     * faster. */
    [TUTTI_KNOB_BOARD_STREAM] = {"board.stream", 1 * MB, 0, INT64_MAX},
    /* A board slot holds the largest contribution a board allreduce carries
     * (the table picks it below 64 KB) and a board all-gather's round. 0: no
     * board. */
    [TUTTI_KNOB_BOARD_SLOT] = {"board.slot", 1 * MB, 0, INT64_MAX},
    /* The device proxy across hosts (device/net/proxy.cu): 1, while a kernel
     * runs, receives are tested only on its channels (every one each 32
     * passes); 0, on every channel every pass. */
    [TUTTI_KNOB_NET_POLL] = {"net.poll", 1, 0, 1},
    /* 1: the proxy yields its core between passes that moved nothing while
     * kernels run; 0: it spins. */
    [TUTTI_KNOB_NET_YIELD] = {"net.yield", 1, 0, 1},
    /* Device one-sided operations (device/rma/land.h): the pinned host bytes
     * (allocated when the first window is registered) in which data that
     * came through the service thread waits for a wait kernel to apply it. */
    [TUTTI_KNOB_RMA_LANDING] = {"rma.landing", 16 * MB, 8 * MB, INT64_MAX},
    /* Host TCP (transport/tcp_direct.c): slots up to this size go from the
     * calling thread to the socket and back when nothing else of the peer
     * is in flight; larger ones through the proxy's pipeline, which
     * receives slot k + 1 while the rank reduces slot k. Two namespace
     * hosts on the 2-core VM (bench/RESULTS.md, "Small messages across
     * namespace hosts"): 8 B - 64 KB 2.5-9x faster than through the proxy.
     * 0: every slot through the proxy. */
    [TUTTI_KNOB_TCP_DIRECT] = {"tcp.direct", 64 * KB, 0, INT64_MAX},
};

const char* tutti_tune_knob_name(enum tutti_knob k) {
  return knobs[k].name;
}

int tutti_tune_knob_find(const char* name) {
  for (int k = 0; k < TUTTI_KNOB_COUNT; k++) {
    if (strcasecmp(name, knobs[k].name) == 0) {
      return k;
    }
  }
  return -1;
}

int tutti_tune_knob_fits(enum tutti_knob k, int64_t v) {
  return v >= knobs[k].lo && v <= knobs[k].hi;
}

int64_t tutti_tune_knob_default(enum tutti_knob k) {
  return knobs[k].deflt;
}
