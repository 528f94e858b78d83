/* The listener thread that answers for the process's communicators: clients on NCCL_RAS_ADDR (the
 * whole job's answer, gathered from the other processes by ras/gather.c) and peers on an ephemeral
 * port (this process's ranks only). It also writes a rank's flight record when its communicator
 * failed elsewhere while the rank was outside any call. The call path never takes the registry's
 * lock. */
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

static TUTTI_PARAM_INT32(ras_enable, "NCCL_RAS_ENABLE", 1, 0, 1,
                         "1: each process answers tutti-ras queries from a listener thread; 0: no "
                         "listener (the flight recorder still runs)");
static TUTTI_PARAM_STR(ras_addr, "NCCL_RAS_ADDR", "localhost:28028", "host:port",
                       "where tutti-ras asks a job: the first process of a host to take it "
                       "serves clients, the others only their peers");

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t first = PTHREAD_MUTEX_INITIALIZER; /* peer_addr, and the start */
static int client_fd = -1, peer_fd = -1;
static union tutti_socket_addr peer_addr;
static int started;

/* A plain listening socket, quiet when the port is taken. */
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

/* NCCL_RAS_ADDR, when this process can take it: at start, and again each
 * second, so that when the process serving this host's clients exits,
 * another takes over. */
static union tutti_socket_addr client_addr;
static int client_addr_ok;

static void take_client_port(void) {
  if (client_addr_ok) {
    union tutti_socket_addr a = client_addr;
    client_fd = listen_on(&a);
  }
}

static void* serve(void* arg) {
  (void)arg;
  double tried = tutti_socket_now();
  for (;;) {
    if (client_fd < 0 && tutti_socket_now() - tried > 1.0) {
      tried = tutti_socket_now();
      take_client_port();
    }
    struct pollfd fds[2] = {{peer_fd, POLLIN, 0}, {client_fd, POLLIN, 0}};
    const int n = poll(fds, client_fd >= 0 ? 2 : 1, 200);
    if (n > 0 && (fds[0].revents & POLLIN)) {
      tutti_ras_serve_peer(peer_fd);
    }
    if (n > 0 && client_fd >= 0 && (fds[1].revents & POLLIN)) {
      const int fd = tutti_socket_try_accept(client_fd, NULL);
      if (fd >= 0) {
        tutti_ras_answer_client(fd, peer_fd);
        close(fd);
      }
    }
    dump_failed();
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
  const char* where = tutti_param_ras_addr();
  /* Parsed once: a wrong address is told once, not at every retry. */
  client_addr_ok = where != NULL && *where != '\0' &&
                   tutti_socket_parse(where, AF_UNSPEC, &client_addr) == ncclSuccess;
  take_client_port();
  char pa[TUTTI_SOCKET_ADDR_STRLEN];
  INFO(TUTTI_RAS, "RAS: peers at %s; clients %s %s", tutti_socket_format(&peer_addr, pa, sizeof pa),
       client_fd >= 0 ? "at" : "of this host ask another process at", where);
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&t, &attr, serve, NULL) == 0) {
    started = 1;
  } else {
    close(peer_fd);
    peer_fd = -1;
    if (client_fd >= 0) {
      close(client_fd);
      client_fd = -1;
    }
  }
  pthread_attr_destroy(&attr);
}

/* A child of fork has none of its parent's threads: its own communicators
 * start a listener of their own, on sockets of their own. */
static void after_fork_child(void) {
  static const pthread_once_t fresh = PTHREAD_ONCE_INIT;
  if (peer_fd >= 0) {
    close(peer_fd);
  }
  if (client_fd >= 0) {
    close(client_fd);
  }
  peer_fd = client_fd = -1;
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
