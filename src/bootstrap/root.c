/* The bootstrap root: one detached thread per job that collects every rank's
 * listening address and sends back the table. All connections are served
 * from one poll() loop with per-connection buffers, so that a stranger, a
 * wrong secret or a client trickling bytes cannot delay the real ranks. */
#define _GNU_SOURCE /* accept4, pthread_setname_np */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap/internal.h"
#include "util/check.h"
#include "util/param.h"

static TUTTI_PARAM_RANGE(root_timeout, "TUTTI_TIMEOUT", 300, 1, INT64_MAX);

#define ROOT_MAX_PENDING 256 /* connections still presenting themselves */
#define ROOT_ACCEPT_BURST 64
#define ROOT_FLUSH_S 2.0 /* past its life, the root waits this long for replies to drain */
#define HELLO_BYTES (TUTTI_BS_PREAMBLE + TUTTI_BS_HEADER + TUTTI_BS_HELLO_LEN)

enum conn_state { CONN_HELLO, CONN_JOINED, CONN_REPLY, CONN_DEAD };

struct conn {
  int fd;
  enum conn_state state;
  double deadline; /* CONN_HELLO: by when the handshake must be complete */
  size_t got;
  unsigned char in[HELLO_BYTES];
  unsigned char* out;
  size_t out_len, out_off;
  int rank;
  char where[TUTTI_SOCKET_ADDR_STRLEN]; /* peer address, then the rank's listen address */
};

struct root {
  int lfd;
  double lfd_pause_until; /* out of fds: stop accepting for a moment */
  unsigned char secret[TUTTI_BS_SECRET];
  char where[TUTTI_SOCKET_ADDR_STRLEN];
  double life_s, deadline; /* TUTTI_TIMEOUT bounds the root's own life */
  struct conn** conns;
  struct pollfd* pfd;
  int nconns, cap;
  int nranks, first_rank; /* nranks is -1 until the first hello */
  int joined;
  unsigned char* present;
  unsigned char* table; /* nranks packed listen addresses */
  double job_deadline;  /* the earliest deadline of a joined rank */
  double job_timeout_s; /* that rank's timeout, for the sentence */
  double linger_until;  /* after a failure, late ranks are told why until then */
  int complete, failed;
  uint32_t err_code;
  char err[TUTTI_BS_MAX_ERROR];
};

/* The roots this process runs, so that its ranks can tell whether they
 * joined their own root alone (tutti_bootstrap_root_joined). */
#define ROOT_REGISTRY 64
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct root* registry[ROOT_REGISTRY];

static void registry_set(struct root* r, int add) {
  pthread_mutex_lock(&registry_lock);
  for (int i = 0; i < ROOT_REGISTRY; i++) {
    if (add ? registry[i] == NULL : registry[i] == r) {
      registry[i] = add ? r : NULL;
      break;
    }
  }
  pthread_mutex_unlock(&registry_lock);
}

int tutti_bootstrap_root_joined(const unsigned char secret[TUTTI_BS_SECRET]) {
  int joined = -1;
  pthread_mutex_lock(&registry_lock);
  for (int i = 0; i < ROOT_REGISTRY && joined < 0; i++) {
    if (registry[i] != NULL && memcmp(registry[i]->secret, secret, TUTTI_BS_SECRET) == 0) {
      joined = __atomic_load_n(&registry[i]->joined, __ATOMIC_RELAXED);
    }
  }
  pthread_mutex_unlock(&registry_lock);
  return joined;
}

static void conn_drop(struct root* r, int i) {
  struct conn* c = r->conns[i];
  close(c->fd);
  free(c->out);
  free(c);
  r->conns[i] = r->conns[--r->nconns];
}

static int conn_add(struct root* r, int fd, const union tutti_socket_addr* peer, double now) {
  if (r->nconns == r->cap) {
    int cap = r->cap ? 2 * r->cap : 16;
    struct conn** nc = realloc(r->conns, (size_t)cap * sizeof *nc);
    struct pollfd* np = nc ? realloc(r->pfd, (size_t)(cap + 1) * sizeof *np) : NULL;
    if (nc != NULL) {
      r->conns = nc;
    }
    if (np == NULL) {
      return -1;
    }
    r->pfd = np;
    r->cap = cap;
  }
  struct conn* c = calloc(1, sizeof *c);
  if (c == NULL) {
    return -1;
  }
  c->fd = fd;
  c->state = CONN_HELLO;
  c->deadline = now + TUTTI_BS_HANDSHAKE_S;
  tutti_socket_format(peer, c->where, sizeof c->where);
  r->conns[r->nconns++] = c;
  return 0;
}

/* The connection that has been presenting itself the longest, or -1. */
static int oldest_pending(const struct root* r, int* count) {
  int best = -1;
  *count = 0;
  for (int i = 0; i < r->nconns; i++) {
    if (r->conns[i]->state == CONN_HELLO) {
      (*count)++;
      if (best < 0 || r->conns[i]->deadline < r->conns[best]->deadline) {
        best = i;
      }
    }
  }
  return best;
}

static void queue(struct conn* c, uint32_t type, const void* a, size_t alen, const void* b,
                  size_t blen) {
  c->out = malloc(TUTTI_BS_HEADER + alen + blen);
  c->state = CONN_REPLY;
  if (c->out == NULL) {
    c->state = CONN_DEAD; /* the rank then times out; nothing better to do */
    return;
  }
  tutti_bs_put32(c->out, type);
  tutti_bs_put32(c->out + 4, (uint32_t)(alen + blen));
  memcpy(c->out + TUTTI_BS_HEADER, a, alen);
  if (blen > 0) {
    memcpy(c->out + TUTTI_BS_HEADER + alen, b, blen);
  }
  c->out_len = TUTTI_BS_HEADER + alen + blen;
  c->out_off = 0;
}

static void queue_error(struct root* r, struct conn* c) {
  unsigned char code[4];
  tutti_bs_put32(code, r->err_code);
  queue(c, TUTTI_BS_ERROR, code, 4, r->err, strlen(r->err));
}

/* The job cannot form: every waiting rank is told why. */
__attribute__((format(printf, 3, 4))) static void fail(struct root* r, ncclResult_t code,
                                                       const char* fmt, ...) {
  if (r->failed) {
    return;
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->err, sizeof r->err, fmt, ap);
  va_end(ap);
  r->failed = 1;
  r->err_code = (uint32_t)code;
  INFO(TUTTI_BOOTSTRAP, "bootstrap root at %s: %s", r->where, r->err);
  for (int i = 0; i < r->nconns; i++) {
    if (r->conns[i]->state == CONN_JOINED) {
      queue_error(r, r->conns[i]);
    }
  }
}

static void fail_missing(struct root* r, double timeout_s) {
  char list[256];
  size_t o = 0;
  int missing = 0;
  for (int i = 0; i < r->nranks; i++) {
    if (!r->present[i] && missing++ < 16) {
      o += (size_t)snprintf(list + o, sizeof list - o, "%s%d", missing > 1 ? ", " : "", i);
    }
  }
  if (missing > 16) {
    snprintf(list + o, sizeof list - o, " and %d more", missing - 16);
  }
  fail(r, ncclRemoteError,
       "%s %s of %d did not join the job at %s within %.3g s: check that every rank was "
       "started with the same unique id / NCCL_COMM_ID",
       missing == 1 ? "rank" : "ranks", list, r->nranks, r->where, timeout_s);
}

static void complete(struct root* r) {
  r->complete = 1;
  for (int i = r->nconns - 1; i >= 0; i--) {
    struct conn* c = r->conns[i];
    if (c->state == CONN_JOINED) {
      queue(c, TUTTI_BS_TABLE, r->table, (size_t)r->nranks * TUTTI_SOCKET_ADDR_WIRE, NULL, 0);
    } else if (c->state == CONN_HELLO) {
      c->state = CONN_DEAD; /* strangers still presenting themselves; tick() drops them */
    }
  }
  close(r->lfd); /* nobody else may join: later connections are refused */
  r->lfd = -1;
  INFO(TUTTI_BOOTSTRAP, "bootstrap root at %s: all %d ranks joined", r->where, r->nranks);
}

static void on_hello(struct root* r, struct conn* c, double now) {
  const unsigned char* p = c->in + TUTTI_BS_PREAMBLE + TUTTI_BS_HEADER;
  int rank = (int32_t)tutti_bs_get32(p), nranks = (int32_t)tutti_bs_get32(p + 4);
  double timeout_s = tutti_bs_get32(p + 8) * 1e-3, left_s = tutti_bs_get32(p + 12) * 1e-3;
  union tutti_socket_addr addr;
  if (tutti_socket_addr_unpack(p + 16, &addr) != 0) {
    c->state = CONN_DEAD;
    return;
  }
  tutti_socket_format(&addr, c->where, sizeof c->where);
  c->rank = rank;
  double dl = now + left_s < r->deadline ? now + left_s : r->deadline;
  r->linger_until = dl > r->linger_until ? dl : r->linger_until;
  if (!r->failed && (nranks < 1 || nranks > TUTTI_BS_MAX_RANKS)) {
    fail(r, ncclInvalidArgument, "rank %d (at %s) joined the job at %s with nranks %d", rank,
         c->where, r->where, nranks);
  }
  if (!r->failed && r->nranks < 0) {
    r->present = calloc((size_t)nranks, 1);
    r->table = calloc((size_t)nranks, TUTTI_SOCKET_ADDR_WIRE);
    if (r->present == NULL || r->table == NULL) {
      fail(r, ncclSystemError, "the bootstrap root at %s is out of memory for %d ranks", r->where,
           nranks);
    }
    r->nranks = nranks;
    r->first_rank = rank;
  }
  if (!r->failed && nranks != r->nranks) {
    fail(r, ncclInvalidUsage,
         "rank %d joined the job at %s with nranks %d, but rank %d said %d: every rank must be "
         "given the same number of ranks",
         rank, r->where, nranks, r->first_rank, r->nranks);
  }
  if (!r->failed && (rank < 0 || rank >= nranks)) {
    fail(r, ncclInvalidArgument, "a process (at %s) joined the job at %s as rank %d, outside 0..%d",
         c->where, r->where, rank, nranks - 1);
  }
  if (!r->failed && r->present[rank]) {
    char other[TUTTI_SOCKET_ADDR_STRLEN];
    union tutti_socket_addr first;
    tutti_socket_addr_unpack(r->table + (size_t)rank * TUTTI_SOCKET_ADDR_WIRE, &first);
    fail(r, ncclInvalidUsage,
         "two processes joined the job at %s as rank %d (listening at %s and %s): every rank "
         "number must be used exactly once",
         r->where, rank, tutti_socket_format(&first, other, sizeof other), c->where);
  }
  if (r->failed) {
    queue_error(r, c);
    return;
  }
  c->state = CONN_JOINED;
  r->present[rank] = 1;
  memcpy(r->table + (size_t)rank * TUTTI_SOCKET_ADDR_WIRE, p + 16, TUTTI_SOCKET_ADDR_WIRE);
  if (dl < r->job_deadline) {
    r->job_deadline = dl;
    r->job_timeout_s = timeout_s;
  }
  __atomic_store_n(&r->joined, r->joined + 1, __ATOMIC_RELAXED);
  if (r->joined == r->nranks) {
    complete(r);
  }
}

/* Progress on one connection; returns -1 when it should be closed. */
static int serve(struct root* r, struct conn* c, short revents, double now) {
  if (c->state == CONN_HELLO && (revents & (POLLIN | POLLHUP | POLLERR))) {
    ssize_t n = recv(c->fd, c->in + c->got, HELLO_BYTES - c->got, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      return 0;
    }
    if (n <= 0) {
      return -1;
    }
    c->got += (size_t)n;
    if (tutti_bootstrap_handshake_check(c->in, c->got, r->secret, TUTTI_BS_HELLO,
                                        TUTTI_BS_HELLO_LEN) != 0) {
      if (tutti_bootstrap_other_job(c->in, c->got, r->secret)) {
        /* A tutti rank with another job's secret: said loudly here; the
         * rank hears its connection closed and says why on its side. */
        WARN(
            "bootstrap root at %s: a rank of another job (from %s) tried to join: two jobs use "
            "the same address (NCCL_COMM_ID), or its ranks were given different ids; it was "
            "refused",
            r->where, c->where);
      } else {
        INFO(TUTTI_BOOTSTRAP,
             "bootstrap root at %s: dropped a connection from %s that did not "
             "present this job's secret",
             r->where, c->where);
      }
      return -1;
    }
    if (c->got == HELLO_BYTES) {
      on_hello(r, c, now);
    }
  } else if (c->state == CONN_JOINED && (revents & (POLLIN | POLLHUP | POLLERR))) {
    char byte;
    ssize_t n = recv(c->fd, &byte, 1, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      return 0;
    }
    c->state = CONN_DEAD; /* it must not be sent the error it is the cause of */
    r->present[c->rank] = 0;
    fail(r, ncclRemoteError,
         "rank %d (at %s) left the job at %s before all %d ranks joined: it failed or was "
         "aborted; see its log",
         c->rank, c->where, r->where, r->nranks);
  } else if (c->state == CONN_REPLY && (revents & (POLLOUT | POLLHUP | POLLERR))) {
    ssize_t n =
        send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      return 0;
    }
    if (n <= 0) {
      return -1;
    }
    c->out_off += (size_t)n;
    return c->out_off == c->out_len ? -1 : 0;
  }
  return c->state == CONN_DEAD ? -1 : 0;
}

static void accept_some(struct root* r, double now) {
  for (int k = 0; k < ROOT_ACCEPT_BURST; k++) {
    union tutti_socket_addr peer;
    int fd = tutti_socket_try_accept(r->lfd, &peer);
    int pending;
    int old = oldest_pending(r, &pending);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        r->lfd_pause_until = now + 0.1; /* or poll would wake at once, forever */
        if (old >= 0) {
          conn_drop(r, old);
        }
      }
      return;
    }
    if (pending >= ROOT_MAX_PENDING) {
      conn_drop(r, old);
    }
    if (conn_add(r, fd, &peer, now) != 0) {
      close(fd);
    }
  }
}

/* Advances the clock-driven state; returns 1 when the root is done. */
static int tick(struct root* r, double now) {
  for (int i = r->nconns - 1; i >= 0; i--) {
    struct conn* c = r->conns[i];
    /* Too slow to present itself: a stranger or a stuck client. */
    if (c->state == CONN_DEAD || (c->state == CONN_HELLO && now >= c->deadline)) {
      conn_drop(r, i);
    }
  }
  if (!r->complete && !r->failed && r->joined > 0 && now >= r->job_deadline) {
    fail_missing(r, r->job_timeout_s);
  } else if (!r->complete && !r->failed && r->joined > 0 && now >= r->deadline) {
    fail_missing(r, r->life_s);
  }
  int replying = 0;
  for (int i = 0; i < r->nconns; i++) {
    replying += r->conns[i]->state == CONN_REPLY;
  }
  if (now >= r->deadline + ROOT_FLUSH_S || (r->complete && r->nconns == 0)) {
    return 1;
  }
  if (r->failed) {
    return replying == 0 && now >= r->linger_until;
  }
  return r->joined == 0 && now >= r->deadline;
}

static void sooner(double* t, double now, double x) {
  if (x > now && x < *t) {
    *t = x;
  }
}

/* Milliseconds until the next thing tick() has to look at (at most 1 s). */
static int next_wake_ms(const struct root* r, double now) {
  double t = now + 1.0;
  for (int i = 0; i < r->nconns; i++) {
    if (r->conns[i]->state == CONN_HELLO) {
      sooner(&t, now, r->conns[i]->deadline);
    }
  }
  if (!r->complete && !r->failed && r->joined > 0) {
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
    if (tick(r, now)) {
      break;
    }
    int base = 0;
    if (r->lfd >= 0 && now >= r->lfd_pause_until) {
      r->pfd[base++] = (struct pollfd){.fd = r->lfd, .events = POLLIN};
    }
    for (int i = 0; i < r->nconns; i++) {
      short ev = r->conns[i]->state == CONN_REPLY ? POLLOUT : POLLIN;
      r->pfd[base + i] = (struct pollfd){.fd = r->conns[i]->fd, .events = ev};
    }
    if (poll(r->pfd, (nfds_t)(base + r->nconns), next_wake_ms(r, now)) <= 0) {
      continue;
    }
    now = tutti_socket_now();
    /* Backwards, so that dropping i (which moves the last one into i) keeps the
     * remaining indices matched with their pollfd. */
    for (int i = r->nconns - 1; i >= 0; i--) {
      if (i < r->nconns && serve(r, r->conns[i], r->pfd[base + i].revents, now) != 0) {
        conn_drop(r, i);
      }
    }
    if (base > 0 && r->lfd >= 0 && (r->pfd[0].revents & POLLIN)) {
      accept_some(r, now);
    }
  }
  registry_set(r, 0);
  while (r->nconns > 0) {
    conn_drop(r, r->nconns - 1);
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
                                        const unsigned char secret[TUTTI_BS_SECRET]) {
  struct root* r = calloc(1, sizeof *r);
  if (r == NULL) {
    return tutti_error(ncclSystemError, "out of memory starting the bootstrap root");
  }
  ncclResult_t res = tutti_socket_listen(addr, &r->lfd);
  if (res != ncclSuccess) {
    free(r);
    return res;
  }
  int64_t life = tutti_param_root_timeout();
  r->life_s = life > 0 ? (double)life : 1e9; /* 0 or less: no limit */
  r->deadline = tutti_socket_now() + r->life_s;
  r->job_deadline = 1e300;
  r->nranks = -1;
  memcpy(r->secret, secret, TUTTI_BS_SECRET);
  tutti_socket_format(addr, r->where, sizeof r->where);
  r->pfd = malloc(sizeof *r->pfd);
  pthread_attr_t attr;
  pthread_t thread;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  registry_set(r, 1);
  int err = r->pfd == NULL ? ENOMEM : pthread_create(&thread, &attr, root_main, r);
  pthread_attr_destroy(&attr);
  if (err != 0) {
    registry_set(r, 0);
    close(r->lfd);
    free(r->pfd);
    free(r);
    return tutti_error(ncclSystemError, "cannot start the bootstrap root thread: %s",
                       strerror(err));
  }
  return ncclSuccess;
}
