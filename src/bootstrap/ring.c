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

struct pending {
  int fd;
  double deadline;
  size_t got;
  unsigned char in[RING_HELLO_BYTES];
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

/* Reads what arrived on a pending connection: 1 when it is rank-1's
 * complete, valid hello; -1 when it must be dropped; 0 to wait for more. */
static int pending_read(const struct tutti_bootstrap* b, struct pending* p) {
  ssize_t n = tutti_seal_recv(p->fd, p->in + p->got, RING_HELLO_BYTES - p->got);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
    return 0;
  }
  if (n <= 0) {
    return -1;
  }
  p->got += (size_t)n;
  if (tutti_bootstrap_handshake_check(p->in, p->got, b->secret, TUTTI_BS_RING, TUTTI_BS_RING_LEN) !=
      0) {
    return -1;
  }
  if (p->got < RING_HELLO_BYTES) {
    return 0;
  }
  const unsigned char* q = p->in + TUTTI_BS_PREAMBLE + TUTTI_BS_HEADER;
  int rank = (int32_t)tutti_socket_get32(q), nranks = (int32_t)tutti_socket_get32(q + 4);
  if (rank != (b->rank - 1 + b->nranks) % b->nranks || nranks != b->nranks) {
    WARN(
        "bootstrap: rank %d dropped a connection with this job's secret claiming rank %d of %d "
        "(expected rank %d of %d)",
        b->rank, rank, nranks, (b->rank - 1 + b->nranks) % b->nranks, b->nranks);
    return -1;
  }
  return 1;
}

/* Our hello to rank+1 and how much of it is out. */
struct hello_out {
  const unsigned char* msg;
  size_t len, sent;
};

/* Sends what the socket takes now: 0, or an errno value. */
static int hello_push(int fd, struct hello_out* o) {
  while (o->sent < o->len) {
    ssize_t n = tutti_seal_send(fd, o->msg + o->sent, o->len - o->sent);
    if (n > 0) {
      o->sent += (size_t)n;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return 0;
    } else if (n == 0 || errno != EINTR) {
      return n == 0 ? EPIPE : errno;
    }
  }
  return 0;
}

/* Waits for rank-1 on the listener, serving every connection from one poll()
 * so that strangers (garbage, a wrong secret, silence) are dropped without
 * delaying the genuine predecessor. Meanwhile our hello goes to rank+1:
 * encrypted, it waits for that rank's handshake, which comes once rank+1
 * accepts here in its own loop, so every rank of the ring must do both at
 * once. */
static ncclResult_t accept_prev(struct tutti_bootstrap* b, double deadline, struct hello_out* o) {
  struct pending pend[RING_PENDING];
  struct pollfd pfd[RING_PENDING + 2];
  int np = 0;
  ncclResult_t res = ncclSuccess;
  for (;;) {
    const int err = hello_push(b->next_fd, o);
    if (err != 0) {
      res = tutti_error(ncclRemoteError,
                        "bootstrap ring setup: rank %d could not send its hello to %s: %s", b->rank,
                        b->next_desc, tutti_seal_strerror(b->next_fd, err));
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
      res = tutti_error(ncclRemoteError,
                        "bootstrap ring setup: rank %d (listening at %s) waited %.3g s for %s to "
                        "connect, in vain: that rank failed, or a firewall blocks connections "
                        "between ranks; see its log",
                        b->rank, b->addr_text[b->rank], b->timeout_s, b->prev_desc);
      break;
    }
    for (int i = np - 1; i >= 0; i--) {
      if (now >= pend[i].deadline) {
        pending_drop(pend, &np, i, 1);
      }
    }
    pfd[0] = (struct pollfd){.fd = b->listen_fd, .events = POLLIN};
    for (int i = 0; i < np; i++) {
      pfd[1 + i] = (struct pollfd){.fd = pend[i].fd, .events = POLLIN};
    }
    const int out = o->sent < o->len;
    if (out) {
      pfd[1 + np] =
          (struct pollfd){.fd = b->next_fd, .events = tutti_seal_events(b->next_fd, POLLOUT)};
    }
    double left_ms = (deadline - now) * 1e3;
    if (poll(pfd, (nfds_t)(np + 1 + out), left_ms > 100 ? 100 : (int)left_ms + 1) <= 0) {
      continue;
    }
    /* Backwards: dropping i moves the last entry, already looked at, into i. */
    for (int i = np - 1; i >= 0; i--) {
      if (pfd[1 + i].revents == 0) {
        continue;
      }
      int st = pending_read(b, &pend[i]);
      if (st == 1) {
        b->prev_fd = pend[i].fd;
        pending_drop(pend, &np, i, 0);
        goto done;
      }
      if (st < 0) {
        pending_drop(pend, &np, i, 1);
      }
    }
    for (int k = 0; k < 16 && (pfd[0].revents & POLLIN); k++) {
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
      pend[np++] = (struct pending){.fd = fd, .deadline = now + TUTTI_BS_HANDSHAKE_S};
    }
  }
done:
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
    unsigned char msg[RING_HELLO_BYTES];
    tutti_bootstrap_preamble(msg, b->secret);
    tutti_socket_put32(msg + TUTTI_BS_PREAMBLE, TUTTI_BS_RING);
    tutti_socket_put32(msg + TUTTI_BS_PREAMBLE + 4, TUTTI_BS_RING_LEN);
    tutti_socket_put32(msg + TUTTI_BS_PREAMBLE + TUTTI_BS_HEADER, (uint32_t)b->rank);
    tutti_socket_put32(msg + TUTTI_BS_PREAMBLE + TUTTI_BS_HEADER + 4, (uint32_t)b->nranks);
    struct hello_out o = {msg, sizeof msg, 0};
    NCCLCHECK(accept_prev(b, deadline, &o));
    if (o.sent < o.len) { /* rank+1 waits for it in its own loop, accepting */
      NCCLCHECK(tutti_socket_send_all(b->next_fd, msg + o.sent, o.len - o.sent, &io));
    }
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
