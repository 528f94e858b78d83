/* The device path's timeline across hosts (trace.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device/dev_comm.h"
#include "device/net/link.h"
#include "device/net/trace.h"

extern "C" {
#include "util/log.h"
}

#define TRACE_EVENTS (1u << 20)

uint64_t td_trace_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct td_trace* td_trace_open(const char* prefix, int rank) {
  if (prefix == NULL || prefix[0] == '\0') {
    return NULL;
  }
  struct td_trace* t = (struct td_trace*)calloc(1, sizeof *t);
  if (t == NULL) {
    return NULL;
  }
  t->ev = (struct td_trace_ev*)calloc(TRACE_EVENTS, sizeof *t->ev);
  if (t->ev == NULL) {
    free(t);
    return NULL;
  }
  t->cap = TRACE_EVENTS;
  t->rank = rank;
  snprintf(t->path, sizeof t->path, "%s.%d", prefix, rank);
  return t;
}

void td_trace_close(struct td_trace* t) {
  if (t == NULL) {
    return;
  }
  FILE* f = fopen(t->path, "w");
  if (f == NULL) {
    WARN("TUTTI_NET_TRACE: could not write %s", t->path);
  } else {
    const uint64_t n = t->n < t->cap ? t->n : t->cap;
    fprintf(f, "# rank %d events %llu dropped %llu passes %llu busy_passes %llu busy_ns %llu\n",
            t->rank, (unsigned long long)n, (unsigned long long)(t->n - n),
            (unsigned long long)t->passes, (unsigned long long)t->busy_passes,
            (unsigned long long)t->busy_ns);
    for (uint64_t i = 0; i < n; i++) {
      const struct td_trace_ev* e = &t->ev[i];
      fprintf(f, "%c %d %d %llu %llu\n", e->kind, e->peer, e->ch, (unsigned long long)e->slot,
              (unsigned long long)e->ns);
    }
    fclose(f);
    INFO(TUTTI_NET, "TUTTI_NET_TRACE: rank %d wrote %llu events to %s", t->rank,
         (unsigned long long)n, t->path);
  }
  free(t->ev);
  free(t);
}

void td_net_mark(struct tutti_dev_comm* dc, char kind) {
  if (dc->netp != NULL && dc->netp->trace != NULL) {
    td_trace(dc->netp->trace, kind, -1, 0, 0);
  }
}
