/* The bootstrap root's state: what each connection has sent and is owed,
 * and the job's membership, advanced by tutti_bs_root_serve() on bytes and by tutti_bs_root_tick()
 * on the clock. The thread that polls the sockets is in root_thread.c. */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/root_state.h"
#include "util/check.h"
#include "util/seal.h"

void tutti_bs_root_conn_drop(struct root* r, int i) {
  struct conn* c = r->conns[i];
  tutti_seal_close(c->fd);
  tutti_sha256_wipe(c->keys, sizeof c->keys);
  free(c->out);
  free(c);
  r->conns[i] = r->conns[--r->nconns];
}

int tutti_bs_root_conn_add(struct root* r, int fd, const union tutti_socket_addr* peer,
                           double now) {
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
int tutti_bs_root_oldest_pending(const struct root* r, int* count) {
  int best = -1;
  *count = 0;
  for (int i = 0; i < r->nconns; i++) {
    if (tutti_bs_conn_presenting(r->conns[i]->state)) {
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
  tutti_socket_put32(c->out, type);
  tutti_socket_put32(c->out + 4, (uint32_t)(alen + blen));
  memcpy(c->out + TUTTI_BS_HEADER, a, alen);
  if (blen > 0) {
    memcpy(c->out + TUTTI_BS_HEADER + alen, b, blen);
  }
  c->out_len = TUTTI_BS_HEADER + alen + blen;
  c->out_off = 0;
}

static void queue_error(struct root* r, struct conn* c) {
  unsigned char code[4];
  tutti_socket_put32(code, r->err_code);
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
       "started with the same unique id / NCCL_COMM_ID%s%s",
       missing == 1 ? "rank" : "ranks", list, r->nranks, r->where, timeout_s,
       r->refused[0] != '\0' ? "; a connection was refused: " : "", r->refused);
}

/* Whether the root stays after its table: an identity-less job's root
 * catches another job's processes arriving late, and serves the job's later
 * communicators on the address (their ranks present the token). */
static int lingers(const struct root* r) {
  return r->job != NULL;
}

static void complete(struct root* r) {
  r->complete = 1;
  if ((r->flags & TUTTI_ID_FLAG_LEARN) && r->job == NULL) {
    unsigned char token[TUTTI_BS_SECRET];
    if (tutti_bs_random_secret(token) == ncclSuccess) {
      r->job = tutti_bs_job_learn(&r->pub.addr, r->derived, token);
    }
    if (r->job == NULL) {
      WARN(
          "bootstrap root at %s: no identity could be given to this job; a second job on the "
          "address could join it. Set TUTTI_JOB_SECRET",
          r->where);
    }
  }
  const int token = (r->flags & TUTTI_ID_FLAG_LEARN) && r->job != NULL;
  for (int i = r->nconns - 1; i >= 0; i--) {
    struct conn* c = r->conns[i];
    if (c->state == CONN_JOINED) {
      queue(c, TUTTI_BS_TABLE, r->table, (size_t)r->nranks * TUTTI_SOCKET_ADDR_WIRE,
            token ? r->job->token : NULL, token ? TUTTI_BS_SECRET : 0);
    } else if (tutti_bs_conn_presenting(c->state)) {
      c->state =
          CONN_DEAD; /* strangers still presenting themselves; tutti_bs_root_tick() drops them */
    }
  }
  if (lingers(r)) {
    tutti_bs_root_set_secret(&r->pub, r->job->token);
    r->deadline = 1e300; /* until the process ends */
  } else {
    close(r->lfd); /* nobody else may join: later connections are refused */
    r->lfd = -1;
  }
  INFO(TUTTI_BOOTSTRAP, "bootstrap root at %s: all %d ranks joined%s", r->where, r->nranks,
       lingers(r) ? "; the root stays for the job's next communicators" : "");
}

/* A lingering root: the job's next communicator begins. */
static void new_round(struct root* r, double now) {
  free(r->present);
  free(r->table);
  r->present = NULL;
  r->table = NULL;
  r->nranks = -1;
  r->complete = r->failed = 0;
  __atomic_store_n(&r->pub.joined, 0, __ATOMIC_RELAXED);
  r->job_deadline = 1e300;
  r->linger_until = 0;
  r->deadline = now + r->life_s;
}

/* A process presenting the identity-less secret to a job that already has
 * its token: another job was started on the address, and the ranks that
 * formed this job's communicators may be of both. Both are stopped. */
static void on_intruder(struct root* r, struct conn* c) {
  const unsigned char* p = c->in + TUTTI_BS_PREAMBLE + TUTTI_BS_HEADER;
  int rank = (int32_t)tutti_socket_get32(p), nranks = (int32_t)tutti_socket_get32(p + 4);
  char why[TUTTI_BS_MAX_ERROR];
  snprintf(why, sizeof why,
           "two jobs were started on NCCL_COMM_ID %s with no job identity: a process (from %s) "
           "asked to join as rank %d of %d after this job's ranks had formed, so its "
           "communicators may hold ranks of both jobs; both jobs are stopped. Give each job its "
           "own NCCL_COMM_ID port, or one TUTTI_JOB_SECRET per job, or start it with a launcher "
           "(tuttirun, torchrun, srun, mpirun)",
           r->where, c->where, rank, nranks);
  tutti_bs_job_poison(r->job, why);
  WARN("bootstrap root at %s: %s", r->where, r->job->why);
  unsigned char code[4];
  tutti_socket_put32(code, ncclInvalidUsage);
  queue(c, TUTTI_BS_ERROR, code, 4, r->job->why, strlen(r->job->why));
}

static void on_hello(struct root* r, struct conn* c, double now) {
  const unsigned char* p = c->in + TUTTI_BS_PREAMBLE + TUTTI_BS_HEADER;
  int rank = (int32_t)tutti_socket_get32(p), nranks = (int32_t)tutti_socket_get32(p + 4);
  double timeout_s = tutti_socket_get32(p + 8) * 1e-3, left_s = tutti_socket_get32(p + 12) * 1e-3;
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
         "number must be used exactly once%s",
         r->where, rank, tutti_socket_format(&first, other, sizeof other), c->where,
         (r->flags & TUTTI_ID_FLAG_LEARN) ? "; or two jobs were started on this NCCL_COMM_ID: "
                                            "give each its own port or TUTTI_JOB_SECRET"
                                          : "");
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
  __atomic_store_n(&r->pub.joined, r->pub.joined + 1, __ATOMIC_RELAXED);
  if (r->pub.joined == r->nranks) {
    complete(r);
  }
}

/* What the root proves and checks on connection c: the admitted secret
 * (the job's token once it has one) and the id's (an intruder's). */
static struct tutti_bs_proof_of proof_of(const struct root* r, const struct conn* c) {
  return (struct tutti_bs_proof_of){TUTTI_HELLO_ROOT, r->packed, c->in, HELLO_BYTES};
}

/* A whole hello is in: the root proves the secret first (util/hello.h). */
static int on_hello_bytes(struct root* r, struct conn* c) {
  memcpy(c->keys[0], r->pub.secret, TUTTI_BS_SECRET);
  memcpy(c->keys[1], r->job != NULL ? r->derived : r->pub.secret, TUTTI_BS_SECRET);
  const unsigned char* keys[2] = {c->keys[0], c->keys[1]};
  const struct tutti_bs_proof_of pf = proof_of(r, c);
  if (tutti_bs_prove(&pf, keys, c->proof) != 0) {
    return -1;
  }
  c->state = CONN_PROOF;
  c->proof_off = 0;
  return 0;
}

/* A process that sent tutti's hello but did not prove this job's secret:
 * said loudly here (a rank of another job, or ranks given different ids);
 * that process says why on its side. */
static void refused(struct root* r, const struct conn* c, const char* how) {
  WARN(
      "bootstrap root at %s: a process (from %s) that sent tutti's bootstrap hello %s: it holds "
      "another secret (a rank of another job on the same address, NCCL_COMM_ID; ranks given "
      "different ids; or a stranger); it was refused",
      r->where, c->where, how);
}

/* The connector's MAC is in: which secret it proves decides what it is. */
static int on_mac(struct root* r, struct conn* c, double now) {
  const unsigned char* keys[2] = {c->keys[0], c->keys[1]};
  const struct tutti_bs_proof_of pf = proof_of(r, c);
  const int k = tutti_bs_which_key(&pf, keys, c->proof, c->mac);
  if (k < 0) {
    refused(r, c, "answered the root's proof with a wrong MAC");
    return -1;
  }
  c->intruder = k == 1 && r->job != NULL;
  if (c->intruder || (r->job != NULL && r->job->poisoned)) {
    on_intruder(r, c); /* a member after the job was stopped hears the same cause */
    return 0;
  }
  if (r->complete) {
    new_round(r, now);
  }
  on_hello(r, c, now);
  return 0;
}

/* Bytes of the connection's hello, then of its MAC: -1 to drop it. */
static int read_presenting(struct root* r, struct conn* c, double now) {
  const int hello = c->state == CONN_HELLO;
  ssize_t n = hello ? tutti_seal_recv(c->fd, c->in + c->got, HELLO_BYTES - c->got)
                    : tutti_seal_recv(c->fd, c->mac + c->mac_got, TUTTI_BS_MAC - c->mac_got);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
    return 0;
  }
  if (n <= 0) {
    /* A peer without the key costs nothing, as any stranger; it is named
     * if the job then misses a rank (fail_missing). */
    const char* why = tutti_seal_why(c->fd);
    if (why != NULL) {
      snprintf(r->refused, sizeof r->refused, "%s", why);
    } else if (!hello) {
      refused(r, c, "closed after the root's proof instead of proving the secret");
    }
    return -1;
  }
  if (!hello) {
    c->mac_got += (size_t)n;
    return c->mac_got == TUTTI_BS_MAC ? on_mac(r, c, now) : 0;
  }
  c->got += (size_t)n;
  if (tutti_bootstrap_handshake_check(c->in, c->got, TUTTI_BS_HELLO, TUTTI_BS_HELLO_LEN) != 0) {
    INFO(TUTTI_BOOTSTRAP,
         "bootstrap root at %s: dropped a connection from %s that did not send a tutti "
         "bootstrap hello",
         r->where, c->where);
    return -1;
  }
  return c->got == HELLO_BYTES ? on_hello_bytes(r, c) : 0;
}

/* Progress on one connection; returns -1 when it should be closed. */
int tutti_bs_root_serve(struct root* r, struct conn* c, short revents, double now) {
  if ((c->state == CONN_HELLO || c->state == CONN_MAC) &&
      (revents & (POLLIN | POLLHUP | POLLERR))) {
    if (read_presenting(r, c, now) != 0) {
      return -1;
    }
  }
  if (c->state == CONN_PROOF) { /* at once: a new socket's buffer takes it */
    ssize_t n = tutti_seal_send(c->fd, c->proof + c->proof_off, TUTTI_BS_PROOF - c->proof_off);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      return 0;
    }
    if (n <= 0) {
      return -1;
    }
    c->proof_off += (size_t)n;
    if (c->proof_off == TUTTI_BS_PROOF) {
      c->state = CONN_MAC;
      c->mac_got = 0;
    }
    return 0;
  } else if (c->state == CONN_JOINED && (revents & (POLLIN | POLLHUP | POLLERR))) {
    char byte;
    ssize_t n = tutti_seal_recv(c->fd, &byte, 1);
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
    ssize_t n = tutti_seal_send(c->fd, c->out + c->out_off, c->out_len - c->out_off);
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

/* Advances the clock-driven state; returns 1 when the root is done. */
int tutti_bs_root_tick(struct root* r, double now) {
  for (int i = r->nconns - 1; i >= 0; i--) {
    struct conn* c = r->conns[i];
    /* Too slow to present itself: a stranger or a stuck client. */
    if (c->state == CONN_DEAD || (tutti_bs_conn_presenting(c->state) && now >= c->deadline)) {
      tutti_bs_root_conn_drop(r, i);
    }
  }
  if (!r->complete && !r->failed && r->pub.joined > 0 && now >= r->job_deadline) {
    fail_missing(r, r->job_timeout_s);
  } else if (!r->complete && !r->failed && r->pub.joined > 0 && now >= r->deadline) {
    fail_missing(r, r->life_s);
  }
  int replying = 0;
  for (int i = 0; i < r->nconns; i++) {
    replying += r->conns[i]->state == CONN_REPLY;
  }
  if (now >= r->deadline + ROOT_FLUSH_S || (r->complete && r->nconns == 0 && !lingers(r))) {
    return 1;
  }
  if (r->failed) {
    return replying == 0 && now >= r->linger_until;
  }
  return r->pub.joined == 0 && now >= r->deadline;
}
