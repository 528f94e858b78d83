/* TUTTI_NET_TRACE=PREFIX: a timeline of the device path across hosts, for
 * finding where a small call's time goes (bench/net_breakdown.py reads it).
 * Each event is a host CLOCK_MONOTONIC time in ns; both ranks of a job on
 * one machine (NCCL_HOSTID) share that clock, so one rank's send and the
 * peer's arrival compare directly. Written at destroy to PREFIX.<rank>, one
 * line per event: "<kind> <peer> <channel> <slot> <ns>".
 *
 *   E  the launch began (tutti_dev_launch entered)     [launching thread]
 *   L  the kernel was enqueued (the launch returns)
 *   K  the proxy saw a kernel start (TD_FLAG_STARTED)  [proxy thread]
 *   P  the proxy saw slot <slot> posted for <peer>
 *   S  ... handed it to the network (isend returned)
 *   D  ... the send completed
 *   A  slot <slot> from <peer> arrived (its tail moved)
 *   F  the proxy saw a kernel finish (TD_FLAG_FINISHED)
 *
 * Events past the buffer's end (1M) are dropped and counted. Off (NULL)
 * unless the variable is set: each hook is one predictable branch. */
#ifndef TUTTI_DEVICE_NET_TRACE_H
#define TUTTI_DEVICE_NET_TRACE_H

#include <stdint.h>

struct td_trace_ev {
  uint64_t ns;
  uint64_t slot;
  int16_t peer;
  uint8_t ch;
  char kind;
};

struct td_trace {
  struct td_trace_ev* ev;
  uint64_t cap;
  uint64_t n; /* taken by atomic increment: launches and the proxy both write */
  uint64_t passes, busy_passes, busy_ns; /* the proxy's loop, while kernels run */
  int rank;
  char path[240];
};

/* A trace for `rank` to PREFIX.<rank> (TUTTI_NET_TRACE, tune/setup.c), or
 * NULL where prefix is NULL or empty. */
struct td_trace* td_trace_open(const char* prefix, int rank);
/* Writes the trace to its file and frees it. */
void td_trace_close(struct td_trace* t);
uint64_t td_trace_now(void);

static inline void td_trace_at(struct td_trace* t, char kind, int peer, int ch, uint64_t slot,
                               uint64_t ns) {
  if (t != 0) {
    const uint64_t i = __atomic_fetch_add(&t->n, 1, __ATOMIC_RELAXED);
    if (i < t->cap) {
      struct td_trace_ev* e = &t->ev[i];
      e->ns = ns;
      e->slot = slot;
      e->peer = (int16_t)peer;
      e->ch = (uint8_t)ch;
      e->kind = kind;
    }
  }
}

static inline void td_trace(struct td_trace* t, char kind, int peer, int ch, uint64_t slot) {
  if (t != 0) {
    td_trace_at(t, kind, peer, ch, slot, td_trace_now());
  }
}

#endif
