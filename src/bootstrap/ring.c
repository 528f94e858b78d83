/* The bootstrap ring: each rank connects to rank+1 and accepts rank-1; the
 * two connections stay open for the all-gathers and barriers of the
 * communicator's life. */
#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap/internal.h"
#include "util/check.h"
#include "util/seal.h"

#define RING_PENDING 64 /* strangers tolerated at once while waiting for rank-1 */
#define RING_HELLO_BYTES (TUTTI_BS_PREAMBLE + TUTTI_BS_HEADER + TUTTI_BS_RING_LEN)

/* A connection to our listener: its hello, our proof, its MAC (util/hello.h). */
enum pending_stage { PEND_HELLO, PEND_PROOF, PEND_MAC };

struct pending {
  int fd;
  double deadline;
  enum pending_stage stage;
  size_t got; /* of in, then of mac */
  size_t off; /* of proof */
  unsigned char in[RING_HELLO_BYTES];
  unsigned char proof[TUTTI_BS_PROOF];
  unsigned char mac[TUTTI_BS_MAC];
};

static int aborted(const struct tutti_bootstrap* b) {
  return b->abort_flag != NULL && __atomic_load_n(b->abort_flag, __ATOMIC_RELAXED) != 0;
}

static void pending_drop(struct pending* pend, int* np, int i, int close_fd) {
  if (close_fd) {
    tutti_seal_close(pend[i].fd);
  }
  pend[i] = pend[--*np];
}

/* Reads into buf (want bytes, *got so far): 1 when all are in, 0 to wait,
 * -1 on end of stream or an error (errno set; 0 for end of stream). */
static int read_some(int fd, unsigned char* buf, size_t want, size_t* got) {
  ssize_t n = tutti_seal_recv(fd, buf + *got, want - *got);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
    return 0;
  }
  if (n <= 0) {
    errno = n == 0 ? 0 : errno;
    return -1;
  }
  *got += (size_t)n;
  return *got == want;
}

/* Sends what the socket takes now: 1 when all is out, 0 to wait, -1 (errno). */
static int send_some(int fd, const unsigned char* buf, size_t len, size_t* off) {
  while (*off < len) {
    ssize_t n = tutti_seal_send(fd, buf + *off, len - *off);
    if (n > 0) {
      *off += (size_t)n;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return 0;
    } else if (n == 0 || errno != EINTR) {
      errno = n == 0 ? EPIPE : errno;
      return -1;
    }
  }
  return 1;
}

/* What the ring's proofs are of: the listener's packed address (rank
 * `listener`'s entry of the table both ends read) and the connector's hello. */
static struct tutti_bs_proof_of proof_of(const struct tutti_bootstrap* b, int listener,
                                         const unsigned char* hello, unsigned char* packed) {
  tutti_socket_addr_pack(&b->addrs[listener], packed);
  return (struct tutti_bs_proof_of){TUTTI_HELLO_RING, packed, hello, RING_HELLO_BYTES};
}

/* A proven hello must claim to be rank-1 of this job's size (checked once
 * it proved the secret, so that only a rank of the job can make it warn). */
static int hello_ok(const struct tutti_bootstrap* b, const struct pending* p) {
  const unsigned char* q = p->in + TUTTI_BS_PREAMBLE + TUTTI_BS_HEADER;
  int rank = (int32_t)tutti_socket_get32(q), nranks = (int32_t)tutti_socket_get32(q + 4);
  if (rank != (b->rank - 1 + b->nranks) % b->nranks || nranks != b->nranks) {
    WARN(
        "bootstrap: rank %d dropped a connection with a ring hello claiming rank %d of %d "
        "(expected rank %d of %d)",
        b->rank, rank, nranks, (b->rank - 1 + b->nranks) % b->nranks, b->nranks);
    return 0;
  }
  return 1;
}

/* Moves a pending connection on: 1 when it is rank-1, having proved the
 * job's secret; -1 when it must be dropped; 0 to wait for more. */
static int pending_step(const struct tutti_bootstrap* b, struct pending* p) {
  unsigned char packed[TUTTI_SOCKET_ADDR_WIRE];
  const struct tutti_bs_proof_of pf = proof_of(b, b->rank, p->in, packed);
  const unsigned char* keys[2] = {b->secret, b->secret};
  int st;
  switch (p->stage) {
    case PEND_HELLO:
      if ((st = read_some(p->fd, p->in, RING_HELLO_BYTES, &p->got)) < 0 ||
          tutti_bootstrap_handshake_check(p->in, p->got, TUTTI_BS_RING, TUTTI_BS_RING_LEN) != 0) {
        return -1;
      }
      if (st == 0) {
        return 0;
      }
      if (tutti_bs_prove(&pf, keys, p->proof) != 0) {
        return -1;
      }
      p->stage = PEND_PROOF;
      p->off = 0;
      /* a new socket takes the proof at once */
      __attribute__((fallthrough));
    case PEND_PROOF:
      if ((st = send_some(p->fd, p->proof, TUTTI_BS_PROOF, &p->off)) <= 0) {
        return st;
      }
      p->stage = PEND_MAC;
      p->got = 0;
      __attribute__((fallthrough));
    case PEND_MAC:
      if ((st = read_some(p->fd, p->mac, TUTTI_BS_MAC, &p->got)) <= 0) {
        if (st < 0) {
          INFO(TUTTI_BOOTSTRAP,
               "bootstrap: rank %d dropped a connection that sent a ring hello and closed "
               "without proving this job's secret",
               b->rank);
        }
        return st;
      }
      if (tutti_bs_which_key(&pf, keys, p->proof, p->mac) != 0) {
        /* Anyone can send a hello: a stranger costs an INFO line, no more. */
        INFO(TUTTI_BOOTSTRAP,
             "bootstrap: rank %d dropped a connection that sent a ring hello but did not prove "
             "this job's secret (a stranger, another job's rank, or ranks given different ids)",
             b->rank);
        return -1;
      }
      return hello_ok(b, p) ? 1 : -1; /* said loudly: it holds the secret */
  }
  return -1;
}

/* Our side of the connection to rank+1: the hello, rank+1's proof, our MAC. */
enum out_stage { OUT_HELLO, OUT_PROOF, OUT_MAC, OUT_DONE };

struct hello_out {
  enum out_stage stage;
  unsigned char msg[RING_HELLO_BYTES];
  unsigned char proof[TUTTI_BS_PROOF];
  unsigned char mac[TUTTI_BS_MAC];
  size_t off; /* of msg, proof, mac by stage */
};

static short out_events(const struct tutti_bootstrap* b, const struct hello_out* o) {
  switch (o->stage) {
    case OUT_HELLO:
    case OUT_MAC:
      return tutti_seal_events(b->next_fd, POLLOUT);
    case OUT_PROOF:
      return POLLIN;
    default:
      return 0;
  }
}

/* Moves our side on without waiting. Encrypted, the hello waits for rank+1's
 * handshake, which comes only once rank+1 accepts in its own loop; and its
 * proof comes from that loop too: hence driven here, beside the accepts. */
static ncclResult_t out_step(struct tutti_bootstrap* b, struct hello_out* o) {
  const int next = (b->rank + 1) % b->nranks;
  int st = 1;
  if (o->stage == OUT_HELLO && (st = send_some(b->next_fd, o->msg, sizeof o->msg, &o->off)) > 0) {
    o->stage = OUT_PROOF;
    o->off = 0;
  }
  if (o->stage == OUT_PROOF &&
      (st = read_some(b->next_fd, o->proof, sizeof o->proof, &o->off)) > 0) {
    unsigned char packed[TUTTI_SOCKET_ADDR_WIRE];
    const struct tutti_bs_proof_of pf = proof_of(b, next, o->msg, packed);
    if (tutti_bs_answer(&pf, b->secret, o->proof, o->mac) != 0) {
      return tutti_error(ncclRemoteError,
                         "bootstrap ring setup: %s did not prove this job's secret, so rank %d "
                         "sent it nothing more: another program holds that rank's port (did "
                         "the rank die?), or the ranks were given different unique ids",
                         b->next_desc, b->rank);
    }
    o->stage = OUT_MAC;
    o->off = 0;
  }
  if (o->stage == OUT_MAC && (st = send_some(b->next_fd, o->mac, sizeof o->mac, &o->off)) > 0) {
    o->stage = OUT_DONE;
  }
  if (st < 0) {
    const int err = errno;
    return tutti_error(ncclRemoteError, "bootstrap ring setup: rank %d %s %s: %s", b->rank,
                       o->stage == OUT_PROOF ? "got no proof of this job's secret from"
                                             : "could not send its hello to",
                       b->next_desc,
                       err == 0 ? "the connection closed" : tutti_seal_strerror(b->next_fd, err));
  }
  return ncclSuccess;
}

/* Waits for rank-1 on the listener, serving every connection from one poll()
 * so that strangers (garbage, a wrong secret, silence) are dropped without
 * delaying the genuine predecessor, while our side of the connection to
 * rank+1 moves on: each rank must do both at once, or the ring would wait
 * on itself. */
static ncclResult_t accept_prev(struct tutti_bootstrap* b, double deadline, struct hello_out* o) {
  struct pending pend[RING_PENDING];
  struct pollfd pfd[RING_PENDING + 2];
  int np = 0;
  ncclResult_t res = ncclSuccess;
  for (;;) {
    if ((res = out_step(b, o)) != ncclSuccess) {
      break;
    }
    if (o->stage == OUT_DONE && b->prev_fd >= 0) {
      break;
    }
    double now = tutti_socket_now();
    if (aborted(b)) {
      res = tutti_error(ncclRemoteError,
                        "bootstrap ring setup of rank %d: stopped waiting for %s to connect: the "
                        "communicator was aborted",
                        b->rank, b->prev_desc);
      break;
    }
    if (now >= deadline) {
      res = b->prev_fd < 0
                ? tutti_error(ncclRemoteError,
                              "bootstrap ring setup: rank %d (listening at %s) waited %.3g s for "
                              "%s to connect, in vain: that rank failed, or a firewall blocks "
                              "connections between ranks; see its log",
                              b->rank, b->addr_text[b->rank], b->timeout_s, b->prev_desc)
                : tutti_error(ncclRemoteError,
                              "bootstrap ring setup: rank %d waited %.3g s for %s to prove this "
                              "job's secret, in vain: that rank failed; see its log",
                              b->rank, b->timeout_s, b->next_desc);
      break;
    }
    for (int i = np - 1; i >= 0; i--) {
      if (now >= pend[i].deadline) {
        pending_drop(pend, &np, i, 1);
      }
    }
    int n = 0;
    if (b->prev_fd < 0) {
      pfd[n++] = (struct pollfd){.fd = b->listen_fd, .events = POLLIN};
    }
    const int base = n;
    for (int i = 0; i < np; i++) {
      pfd[n++] = (struct pollfd){.fd = pend[i].fd,
                                 .events = pend[i].stage == PEND_PROOF ? POLLOUT : POLLIN};
    }
    const short oev = out_events(b, o);
    if (oev != 0) {
      pfd[n++] = (struct pollfd){.fd = b->next_fd, .events = oev};
    }
    double left_ms = (deadline - now) * 1e3;
    if (poll(pfd, (nfds_t)n, left_ms > 100 ? 100 : (int)left_ms + 1) <= 0) {
      continue;
    }
    /* Backwards: dropping i moves the last entry, already looked at, into i. */
    for (int i = np - 1; i >= 0; i--) {
      if (pfd[base + i].revents == 0) {
        continue;
      }
      int st = pending_step(b, &pend[i]);
      if (st == 1) {
        b->prev_fd = pend[i].fd;
        pending_drop(pend, &np, i, 0);
        while (np > 0) { /* the ring is all this rank needs: strangers go now */
          pending_drop(pend, &np, np - 1, 1);
        }
        break;
      }
      if (st < 0) {
        pending_drop(pend, &np, i, 1);
      }
    }
    for (int k = 0; k < 16 && b->prev_fd < 0 && (pfd[0].revents & POLLIN); k++) {
      int fd = tutti_socket_try_accept(b->listen_fd, NULL);
      if (fd < 0) {
        break;
      }
      if (np == RING_PENDING) {
        int old = 0;
        for (int i = 1; i < np; i++) {
          old = pend[i].deadline < pend[old].deadline ? i : old;
        }
        pending_drop(pend, &np, old, 1);
      }
      pend[np++] =
          (struct pending){.fd = fd, .deadline = now + TUTTI_BS_HANDSHAKE_S, .stage = PEND_HELLO};
    }
  }
  while (np > 0) {
    pending_drop(pend, &np, np - 1, 1);
  }
  return res;
}

ncclResult_t tutti_bootstrap_ring_connect(struct tutti_bootstrap* b, double deadline) {
  if (b->nranks > 1) {
    int next = (b->rank + 1) % b->nranks, prev = (b->rank - 1 + b->nranks) % b->nranks;
    snprintf(b->next_desc, sizeof b->next_desc, "rank %d at %s", next, b->addr_text[next]);
    snprintf(b->prev_desc, sizeof b->prev_desc, "rank %d at %s", prev, b->addr_text[prev]);
    char doing[64];
    snprintf(doing, sizeof doing, "bootstrap ring setup of rank %d", b->rank);
    struct tutti_socket_io io = {deadline, b->abort_flag, b->next_desc, doing};
    NCCLCHECK(tutti_socket_connect(&b->addrs[next], &io,
                                   "a firewall may block connections between ranks, or "
                                   "NCCL_SOCKET_IFNAME names an interface other hosts cannot reach",
                                   &b->next_fd));
    struct hello_out o = {.stage = OUT_HELLO};
    unsigned char* msg = o.msg;
    NCCLCHECK(tutti_bootstrap_preamble(msg));
    tutti_socket_put32(msg + TUTTI_BS_PREAMBLE, TUTTI_BS_RING);
    tutti_socket_put32(msg + TUTTI_BS_PREAMBLE + 4, TUTTI_BS_RING_LEN);
    tutti_socket_put32(msg + TUTTI_BS_PREAMBLE + TUTTI_BS_HEADER, (uint32_t)b->rank);
    tutti_socket_put32(msg + TUTTI_BS_PREAMBLE + TUTTI_BS_HEADER + 4, (uint32_t)b->nranks);
    const ncclResult_t res = accept_prev(b, deadline, &o);
    tutti_sha256_wipe(o.mac, sizeof o.mac);
    NCCLCHECK(res);
  }
  /* The ring is all this rank needs: later connections are refused outright. */
  close(b->listen_fd);
  b->listen_fd = -1;
  return ncclSuccess;
}

static const char* describe(uint32_t type) {
  switch (type) {
    case TUTTI_BS_GATHER:
      return "an all-gather block";
    case TUTTI_BS_ENTER:
    case TUTTI_BS_LEAVE:
      return "a barrier token";
    default:
      return "an unknown message";
  }
}

/* After a failure the ring is out of step: shutting both connections down
 * makes the neighbours fail at once too (they see EOF), so the error goes
 * round the ring in a few hops instead of each rank waiting for its timeout. */
static ncclResult_t ring_fail(struct tutti_bootstrap* b, ncclResult_t res) {
  b->broken = 1;
  shutdown(b->next_fd, SHUT_RDWR);
  shutdown(b->prev_fd, SHUT_RDWR);
  return res;
}

static ncclResult_t ready(const struct tutti_bootstrap* b, const char* what) {
  if (b == NULL) {
    return tutti_error(ncclInvalidArgument, "%s: the bootstrap handle is NULL", what);
  }
  if (b->broken) {
    return tutti_error(ncclRemoteError,
                       "%s of rank %d: an earlier bootstrap operation failed half-way, so the "
                       "ring is out of step; the communicator must be aborted",
                       what, b->rank);
  }
  return ncclSuccess;
}

/* A received header must be what this rank is doing; anything else means the
 * ranks' bootstrap calls went out of step. */
static ncclResult_t expect(struct tutti_bootstrap* b, const unsigned char* hdr, uint32_t type,
                           size_t len, const char* doing) {
  uint32_t t = tutti_socket_get32(hdr), l = tutti_socket_get32(hdr + 4);
  if (t == type && l == len) {
    return ncclSuccess;
  }
  return tutti_error(ncclInvalidUsage,
                     "%s: %s sent %s of %u bytes where %s of %zu bytes was expected: the ranks "
                     "made different bootstrap calls, or all-gathers of different sizes",
                     doing, b->prev_desc, describe(t), l, describe(type), len);
}

static ncclResult_t allgather(struct tutti_bootstrap* b, void* data, size_t bytes,
                              volatile int* abort_flag) {
  NCCLCHECK(ready(b, "bootstrap all-gather"));
  if (b->nranks == 1) {
    return ncclSuccess;
  }
  if (bytes > 0xffffffffu || (data == NULL && bytes > 0)) {
    return tutti_error(ncclInvalidArgument,
                       "bootstrap all-gather of rank %d: %zu bytes per rank at %p is not a "
                       "valid buffer (at most 4 GiB per rank)",
                       b->rank, bytes, data);
  }
  char doing[64];
  snprintf(doing, sizeof doing, "bootstrap all-gather of rank %d", b->rank);
  double deadline = tutti_socket_now() + b->timeout_s;
  struct tutti_socket_io to = {deadline, abort_flag, b->next_desc, doing};
  struct tutti_socket_io from = {deadline, abort_flag, b->prev_desc, doing};
  unsigned char* d = data;
  ncclResult_t res = ncclSuccess;
  /* Step s forwards the block that arrived in step s-1 (at first our own). */
  for (int s = 0; s < b->nranks - 1 && res == ncclSuccess; s++) {
    size_t sblk = (size_t)((b->rank - s + b->nranks) % b->nranks);
    size_t rblk = (size_t)((b->rank - s - 1 + b->nranks) % b->nranks);
    unsigned char out[TUTTI_BS_HEADER], in[TUTTI_BS_HEADER];
    tutti_socket_put32(out, TUTTI_BS_GATHER);
    tutti_socket_put32(out + 4, (uint32_t)bytes);
    res = tutti_socket_exchange(b->next_fd, out, sizeof out, &to, b->prev_fd, in, sizeof in, &from);
    if (res == ncclSuccess) {
      res = expect(b, in, TUTTI_BS_GATHER, bytes, doing);
    }
    if (res == ncclSuccess && bytes > 0) {
      res = tutti_socket_exchange(b->next_fd, d + sblk * bytes, bytes, &to, b->prev_fd,
                                  d + rblk * bytes, bytes, &from);
    }
  }
  return res == ncclSuccess ? res : ring_fail(b, res);
}

ncclResult_t tutti_bootstrap_allgather(struct tutti_bootstrap* b, void* data, size_t bytes) {
  return allgather(b, data, bytes, b != NULL ? b->abort_flag : NULL);
}

ncclResult_t tutti_bootstrap_allgather_watch(struct tutti_bootstrap* b, void* data, size_t bytes,
                                             volatile int* abort_flag) {
  return allgather(b, data, bytes, abort_flag);
}

static ncclResult_t token(struct tutti_bootstrap* b, int sending, uint32_t type,
                          const struct tutti_socket_io* io) {
  unsigned char hdr[TUTTI_BS_HEADER];
  if (sending) {
    tutti_socket_put32(hdr, type);
    tutti_socket_put32(hdr + 4, 0);
    return tutti_socket_send_all(b->next_fd, hdr, sizeof hdr, io);
  }
  NCCLCHECK(tutti_socket_recv_all(b->prev_fd, hdr, sizeof hdr, io));
  return expect(b, hdr, type, 0, io->doing);
}

/* A token goes round the ring twice: once to learn that everyone entered,
 * once to let everyone leave. 2n-1 messages, against n(n-1) for an
 * all-gather of nothing, which matters with many ranks on few cores. */
ncclResult_t tutti_bootstrap_barrier(struct tutti_bootstrap* b) {
  NCCLCHECK(ready(b, "bootstrap barrier"));
  if (b->nranks == 1) {
    return ncclSuccess;
  }
  char doing[64];
  snprintf(doing, sizeof doing, "bootstrap barrier of rank %d", b->rank);
  double deadline = tutti_socket_now() + b->timeout_s;
  struct tutti_socket_io to = {deadline, b->abort_flag, b->next_desc, doing};
  struct tutti_socket_io from = {deadline, b->abort_flag, b->prev_desc, doing};
  ncclResult_t res;
  if (b->rank == 0) {
    NCCLCHECKGOTO(token(b, 1, TUTTI_BS_ENTER, &to), res, fail);
    NCCLCHECKGOTO(token(b, 0, TUTTI_BS_ENTER, &from), res, fail);
    NCCLCHECKGOTO(token(b, 1, TUTTI_BS_LEAVE, &to), res, fail);
  } else {
    NCCLCHECKGOTO(token(b, 0, TUTTI_BS_ENTER, &from), res, fail);
    NCCLCHECKGOTO(token(b, 1, TUTTI_BS_ENTER, &to), res, fail);
    NCCLCHECKGOTO(token(b, 0, TUTTI_BS_LEAVE, &from), res, fail);
    if (b->rank != b->nranks - 1) {
      NCCLCHECKGOTO(token(b, 1, TUTTI_BS_LEAVE, &to), res, fail);
    }
  }
  return ncclSuccess;
fail:
  return ring_fail(b, res);
}
