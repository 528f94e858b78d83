/* The listener thread that answers for the process's communicators: clients
 * (ras/client.c: the whole job's answer, gathered from the other processes
 * by ras/gather.c) and peers on an ephemeral port of the bootstrap's
 * interface (ras/peer.c: this process's ranks only, to peers that prove the
 * communicator's secret). One poll loop drives every connection, each with
 * its own state and deadline, so none waits for another. It also writes a
 * rank's flight record when its communicator failed elsewhere while the
 * rank was outside any call. The call path never takes the registry's lock. */
#define _GNU_SOURCE 1
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ras/internal.h"
#include "util/log.h"
#include "util/param.h"
#include "util/proc.h"

static TUTTI_PARAM_INT32(ras_enable, "NCCL_RAS_ENABLE", 1, 0, 1,
                         "1: each process answers tutti-ras queries from a listener thread; 0: no "
                         "listener (the flight recorder still runs)");

#define DUMP_EVERY_S 0.1 /* how often failed communicators are looked for */
#define CLIENT_RETRY_S 1.0

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t first = PTHREAD_MUTEX_INITIALIZER; /* peer_addr, and the start */
static int peer_fd = -1;
static union tutti_socket_addr peer_addr;
static int started;

/* A plain listening socket on the bootstrap's interface. */
static int listen_on(union tutti_socket_addr* a) {
  int s = socket(a->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s < 0) {
    return -1;
  }
  int one = 1;
  (void)setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  socklen_t len = tutti_socket_addr_len(a);
  if (bind(s, &a->sa, len) != 0 || listen(s, 64) != 0 || getsockname(s, &a->sa, &len) != 0) {
    close(s);
    return -1;
  }
  return s;
}

/* Writes the flight record of every communicator whose job failed while
 * this rank was outside a call (inside one, the executor writes it): a peer
 * gave up waiting (TUTTI_TIMEOUT) or lost a rank. Other failures (calls
 * that differ) say all in their error. */
static void dump_failed(void) {
  pthread_mutex_lock(&tutti_ras_lock);
  for (struct tutti_ras_comm* rc = tutti_ras_comms; rc != NULL; rc = rc->next) {
    if (rc->dumped || rc->peer_bells == NULL) {
      continue;
    }
    for (int p = 0; p < rc->nranks; p++) {
      const struct tutti_doorbell* b = rc->peer_bells[p];
      if (b != NULL && __atomic_load_n(&b->failed, __ATOMIC_ACQUIRE) != 0 &&
          (b->failed_wait || __atomic_load_n(&b->lost, __ATOMIC_ACQUIRE) != 0)) {
        char why[128];
        snprintf(why, sizeof why, "rank %d's communicator failed", p);
        tutti_ras_dump_locked(rc, why);
        break;
      }
    }
  }
  pthread_mutex_unlock(&tutti_ras_lock);
}

static void on_peer_port(void* arg, short revents) {
  (void)arg;
  (void)revents;
  tutti_ras_peer_accept(peer_fd);
}

static void* serve(void* arg) {
  (void)arg;
  struct tutti_ras_poll ps = {0};
  double tried = tutti_socket_now(), dumped = 0;
  for (;;) {
    double now = tutti_socket_now();
    if (now - tried >= CLIENT_RETRY_S) { /* the process serving this host's clients may be gone */
      tried = now;
      tutti_ras_client_open();
    }
    ps.n = 0;
    ps.wake = now + 0.2;
    tutti_ras_poll_add(&ps, peer_fd, POLLIN, on_peer_port, NULL);
    tutti_ras_client_arm(&ps, now);
    tutti_ras_peer_arm(&ps, now);
    const int ms = ps.wake <= now ? 0 : (int)((ps.wake - now) * 1000) + 1;
    if (poll(ps.fds, (nfds_t)ps.n, ms) < 0 && errno != EINTR) {
      struct timespec ts = {0, 10000000}; /* no memory for the set: a moment, then again */
      nanosleep(&ts, NULL);
      continue;
    }
    for (int i = 0; i < ps.n; i++) {
      /* Not woken, a connection may still have bytes the record layer holds
       * (the poll did not wait then): running one that has none costs an
       * EAGAIN. */
      if (ps.fds[i].revents != 0 || (ms == 0 && (ps.fds[i].events & POLLIN) != 0)) {
        ps.on[i](ps.arg[i], ps.fds[i].revents);
      }
    }
    now = tutti_socket_now();
    if (now - dumped >= DUMP_EVERY_S) {
      dumped = now;
      dump_failed();
    }
  }
  return NULL;
}

static void start(void) {
  if (tutti_param_ras_enable() == 0) {
    return;
  }
  /* The peer port: on the interface of the first communicator's bootstrap. */
  peer_fd = listen_on(&peer_addr);
  if (peer_fd < 0) {
    INFO(TUTTI_RAS, "RAS: no listener (%s)", strerror(errno));
    return;
  }
  tutti_ras_client_open();
  char pa[TUTTI_SOCKET_ADDR_STRLEN];
  INFO(TUTTI_RAS, "RAS: peers at %s", tutti_socket_format(&peer_addr, pa, sizeof pa));
  /* Named, so that top and the cost measurement (bench/ras_query_cost.py)
   * find it; signals stay with the application's threads. */
  pthread_t t;
  if (tutti_thread_start(&t, serve, NULL, "tutti-ras") == 0) {
    pthread_detach(t);
    started = 1;
  } else {
    close(peer_fd);
    peer_fd = -1;
    tutti_ras_client_close_all(0);
  }
}

/* A child of fork has none of its parent's threads: its own communicators
 * start a listener of their own, on sockets of their own, and it keeps none
 * of the parent's connections open (a client would wait for their end). */
static void after_fork_child(void) {
  static const pthread_once_t fresh = PTHREAD_ONCE_INIT;
  if (peer_fd >= 0) {
    close(peer_fd);
  }
  tutti_ras_peer_close_all(1);
  tutti_ras_client_close_all(1);
  peer_fd = -1;
  started = 0;
  memset(&peer_addr, 0, sizeof peer_addr);
  once = fresh;
  pthread_mutex_init(&first, NULL);
}

static void register_fork(void) {
  (void)pthread_atfork(NULL, NULL, after_fork_child);
}

void tutti_ras_peer_address(const char* near, unsigned char* out) {
  static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
  pthread_once(&fork_once, register_fork);
  memset(out, 0, TUTTI_SOCKET_ADDR_WIRE);
  /* Under the lock: the first caller's start fills peer_addr (its port)
   * while later ones would read it. */
  pthread_mutex_lock(&first);
  if (peer_addr.sa.sa_family == 0) {
    if (near == NULL || *near == '\0' ||
        tutti_socket_parse(near, AF_UNSPEC, &peer_addr) != ncclSuccess) {
      tutti_socket_parse("127.0.0.1:0", AF_INET, &peer_addr);
    }
    tutti_socket_set_port(&peer_addr, 0);
  }
  pthread_once(&once, start);
  if (started) {
    tutti_socket_addr_pack(&peer_addr, out);
  }
  pthread_mutex_unlock(&first);
}
