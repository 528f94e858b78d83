/* The bootstrap root's thread: one detached thread per job that collects
 * every rank's listening address and sends back the table. All connections
 * are served from one poll() loop with per-connection buffers (root.c), so
 * that a stranger, a wrong secret or a client trickling bytes cannot delay
 * the real ranks. */
#define _GNU_SOURCE /* pthread_setname_np */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap/root_state.h"
#include "util/check.h"
#include "util/param.h"
#include "util/seal.h"

static void accept_some(struct root* r, double now) {
  for (int k = 0; k < ROOT_ACCEPT_BURST; k++) {
    union tutti_socket_addr peer;
    int fd = tutti_socket_try_accept(r->lfd, &peer);
    int pending;
    int old = tutti_bs_root_oldest_pending(r, &pending);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        r->lfd_pause_until = now + 0.1; /* or poll would wake at once, forever */
        if (old >= 0) {
          tutti_bs_root_conn_drop(r, old);
        }
      }
      return;
    }
    if (pending >= ROOT_MAX_PENDING) {
      tutti_bs_root_conn_drop(r, old);
    }
    if (tutti_bs_root_conn_add(r, fd, &peer, now) != 0) {
      tutti_seal_close(fd);
    }
  }
}

static void sooner(double* t, double now, double x) {
  if (x > now && x < *t) {
    *t = x;
  }
}

/* Milliseconds until the next thing tutti_bs_root_tick() has to look at (at most 1 s). */
static int next_wake_ms(const struct root* r, double now) {
  double t = now + 1.0;
  for (int i = 0; i < r->nconns; i++) {
    if (tutti_bs_conn_presenting(r->conns[i]->state)) {
      sooner(&t, now, r->conns[i]->deadline);
    }
  }
  if (!r->complete && !r->failed && r->pub.joined > 0) {
    sooner(&t, now, r->job_deadline);
  }
  if (r->failed) {
    sooner(&t, now, r->linger_until);
  }
  sooner(&t, now, r->deadline);
  sooner(&t, now, r->deadline + ROOT_FLUSH_S);
  sooner(&t, now, r->lfd_pause_until);
  return (int)((t - now) * 1e3) + 1;
}

static void* root_main(void* arg) {
  struct root* r = arg;
  pthread_setname_np(pthread_self(), "tutti-root");
  for (;;) {
    double now = tutti_socket_now();
    if (tutti_bs_root_tick(r, now)) {
      break;
    }
    int base = 0;
    if (r->lfd >= 0 && now >= r->lfd_pause_until) {
      r->pfd[base++] = (struct pollfd){.fd = r->lfd, .events = POLLIN};
    }
    for (int i = 0; i < r->nconns; i++) {
      const enum conn_state st = r->conns[i]->state;
      short ev = st == CONN_REPLY || st == CONN_PROOF ? POLLOUT : POLLIN;
      r->pfd[base + i] = (struct pollfd){.fd = r->conns[i]->fd, .events = ev};
    }
    if (poll(r->pfd, (nfds_t)(base + r->nconns), next_wake_ms(r, now)) <= 0) {
      continue;
    }
    now = tutti_socket_now();
    /* Backwards, so that dropping i (which moves the last one into i) keeps the
     * remaining indices matched with their pollfd. */
    for (int i = r->nconns - 1; i >= 0; i--) {
      if (i < r->nconns &&
          tutti_bs_root_serve(r, r->conns[i], r->pfd[base + i].revents, now) != 0) {
        tutti_bs_root_conn_drop(r, i);
      }
    }
    if (base > 0 && r->lfd >= 0 && (r->pfd[0].revents & POLLIN)) {
      accept_some(r, now);
    }
  }
  tutti_bs_registry_set(&r->pub, 0);
  while (r->nconns > 0) {
    tutti_bs_root_conn_drop(r, r->nconns - 1);
  }
  if (r->lfd >= 0) {
    close(r->lfd);
  }
  free(r->conns);
  free(r->pfd);
  free(r->present);
  free(r->table);
  free(r);
  return NULL;
}

ncclResult_t tutti_bootstrap_root_start(union tutti_socket_addr* addr,
                                        const unsigned char secret[TUTTI_BS_SECRET], unsigned flags,
                                        int* in_use) {
  struct root* r = calloc(1, sizeof *r);
  if (in_use != NULL) {
    *in_use = 0;
  }
  if (r == NULL) {
    return tutti_error(ncclSystemError, "out of memory starting the bootstrap root");
  }
  r->pub.addr = *addr; /* as the id names it: the key the ranks look it up by */
  ncclResult_t res = tutti_socket_listen(addr, &r->lfd);
  if (res != ncclSuccess) {
    if (in_use != NULL) {
      *in_use = errno == EADDRINUSE;
    }
    free(r);
    return res;
  }
  r->life_s = tutti_timeout_s(); /* TUTTI_TIMEOUT bounds the root's own life */
  r->deadline = tutti_socket_now() + r->life_s;
  r->job_deadline = 1e300;
  r->nranks = -1;
  r->flags = flags;
  memcpy(r->derived, secret, TUTTI_BS_SECRET);
  /* A job that learned its token earlier admits only its own processes. */
  r->job = (flags & TUTTI_ID_FLAG_LEARN) ? tutti_bs_job_find(&r->pub.addr, secret) : NULL;
  memcpy(r->pub.secret, r->job != NULL ? r->job->token : secret, TUTTI_BS_SECRET);
  tutti_socket_format(addr, r->where, sizeof r->where);
  tutti_socket_addr_pack(addr, r->packed); /* the port bound: what the id names, ranks dial */
  r->pfd = malloc(sizeof *r->pfd);
  pthread_attr_t attr;
  pthread_t thread;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  tutti_bs_registry_set(&r->pub, 1);
  int err = r->pfd == NULL ? ENOMEM : pthread_create(&thread, &attr, root_main, r);
  pthread_attr_destroy(&attr);
  if (err != 0) {
    tutti_bs_registry_set(&r->pub, 0);
    close(r->lfd);
    free(r->pfd);
    free(r);
    return tutti_error(ncclSystemError, "cannot start the bootstrap root thread: %s",
                       strerror(err));
  }
  return ncclSuccess;
}
