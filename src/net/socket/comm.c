/* A socket comm's life: made from the sockets of one connection, checked
 * for a far host that stopped answering, freed with its workers joined and
 * its sockets closed whatever is still pending. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/socket/comm.h"
#include "util/check.h"
#include "util/seal.h"
#include "util/param.h"

/* The same names as NCCL's socket transport and tutti's host transport
 * (transport/tcp.c, with its own defaults there); here: data sockets per
 * connection = threads per comm x sockets per thread, at most 64. Threads
 * by default: 2 per comm (a rank's device proxy opens 8 comms to each
 * remote peer, NCCL a few per channel: 2 moved 1.2-1.5x what 8 did across
 * two hosts on one H200, though one comm pair alone moves most with 8),
 * and none below 4 cores, where threads beside the polling callers only
 * compete with them: every message then moves on the control socket
 * (docs/tuning.md, bench/RESULTS.md). */
static TUTTI_PARAM(nthreads, "NCCL_SOCKET_NTHREADS", -1,
                   "socket network: worker threads per comm, 0 to 16 (-1: 2 from 4 cores, 0 "
                   "below)");
static TUTTI_PARAM(nsocks_per_thread, "NCCL_NSOCKS_PERTHREAD", 1,
                   "socket network: data sockets per worker thread (threads x this at most 64)");

#define CHECK_EVERY_S 0.25 /* how often pending requests look at the heartbeat */
#define AUTO_MAX_THREADS 2

static int threads_wanted(void) {
  const int64_t t = tutti_param_nthreads();
  if (t < 0) {
    cpu_set_t set;
    const int cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    return cores < 4 ? 0 : cores / 2 > AUTO_MAX_THREADS ? AUTO_MAX_THREADS : cores / 2;
  }
  return t > TUTTI_SOCKNET_MAX_THREADS ? TUTTI_SOCKNET_MAX_THREADS : (int)t;
}

int tutti_socknet_nsocks(void) {
  const int64_t per = tutti_param_nsocks_per_thread();
  const int64_t n = (int64_t)threads_wanted() * (per < 1 ? 1 : per > 64 ? 64 : per);
  return n > TUTTI_SOCKNET_MAX_SOCKS ? TUTTI_SOCKNET_MAX_SOCKS : (int)n;
}

ncclResult_t tutti_socknet_comm_new(int send, int ctrl, const int* data, int nsocks,
                                    const char* peer, struct tutti_socknet_comm** out) {
  struct tutti_socknet_comm* c = calloc(1, sizeof *c);
  if (c == NULL) {
    return tutti_error(ncclSystemError, "socket network: out of memory for a comm to %s", peer);
  }
  c->send = send;
  snprintf(c->peer, sizeof c->peer, "%s", peer);
  c->ctrl = ctrl;
  c->nsocks = nsocks;
  memcpy(c->data, data, sizeof(int) * (size_t)nsocks);
  /* The connecting side chose the sockets: a receiver that wants no
   * threads still needs one to serve them. */
  const int want = threads_wanted() < 1 ? 1 : threads_wanted();
  c->nthreads = want < nsocks ? want : nsocks;
  for (int t = 0; t < TUTTI_SOCKNET_MAX_THREADS; t++) {
    c->workers[t].efd = -1;
  }
  for (int i = 0; i < TUTTI_NET_MAX_REQUESTS; i++) {
    c->reqs[i].comm = c;
  }
  pthread_mutex_init(&c->fail_lock, NULL);
  c->next_check = tutti_socket_now() + CHECK_EVERY_S;
  INFO(TUTTI_NET | TUTTI_INIT, "socket network: %s comm %s %s over %d data sockets, %d threads",
       send ? "send" : "receive", send ? "to" : "from", peer, nsocks, c->nthreads);
  *out = c;
  return ncclSuccess;
}

void tutti_socknet_heartbeat(struct tutti_socknet_comm* c) {
  const double now = tutti_socket_now();
  if (c->inflight == 0 || now < c->next_check) {
    return;
  }
  c->next_check = now + CHECK_EVERY_S;
  for (int s = -1; s < c->nsocks; s++) {
    if (tutti_socket_unanswered(s < 0 ? c->ctrl : c->data[s])) {
      tutti_socknet_fail(c, ncclRemoteError,
                         "socket network: the host of %s stopped answering: nothing it was sent "
                         "on this %s comm has been acknowledged for %d heartbeats of %d s (it is "
                         "down, or the network to it is cut)",
                         c->peer, c->send ? "send" : "receive", TUTTI_SOCKET_MISSED,
                         tutti_socket_heartbeat_s());
      return;
    }
  }
}

void tutti_socknet_comm_free(struct tutti_socknet_comm* c) {
  if (c == NULL) {
    return;
  }
  tutti_socknet_workers_stop(c);
  tutti_seal_close(c->ctrl);
  for (int s = 0; s < c->nsocks; s++) {
    tutti_seal_close(c->data[s]);
  }
  pthread_mutex_destroy(&c->fail_lock);
  free(c);
}
