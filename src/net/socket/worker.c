/* A socket comm's worker threads: each moves the chunks queued on its data
 * sockets straight between the sockets and the caller's buffers, so that
 * the kernel's copies of a large message run on several cores. Started at
 * a comm's first striped message; idle workers sleep in poll. */
#define _GNU_SOURCE /* pthread_setname_np */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/socket/comm.h"
#include "util/proc.h"
#include "util/check.h"
#include "util/seal.h"

/* An idle worker spins, then yields the core, then sleeps: a chunk that
 * comes within SPIN_S finds it awake at no cost to others, one within
 * YIELD_S at the cost of cores nobody else wants; later ones pay a
 * wake-up (tens of microseconds on some hosts). */
#define SPIN_S 20e-6
#define YIELD_S 200e-6

/* Moves what the socket takes or gives now: 1 the chunk is through, 0 the
 * socket would block, -1 it failed (*err: errno, 0 for end of stream). */
static int move(int fd, int send_side, struct tutti_socknet_item* it, int* err) {
  for (;;) {
    ssize_t n = send_side ? tutti_seal_send(fd, it->ptr + it->off, it->len - it->off)
                          : tutti_seal_recv(fd, it->ptr + it->off, it->len - it->off);
    if (n > 0) {
      it->off += (size_t)n;
      if (it->off == it->len) {
        return 1;
      }
    } else if (n == 0 && !send_side) {
      *err = 0;
      return -1;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return 0;
    } else if (errno != EINTR) {
      *err = errno;
      return -1;
    }
  }
}

/* One pass over the worker's sockets; fills `pfd` with those that would
 * block and `seen` with the queue ends it saw. Returns whether bytes moved. */
static int pass(struct tutti_socknet_worker* w, struct pollfd* pfd, int* np, uint32_t* seen) {
  struct tutti_socknet_comm* c = w->comm;
  int moved = 0;
  *np = 0;
  for (int k = 0; k < w->count; k++) {
    const int s = w->first + k;
    struct tutti_socknet_ring* r = &c->rings[s];
    uint32_t head = r->head;
    const uint32_t tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
    seen[k] = tail;
    while (head != tail) {
      struct tutti_socknet_item* it = &r->items[head % TUTTI_SOCKNET_RING];
      const size_t before = it->off;
      int err = 0;
      const int rc = move(c->data[s], c->send, it, &err);
      moved |= it->off != before;
      if (rc == 1) {
        struct tutti_socknet_req* req = it->req;
        head++;
        __atomic_store_n(&r->head, head, __ATOMIC_RELEASE);
        __atomic_add_fetch(&req->chunks_done, 1, __ATOMIC_RELEASE);
        continue;
      }
      if (rc == 0) {
        pfd[(*np)++] = (struct pollfd){.fd = c->data[s], .events = c->send ? POLLOUT : POLLIN};
        break;
      }
      char doing[96];
      snprintf(doing, sizeof doing,
               "%s a message on data socket %d (%zu of a %zu-byte chunk moved)",
               c->send ? "sending" : "receiving", s, it->off, it->len);
      tutti_socknet_fail_io(c, err, doing);
      return moved;
    }
  }
  return moved;
}

/* Whether a queue grew since `seen` (a chunk posted after the pass). */
static int news(const struct tutti_socknet_worker* w, const uint32_t* seen) {
  for (int k = 0; k < w->count; k++) {
    if (__atomic_load_n(&w->comm->rings[w->first + k].tail, __ATOMIC_SEQ_CST) != seen[k]) {
      return 1;
    }
  }
  return 0;
}

static void* worker_main(void* arg) {
  struct tutti_socknet_worker* w = arg;
  struct tutti_socknet_comm* c = w->comm;
  struct pollfd pfd[TUTTI_SOCKNET_MAX_SOCKS + 1];
  uint32_t seen[TUTTI_SOCKNET_MAX_SOCKS];
  double busy = tutti_socket_now(); /* when bytes last moved */
  while (!__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE)) {
    const int failed = __atomic_load_n(&c->failed, __ATOMIC_ACQUIRE) != 0;
    int np = 0;
    /* After a failure the buffers may be gone: no chunk is touched again. */
    if (!failed && pass(w, pfd, &np, seen)) {
      busy = tutti_socket_now();
      continue;
    }
    const double idle = failed ? YIELD_S : tutti_socket_now() - busy;
    if (idle < SPIN_S) {
      tutti_cpu_relax();
      continue;
    }
    if (idle < YIELD_S) {
      sched_yield();
      continue;
    }
    __atomic_store_n(&w->sleeping, 1, __ATOMIC_SEQ_CST);
    if (!failed && news(w, seen)) {
      __atomic_store_n(&w->sleeping, 0, __ATOMIC_RELAXED);
      continue;
    }
    int pending = 0; /* a record half read: poll would not wake for the rest */
    for (int i = 0; i < np; i++) {
      pending |= (pfd[i].events & POLLIN) && tutti_seal_has_pending(pfd[i].fd);
    }
    if (pending) {
      __atomic_store_n(&w->sleeping, 0, __ATOMIC_RELAXED);
      continue;
    }
    pfd[np++] = (struct pollfd){.fd = w->efd, .events = POLLIN};
    /* The timeout only bounds how long a lost wake-up could cost. */
    (void)poll(pfd, (nfds_t)np, 1000);
    if (pfd[np - 1].revents & POLLIN) {
      uint64_t v;
      ssize_t n = read(w->efd, &v, sizeof v);
      (void)n;
    }
    __atomic_store_n(&w->sleeping, 0, __ATOMIC_RELAXED);
    busy = tutti_socket_now();
  }
  return NULL;
}

ncclResult_t tutti_socknet_post(struct tutti_socknet_comm* c, int sock, char* ptr, size_t len,
                                struct tutti_socknet_req* req) {
  struct tutti_socknet_ring* r = &c->rings[sock];
  const uint32_t tail = r->tail;
  if (tail - __atomic_load_n(&r->head, __ATOMIC_ACQUIRE) >= TUTTI_SOCKNET_RING) {
    return tutti_socknet_fail(c, ncclInternalError,
                              "socket network: the chunk queue of data socket %d to %s is full "
                              "(%d chunks): a bug in tutti, please report it",
                              sock, c->peer, TUTTI_SOCKNET_RING);
  }
  r->items[tail % TUTTI_SOCKNET_RING] = (struct tutti_socknet_item){ptr, len, 0, req};
  __atomic_store_n(&r->tail, tail + 1, __ATOMIC_SEQ_CST);
  struct tutti_socknet_worker* w = &c->workers[c->owner[sock]];
  if (__atomic_load_n(&w->sleeping, __ATOMIC_SEQ_CST)) {
    tutti_socknet_kick(w);
  }
  return ncclSuccess;
}

/* Stops and joins the first `n` workers, frees what they used. */
static void stop(struct tutti_socknet_comm* c, int n) {
  __atomic_store_n(&c->stop, 1, __ATOMIC_SEQ_CST);
  for (int t = 0; t < n; t++) {
    tutti_socknet_kick(&c->workers[t]);
    pthread_join(c->workers[t].thread, NULL);
  }
  for (int t = 0; t < c->nthreads; t++) {
    if (c->workers[t].efd >= 0) {
      close(c->workers[t].efd);
    }
  }
  free(c->rings);
  c->rings = NULL;
}

ncclResult_t tutti_socknet_workers_start(struct tutti_socknet_comm* c) {
  if (posix_memalign((void**)&c->rings, 64,
                     sizeof(struct tutti_socknet_ring) * (size_t)c->nsocks) != 0) {
    c->rings = NULL;
    return tutti_error(ncclSystemError,
                       "socket network: out of memory for the chunk queues of the comm to %s",
                       c->peer);
  }
  memset(c->rings, 0, sizeof(struct tutti_socknet_ring) * (size_t)c->nsocks);
  /* Sockets split evenly, the first workers taking one more. */
  const int per = c->nsocks / c->nthreads, extra = c->nsocks % c->nthreads;
  int first = 0;
  for (int t = 0; t < c->nthreads; t++) {
    struct tutti_socknet_worker* w = &c->workers[t];
    w->comm = c;
    w->first = first;
    w->count = per + (t < extra);
    w->sleeping = 0;
    for (int k = 0; k < w->count; k++) {
      c->owner[first + k] = t;
    }
    first += w->count;
    w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  }
  for (int t = 0; t < c->nthreads; t++) {
    int rc = c->workers[t].efd < 0 ? errno : 0;
    if (rc == 0) {
      rc = pthread_create(&c->workers[t].thread, NULL, worker_main, &c->workers[t]);
    }
    if (rc != 0) {
      stop(c, t);
      return tutti_error(ncclSystemError,
                         "socket network: cannot start worker thread %d of %d for the comm to "
                         "%s: %s (too many threads? NCCL_SOCKET_NTHREADS sets how many)",
                         t + 1, c->nthreads, c->peer, strerror(rc));
    }
    pthread_setname_np(c->workers[t].thread, c->send ? "tutti-net-send" : "tutti-net-recv");
  }
  __atomic_store_n(&c->started, 1, __ATOMIC_RELEASE);
  return ncclSuccess;
}

void tutti_socknet_workers_stop(struct tutti_socknet_comm* c) {
  if (__atomic_load_n(&c->started, __ATOMIC_ACQUIRE)) {
    stop(c, c->nthreads);
    __atomic_store_n(&c->started, 0, __ATOMIC_RELEASE);
  }
}
